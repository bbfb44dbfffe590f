//! Who a session acts for, and the bearer tokens that say so over HTTP.
//!
//! Tokens are compared by their SHA-256 digests in constant time, every configured token on
//! every request, so neither the length nor the position of a match shows in the timing.

use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq;

/// The actor and profile every call of a session runs as.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    /// Who asks, as policies see it (`principal` in Cedar).
    pub actor: String,
    /// The profile whose tools the session sees and may call.
    pub profile: String,
}

impl Principal {
    pub fn new(actor: impl Into<String>, profile: impl Into<String>) -> Self {
        Principal {
            actor: actor.into(),
            profile: profile.into(),
        }
    }
}

/// Bearer tokens and the principals they stand for.
#[derive(Clone, Default)]
pub struct TokenTable {
    entries: Vec<([u8; 32], Principal)>,
}

impl std::fmt::Debug for TokenTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the digests: a debug dump is no place for anything derived from a secret.
        f.debug_struct("TokenTable")
            .field(
                "principals",
                &self.entries.iter().map(|(_, p)| p).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// Why a token cannot be accepted.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("a token must be at least {MIN_TOKEN_BYTES} bytes long")]
    TooShort,
    #[error("a token may hold only visible ASCII characters")]
    NotVisibleAscii,
    #[error("this token is already configured for another principal")]
    Duplicate,
}

/// The shortest token accepted: 128 bits written in hex.
pub const MIN_TOKEN_BYTES: usize = 32;

impl TokenTable {
    pub fn new() -> Self {
        TokenTable::default()
    }

    /// Accepts `token` as `principal`'s.
    pub fn insert(&mut self, token: &str, principal: Principal) -> Result<(), TokenError> {
        if token.len() < MIN_TOKEN_BYTES {
            return Err(TokenError::TooShort);
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(TokenError::NotVisibleAscii);
        }
        let digest = digest(token);
        if self.entries.iter().any(|(d, _)| *d == digest) {
            return Err(TokenError::Duplicate);
        }
        self.entries.push((digest, principal));
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The principal `token` stands for. Every entry is compared, match or not.
    pub fn lookup(&self, token: &str) -> Option<&Principal> {
        let presented = digest(token);
        let mut found = None;
        for (digest, principal) in &self.entries {
            if bool::from(digest.ct_eq(&presented)) {
                found = Some(principal);
            }
        }
        found
    }

    /// The principal an `Authorization` header value stands for (`Bearer <token>`, the scheme
    /// in any case).
    pub fn authorize(&self, header: Option<&[u8]>) -> Option<&Principal> {
        let header = std::str::from_utf8(header?).ok()?;
        let (scheme, token) = header.trim().split_once(' ')?;
        if !scheme.eq_ignore_ascii_case("bearer") {
            return None;
        }
        self.lookup(token.trim())
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

/// A fresh random token, 256 bits in hex, for a server started without configured tokens:
/// made as the approval console makes its secrets.
pub fn generate_token() -> Result<String, toolgate_edge::RandomError> {
    toolgate_edge::random_hex()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALICE: &str = "alice-token-0123456789abcdef0123456789";
    const BOB: &str = "bob-token-0123456789abcdef0123456789ab";

    #[test]
    fn tokens_map_to_their_principals_only() {
        let mut table = TokenTable::new();
        table
            .insert(ALICE, Principal::new("alice", "readonly"))
            .unwrap();
        table.insert(BOB, Principal::new("bob", "default")).unwrap();
        assert_eq!(table.lookup(ALICE).unwrap().actor, "alice");
        assert_eq!(table.lookup(BOB).unwrap().profile, "default");
        assert_eq!(table.lookup(&ALICE[1..]), None);
        assert_eq!(table.lookup(""), None);
        let header = format!("bearer {ALICE}");
        assert_eq!(
            table.authorize(Some(header.as_bytes())).unwrap().actor,
            "alice"
        );
        assert_eq!(table.authorize(Some(ALICE.as_bytes())), None);
        assert_eq!(
            table.authorize(Some(format!("Basic {ALICE}").as_bytes())),
            None
        );
        assert_eq!(table.authorize(Some(b"Bearer \xff")), None);
        assert_eq!(table.authorize(None), None);
        assert!(!format!("{table:?}").contains("token"), "{table:?}");
    }

    #[test]
    fn weak_and_repeated_tokens_are_refused() {
        let mut table = TokenTable::new();
        let p = Principal::new("a", "default");
        assert_eq!(table.insert("short", p.clone()), Err(TokenError::TooShort));
        let spaced = format!("{ALICE} x");
        assert_eq!(
            table.insert(&spaced, p.clone()),
            Err(TokenError::NotVisibleAscii)
        );
        table.insert(ALICE, p.clone()).unwrap();
        assert_eq!(table.insert(ALICE, p), Err(TokenError::Duplicate));
        let token = generate_token().unwrap();
        assert_eq!(token.len(), 64);
        assert_ne!(token, generate_token().unwrap());
    }
}
