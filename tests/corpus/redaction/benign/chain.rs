//! The chain: how a record's body and hash are made.
//!
//! A record's *body* is canonical JSON, `{"at":"<UTC time>","call":{…},"seq":N}`: the keys are
//! already in canonical order, so the body is built by concatenation around the call's own
//! canonical JSON, and the sequence number is always its last member. Its *hash* is
//!
//! ```text
//! hash = SHA-256( prev_hash (32 bytes) ‖ seq (8 bytes, big-endian) ‖ body (UTF-8) )
//! ```
//!
//! where `prev_hash` is the previous record's hash, or 32 zero bytes for record 1. Because the
//! sequence number is inside what is hashed, a record moved to another place in the log no
//! longer fits there; because the previous hash is, a record deleted, inserted or altered
//! breaks the link of the record after it.

use sha2::{Digest as _, Sha256};

/// The previous hash of record 1.
pub const GENESIS: [u8; 32] = [0; 32];

/// The hash of the record numbered `seq` with `body`, following `prev_hash`.
pub fn record_hash(prev_hash: &[u8], seq: u64, body: &str) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update(prev_hash);
    hasher.update(seq.to_be_bytes());
    hasher.update(body.as_bytes());
    hasher.finalize().into()
}

/// The body of record `seq`, made at `at_ms` (milliseconds since the Unix epoch), around the
/// call's canonical JSON.
pub fn body(seq: u64, at_ms: u64, call: &str) -> String {
    let mut text = String::with_capacity(call.len() + 64);
    text.push_str("{\"at\":\"");
    text.push_str(&utc_time(at_ms));
    text.push_str("\",\"call\":");
    text.push_str(call);
    text.push_str(",\"seq\":");
    text.push_str(&seq.to_string());
    text.push('}');
    text
}

/// The sequence number a body claims, read from its end (where [`body`] puts it); `None` for
/// text that does not end like a body.
pub fn claimed_seq(body: &str) -> Option<u64> {
    let inner = body.strip_suffix('}')?;
    let start = inner.rfind(",\"seq\":")?;
    let digits = inner.get(start + 7..)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || digits.len() > 20 {
        return None;
    }
    digits.parse().ok()
}

/// `sha256:<hex>` of a hash.
pub fn hex(hash: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(7 + hash.len() * 2);
    text.push_str("sha256:");
    for byte in hash {
        for nibble in [byte >> 4, byte & 0xf] {
            if let Some(&digit) = DIGITS.get(usize::from(nibble)) {
                text.push(char::from(digit));
            }
        }
    }
    text
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` for milliseconds since the Unix epoch.
pub fn utc_time(ms: u64) -> String {
    let secs = ms / 1000;
    let days = secs / 86_400;
    let rest = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        ms % 1000
    )
}

/// The proleptic Gregorian date `days` days after 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_canonical_and_end_with_their_number() {
        let call = r#"{"b":1,"tool":"read_file"}"#;
        let text = body(42, 1_764_494_400_123, call);
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(toolgate_core::canonical_json(&value), text);
        assert_eq!(value["at"], "2025-11-30T09:20:00.123Z");
        assert_eq!(claimed_seq(&text), Some(42));
        assert_eq!(claimed_seq("{\"seq\":1"), None);
        assert_eq!(claimed_seq("{\"a\":1,\"seq\":x}"), None);
    }

    #[test]
    fn dates_match_known_days() {
        assert_eq!(utc_time(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc_time(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(utc_time(4_102_444_799_999), "2099-12-31T23:59:59.999Z");
    }

    #[test]
    fn every_input_changes_the_hash() {
        let base = record_hash(&GENESIS, 1, "{}");
        assert_ne!(base, record_hash(&[1; 32], 1, "{}"));
        assert_ne!(base, record_hash(&GENESIS, 2, "{}"));
        assert_ne!(base, record_hash(&GENESIS, 1, "{ }"));
        assert_eq!(hex(&[0xab, 0x01]), "sha256:ab01");
    }
}
