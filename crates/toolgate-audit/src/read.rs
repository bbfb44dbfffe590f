//! Reading the log back: the newest records, records after a number, the whole log as JSON
//! lines. Readers never create a log and never block the writer (WAL readers see the last
//! commit when they started).

use std::io::Write;
use std::path::Path;

use rusqlite::{Connection, OpenFlags};
use serde_json::{Value, json};

use crate::AuditError;
use crate::chain;

/// One record as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredRecord {
    /// The number it is stored under (the chain says which number it should have).
    pub seq: i64,
    /// The canonical JSON the hash covers: `{"at":…,"call":{…},"seq":N}`.
    pub body: String,
    /// The hash of the record before it (32 zero bytes for the first).
    pub prev_hash: Vec<u8>,
    /// SHA-256 over the previous hash, the number and the body (see [`crate::chain`]).
    pub hash: Vec<u8>,
}

impl StoredRecord {
    /// The body as JSON, with the stored hashes beside it:
    /// `{"at":…,"call":{…},"hash":"sha256:…","prev_hash":"sha256:…","seq":N}`. A body that is
    /// not JSON (a damaged record) is kept as a string under `"body"`.
    pub fn to_json(&self) -> Value {
        let mut value = match serde_json::from_str::<Value>(&self.body) {
            Ok(Value::Object(map)) => Value::Object(map),
            _ => json!({"seq": self.seq, "body": self.body}),
        };
        if let Some(map) = value.as_object_mut() {
            map.insert("hash".to_owned(), json!(chain::hex(&self.hash)));
            map.insert("prev_hash".to_owned(), json!(chain::hex(&self.prev_hash)));
        }
        value
    }
}

/// A connection that reads the log at `path` and never creates one.
pub(crate) fn open_for_reading(path: &Path) -> Result<Connection, AuditError> {
    if !path.is_file() {
        return Err(AuditError::Missing(path.display().to_string()));
    }
    let connection = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )
    .map_err(|source| sqlite(path, source))?;
    connection
        .busy_timeout(std::time::Duration::from_secs(5))
        .map_err(|source| sqlite(path, source))?;
    Ok(connection)
}

pub(crate) fn sqlite(path: &Path, source: rusqlite::Error) -> AuditError {
    AuditError::Sqlite {
        path: path.display().to_string(),
        source,
    }
}

fn stored(row: &rusqlite::Row<'_>) -> rusqlite::Result<StoredRecord> {
    Ok(StoredRecord {
        seq: row.get(0)?,
        body: row.get(1)?,
        prev_hash: row.get(2)?,
        hash: row.get(3)?,
    })
}

/// The newest `count` records, oldest first.
pub fn last(path: &Path, count: usize) -> Result<Vec<StoredRecord>, AuditError> {
    let connection = open_for_reading(path)?;
    let limit = i64::try_from(count).unwrap_or(i64::MAX);
    let mut statement = connection
        .prepare("SELECT seq, body, prev_hash, hash FROM records ORDER BY seq DESC LIMIT ?1")
        .map_err(|e| sqlite(path, e))?;
    let mut records = statement
        .query_map([limit], stored)
        .and_then(Iterator::collect::<rusqlite::Result<Vec<_>>>)
        .map_err(|e| sqlite(path, e))?;
    records.reverse();
    Ok(records)
}

/// Up to `limit` records numbered above `seq`, oldest first.
pub fn after(path: &Path, seq: i64, limit: usize) -> Result<Vec<StoredRecord>, AuditError> {
    let connection = open_for_reading(path)?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut statement = connection
        .prepare(
            "SELECT seq, body, prev_hash, hash FROM records WHERE seq > ?1 ORDER BY seq LIMIT ?2",
        )
        .map_err(|e| sqlite(path, e))?;
    statement
        .query_map([seq, limit], stored)
        .and_then(Iterator::collect::<rusqlite::Result<Vec<_>>>)
        .map_err(|e| sqlite(path, e))
}

/// Writes every record to `out`, one JSON object a line, oldest first; returns the count.
pub fn export_jsonl(path: &Path, out: &mut dyn Write) -> Result<u64, AuditError> {
    let connection = open_for_reading(path)?;
    let mut statement = connection
        .prepare("SELECT seq, body, prev_hash, hash FROM records ORDER BY seq")
        .map_err(|e| sqlite(path, e))?;
    let mut rows = statement.query([]).map_err(|e| sqlite(path, e))?;
    let mut count = 0;
    while let Some(row) = rows.next().map_err(|e| sqlite(path, e))? {
        let record = stored(row).map_err(|e| sqlite(path, e))?;
        serde_json::to_writer(&mut *out, &record.to_json())
            .map_err(|e| AuditError::Write(e.into()))?;
        out.write_all(b"\n").map_err(AuditError::Write)?;
        count += 1;
    }
    out.flush().map_err(AuditError::Write)?;
    Ok(count)
}

/// The newest record of a log, for a witness outside the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogHead {
    /// Its number (0 for an empty log).
    pub seq: u64,
    /// `sha256:<hex>` of it (of 32 zero bytes for an empty log).
    pub hash: String,
    /// When it was appended.
    pub at: Option<String>,
    /// The record the head file witnesses.
    pub witnessed: Option<u64>,
}

/// The newest record of the log at `path`, once it is checked to hash to its stored hash.
pub fn log_head(path: &Path) -> Result<LogHead, AuditError> {
    let witnessed = crate::head::read_head(&crate::head::head_path(path))
        .ok()
        .flatten()
        .map(|h| h.seq);
    let Some(record) = last(path, 1)?.pop() else {
        return Ok(LogHead {
            seq: 0,
            hash: chain::hex(&chain::GENESIS),
            at: None,
            witnessed,
        });
    };
    let seq = u64::try_from(record.seq).unwrap_or(0);
    let intact = chain::claimed_seq(&record.body) == Some(seq)
        && chain::record_hash(&record.prev_hash, seq, &record.body).as_slice()
            == record.hash.as_slice();
    if !intact {
        return Err(AuditError::Refused {
            path: path.display().to_string(),
            message: format!(
                "the newest record {seq} does not verify; run `toolgate audit verify`"
            ),
        });
    }
    let at = record
        .to_json()
        .get("at")
        .and_then(|v| v.as_str())
        .map(str::to_owned);
    Ok(LogHead {
        seq,
        hash: chain::hex(&record.hash),
        at,
        witnessed,
    })
}
