//! What the caller of [`AuditLog::open`](super::AuditLog::open) chooses: when records are
//! flushed, and how durable each one is.

use std::time::Duration;

/// When records are flushed to the disk, as `[audit] sync` sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SyncMode {
    /// Records of calls with effects are flushed before the call runs and before its result
    /// returns; the others are committed before their result returns and flushed within
    /// [`FLUSH_INTERVAL`].
    #[default]
    Effects,
    /// Every record is flushed before its result returns.
    Always,
}

impl SyncMode {
    /// The setting's value in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            SyncMode::Effects => "effects",
            SyncMode::Always => "always",
        }
    }
}

/// An `[audit] sync` value that names no [`SyncMode`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown audit sync setting `{0}`: expected `effects` or `always`")]
pub struct UnknownSyncMode(pub String);

impl std::str::FromStr for SyncMode {
    type Err = UnknownSyncMode;

    fn from_str(text: &str) -> Result<Self, UnknownSyncMode> {
        match text {
            "effects" => Ok(SyncMode::Effects),
            "always" => Ok(SyncMode::Always),
            _ => Err(UnknownSyncMode(text.to_owned())),
        }
    }
}

/// How durable a record is once [`AuditLog::append_with`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// On the disk: survives a power cut.
    Flushed,
    /// In the WAL: survives a crash of toolgate; on the disk within [`FLUSH_INTERVAL`].
    Committed,
}

/// How a log is opened.
#[derive(Debug, Clone)]
pub struct AuditOptions {
    /// Also keep the redacted messages and output of each call (a local debug setting; off by
    /// default).
    pub store_values: bool,
    /// How long a commit waits for another process's transaction before it fails.
    pub busy_timeout: Duration,
    /// When records are flushed.
    pub sync: SyncMode,
    /// Give the WAL, once the log is open, the size it reaches between two checkpoints, as
    /// blocks written with zeros past its end. A flush of a commit that grows the file also
    /// commits the file's new size to the file system's journal; one that overwrites blocks
    /// the file already has does not (about 0.05 of 0.15 ms per flush on the development
    /// machine). For a process that appends for long (`serve`): a one-shot `call` would write
    /// 4 MiB for one record.
    pub reserve_wal: bool,
}

impl Default for AuditOptions {
    fn default() -> Self {
        AuditOptions {
            store_values: false,
            busy_timeout: Duration::from_secs(5),
            sync: SyncMode::Effects,
            reserve_wal: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sync_settings_parse_and_unknown_ones_are_refused_by_name() {
        assert_eq!("effects".parse::<SyncMode>(), Ok(SyncMode::Effects));
        assert_eq!("always".parse::<SyncMode>(), Ok(SyncMode::Always));
        let error = "never".parse::<SyncMode>().unwrap_err().to_string();
        assert!(error.contains("`never`"), "{error}");
    }
}
