//! The database set up: its directory (user-only), write-ahead logging, `synchronous=FULL`,
//! the tables and the format version.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rusqlite::Connection;

use crate::AuditError;

use super::options::AuditOptions;

/// The version of the record layout, in `PRAGMA user_version`.
const FORMAT: i64 = 1;

/// Creates `dir` user-only if it is missing.
pub(super) fn create_private_dir(dir: &Path) -> Result<(), AuditError> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|source| AuditError::CreateDir {
            path: dir.display().to_string(),
            source,
        })
}

pub(super) fn wal_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

/// [`prepare`], tried again while the database is locked, until the busy timeout has passed.
/// A new database starts in SQLite's rollback journal mode, and while another process turns
/// it to WAL, asking the same holds a read lock that SQLite will not wait with (the two could
/// deadlock): it answers "database is locked" at once instead of calling the busy handler.
/// Trying again from the start, with no lock held, waits as any other lock is waited for.
pub(super) fn prepare_waiting(
    connection: &Connection,
    options: &AuditOptions,
    shown: &str,
) -> Result<(), AuditError> {
    let deadline = Instant::now() + options.busy_timeout;
    loop {
        match prepare(connection, options, shown) {
            Err(AuditError::Sqlite { ref source, .. })
                if source.sqlite_error_code() == Some(rusqlite::ErrorCode::DatabaseBusy)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(5));
            }
            result => return result,
        }
    }
}

/// Sets the connection up for durable appends and creates the tables if they are missing (a
/// new log, or one whose creation a crash cut short).
fn prepare(connection: &Connection, options: &AuditOptions, shown: &str) -> Result<(), AuditError> {
    let sqlite = |source| AuditError::Sqlite {
        path: shown.to_owned(),
        source,
    };
    connection
        .busy_timeout(options.busy_timeout)
        .map_err(sqlite)?;
    let mode: String = connection
        .query_row("PRAGMA journal_mode=WAL", [], |row| row.get(0))
        .map_err(sqlite)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(AuditError::JournalMode {
            path: shown.to_owned(),
            mode,
        });
    }
    connection
        .pragma_update(None, "synchronous", "FULL")
        .map_err(sqlite)?;
    connection
        .execute_batch(
            "CREATE TABLE IF NOT EXISTS records (
                 seq INTEGER PRIMARY KEY,
                 body TEXT NOT NULL,
                 prev_hash BLOB NOT NULL,
                 hash BLOB NOT NULL
             ) STRICT;
             CREATE TABLE IF NOT EXISTS intents (
                 seq INTEGER PRIMARY KEY,
                 call_id TEXT NOT NULL,
                 tool TEXT NOT NULL,
                 owner TEXT NOT NULL
             ) STRICT;",
        )
        .map_err(sqlite)?;
    let version: i64 = connection
        .query_row("PRAGMA user_version", [], |row| row.get(0))
        .map_err(sqlite)?;
    match version {
        0 => connection
            .pragma_update(None, "user_version", FORMAT)
            .map_err(sqlite),
        FORMAT => Ok(()),
        found => Err(AuditError::Format {
            path: shown.to_owned(),
            found,
            supported: FORMAT,
        }),
    }
}
