//! `toolgate audit`: verify, tail and export the audit log; and opening the log for `call`
//! and `serve`.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use serde_json::Value;
use toolgate_audit::{AuditLog, AuditOptions, StoredRecord, Verdict};

use crate::cli::{AuditCommand, AuditLogArgs};
use crate::settings::Settings;

/// How often `tail --follow` looks for new records.
const FOLLOW_INTERVAL: Duration = Duration::from_millis(250);

/// The configured audit log, opened for appending.
pub fn open_log(settings: &Settings) -> anyhow::Result<AuditLog> {
    let path = settings.audit_path()?;
    let options = AuditOptions {
        store_values: settings.audit.store_values,
        ..AuditOptions::default()
    };
    AuditLog::open(&path, options).context("cannot start without the audit log")
}

pub fn run(command: &AuditCommand) -> anyhow::Result<u8> {
    match command {
        AuditCommand::Verify(log) => verify(log),
        AuditCommand::Tail { lines, follow, log } => tail(log, *lines, *follow),
        AuditCommand::Export { jsonl: _, log } => export(log),
    }
}

fn db_path(args: &AuditLogArgs) -> anyhow::Result<PathBuf> {
    match &args.db {
        Some(path) => Ok(path.clone()),
        None => Ok(Settings::load(args.config.config.as_deref())?.audit_path()?),
    }
}

fn verify(args: &AuditLogArgs) -> anyhow::Result<u8> {
    let path = db_path(args)?;
    let verification = toolgate_audit::verify(&path)?;
    match &verification.verdict {
        Verdict::Intact => {
            println!(
                "ok: {} records, chain intact ({})",
                verification.records,
                path.display()
            );
            if let Some((seq, hash)) = &verification.head {
                println!("head: record {seq} {hash}");
            }
            Ok(0)
        }
        Verdict::Broken(finding) => {
            println!("broken: {finding} ({})", path.display());
            println!("the {} record(s) before it verify", verification.records);
            Ok(1)
        }
    }
}

fn tail(args: &AuditLogArgs, lines: usize, follow: bool) -> anyhow::Result<u8> {
    let path = db_path(args)?;
    let mut last_seq = 0;
    let mut out = std::io::stdout().lock();
    for record in toolgate_audit::last(&path, lines)? {
        last_seq = record.seq;
        if writeln!(out, "{}", line(&record)).is_err() {
            return Ok(0);
        }
    }
    if !follow {
        return Ok(0);
    }
    loop {
        let _ = out.flush();
        std::thread::sleep(FOLLOW_INTERVAL);
        for record in toolgate_audit::after(&path, last_seq, 1000)? {
            last_seq = record.seq;
            if writeln!(out, "{}", line(&record)).is_err() {
                // The reader went away (a closed pipe): following is over.
                return Ok(0);
            }
        }
    }
}

/// `seq  time  status  tool  stage/code  duration  call id`.
fn line(record: &StoredRecord) -> String {
    let value = record.to_json();
    let field = |object: Option<&Value>, key: &str| object.and_then(|o| o.get(key)).cloned();
    let call = value.get("call");
    let text = |v: Option<Value>| match v {
        Some(Value::String(s)) => s,
        _ => "-".to_owned(),
    };
    let reason = match (field(call, "rejection"), field(call, "error")) {
        (Some(rejection), _) => format!(
            "{}/{}",
            text(field(Some(&rejection), "stage")),
            text(field(Some(&rejection), "code"))
        ),
        (None, Some(error)) => text(field(Some(&error), "code")),
        (None, None) => "-".to_owned(),
    };
    let micros = field(call, "total_ns")
        .and_then(|v| v.as_u64())
        .unwrap_or(0)
        / 1000;
    format!(
        "{:>6}  {}  {:<9} {:<14} {:<28} {:>8} µs  {}",
        record.seq,
        text(value.get("at").cloned()),
        text(field(call, "status")),
        text(field(call, "tool")),
        reason,
        micros,
        text(field(call, "call_id")),
    )
}

fn export(args: &AuditLogArgs) -> anyhow::Result<u8> {
    let path = db_path(args)?;
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    toolgate_audit::export_jsonl(&path, &mut out)?;
    Ok(0)
}
