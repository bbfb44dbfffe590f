//! What toolgate's loopback servers and its clients share below any protocol, so that the MCP
//! server, the approval console and the upstream client need not know each other to share it:
//!
//! - [`lines`]: newline-delimited input split as it arrives, each line capped, so that memory
//!   stays bounded whatever the other side writes (an MCP client's standard input, an
//!   upstream's output, an HTTP body's event stream);
//! - [`loopback`]: the `Host` and `Origin` rules of a server on a loopback address that a
//!   browser page may aim at (DNS rebinding, cross-site requests);
//! - [`random_hex`]: the random secrets such a server hands out.
//!
//! It stands on nothing of toolgate's and does no I/O but reading what it is given and the
//! operating system's random generator.
//!
//! ```
//! use toolgate_edge::lines::{Line, LineSplitter};
//!
//! let mut lines = LineSplitter::new(4);
//! assert_eq!(lines.take(b"ab\ncd"), (3, Some(Line::Full(b"ab".to_vec()))));
//! assert_eq!(lines.take(b"cd"), (2, None));
//! assert_eq!(lines.end(), Line::Full(b"cd".to_vec()));
//! assert!(toolgate_edge::loopback::is_loopback_origin(Some("http://localhost:6274")));
//! ```

pub mod lines;
pub mod loopback;

/// Why the operating system gave no random bytes for a secret.
pub use getrandom::Error as RandomError;

/// 256 bits from the operating system's generator, as 64 hex digits: the console's secrets,
/// and the bearer token of an MCP server started without configured ones.
pub fn random_hex() -> Result<String, RandomError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn secrets_are_64_hex_digits_and_differ() {
        let a = super::random_hex().unwrap();
        let b = super::random_hex().unwrap();
        assert_eq!(a.len(), 64);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
