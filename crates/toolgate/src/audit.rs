//! `toolgate audit`: verify, tail and export the audit log; and opening the log for `call`
//! and `serve`.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use serde_json::Value;
use toolgate_audit::{AuditLog, AuditOptions, StoredRecord, Verdict, VerificationKey};

use crate::cli::{AuditCommand, AuditLogArgs};
use crate::settings::Settings;
use crate::terminal::{JsonWriter, errln, outln, visible};

/// How often `tail --follow` looks for new records when the kernel gives it no way to be told
/// of them (no inotify instance left to this user).
const FOLLOW_INTERVAL: Duration = Duration::from_millis(250);

/// How long the process that opens the audit log goes on appending to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Appending {
    /// One call (`toolgate call`).
    Once,
    /// Call after call until it stops (`toolgate serve`): the log's WAL is given its size up
    /// front, so that flushes overwrite blocks instead of growing the file.
    Lasting,
}

/// The configured audit log, opened for appending.
pub fn open_log(settings: &Settings, appending: Appending) -> anyhow::Result<AuditLog> {
    let path = settings.audit_path()?;
    let options = AuditOptions {
        store_values: settings.audit.store_values,
        sync: settings.audit.sync,
        reserve_wal: appending == Appending::Lasting,
        ..AuditOptions::default()
    };
    AuditLog::open(&path, options).context("cannot start without the audit log")
}

pub fn run(command: &AuditCommand) -> anyhow::Result<u8> {
    match command {
        AuditCommand::Verify {
            verification_key,
            log,
        } => verify(log, verification_key.as_deref()),
        AuditCommand::SealSetup { log } => seal_setup(log),
        AuditCommand::Head { json, log } => head(log, *json),
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

fn verify(args: &AuditLogArgs, key: Option<&str>) -> anyhow::Result<u8> {
    let path = db_path(args)?;
    let key = match key.map(str::parse::<VerificationKey>) {
        None => None,
        Some(Ok(key)) => Some(key),
        Some(Err(message)) => {
            errln!("error: {message}");
            return Ok(3);
        }
    };
    let verification = toolgate_audit::verify_with(&path, key.as_ref())?;
    if let Verdict::Broken(finding) = &verification.verdict {
        outln!("broken: {finding} ({})", path.display());
        outln!("the {} record(s) before it verify", verification.records);
        return Ok(1);
    }
    let sealing = verification.sealing.as_ref();
    if let Some(broken) = sealing.and_then(|s| s.broken.as_ref()) {
        // The chain holds together, so the epoch was rewritten with every hash recomputed.
        outln!("broken: {broken} ({})", path.display());
        outln!(
            "the chain of {} records is intact: it was rewritten with its hashes recomputed",
            verification.records
        );
    } else {
        outln!(
            "ok: {} records, chain intact ({})",
            verification.records,
            path.display()
        );
    }
    for call in &verification.interrupted {
        outln!(
            "interrupted: record {}: call {} ({}) started at record {}: {}",
            call.seq,
            call.call_id,
            call.tool,
            call.started,
            toolgate_audit::INTERRUPTED
        );
    }
    let mut code = 0;
    if let Some(sealing) = &verification.sealing {
        if let (Some((first, _, _)), Some((last, _, through))) =
            (sealing.sealed.first(), sealing.sealed.last())
        {
            outln!(
                "sealed: epochs {first} to {last} verified with the verification key: records 1 to {through}"
            );
        }
        if sealing.broken.is_some() {
            code = 1;
        }
        if let Some((first, last)) = sealing.unsealed {
            outln!(
                "unsealed: records {first} to {last}: no seal covers them yet, so the verification key does not vouch for them"
            );
        }
    }
    if let Some((seq, hash)) = &verification.head {
        outln!("head: record {seq} {hash}");
    }
    Ok(code)
}

fn seal_setup(args: &AuditLogArgs) -> anyhow::Result<u8> {
    let (path, epoch) = match &args.db {
        Some(path) => (
            path.clone(),
            Settings::load(args.config.config.as_deref())?
                .audit
                .seal_epoch,
        ),
        None => {
            let settings = Settings::load(args.config.config.as_deref())?;
            (settings.audit_path()?, settings.audit.seal_epoch)
        }
    };
    let key = toolgate_audit::seal_setup(&path, epoch)?;
    outln!("{key}");
    errln!(
        "sealing set up for {} (epochs of {} s); the key above is shown only now: keep it off this machine, and pass it to `toolgate audit verify --verification-key`",
        path.display(),
        epoch.as_secs()
    );
    Ok(0)
}

fn head(args: &AuditLogArgs, json: bool) -> anyhow::Result<u8> {
    let path = db_path(args)?;
    let head = toolgate_audit::log_head(&path)?;
    if json {
        let value = serde_json::json!({
            "log": path.display().to_string(),
            "seq": head.seq,
            "hash": head.hash,
            "at": head.at,
            "witnessed": head.witnessed,
        });
        crate::terminal::write_out(&crate::terminal::json_line(&value)?, true);
    } else {
        outln!("head: record {} {}", head.seq, head.hash);
    }
    Ok(0)
}

/// The log's directory watched for changes to the log (its database and write-ahead log).
struct Changes {
    inotify: std::os::fd::OwnedFd,
    /// The names in the directory whose changes are news: the database's and its
    /// write-ahead log's. A reader's own `-shm` file changes as it reads, and is not news.
    names: [Vec<u8>; 2],
}

impl Changes {
    /// `None` when the kernel gives no inotify instance, or the path has no file name.
    fn watch(db: &std::path::Path) -> Option<Changes> {
        use rustix::fs::inotify::{CreateFlags, WatchFlags, add_watch, init};
        use std::os::unix::ffi::OsStrExt as _;
        let name = db.file_name()?.as_bytes().to_vec();
        let dir = match db.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => std::path::Path::new("."),
        };
        let inotify = init(CreateFlags::CLOEXEC).ok()?;
        // Only writes are news: a reader's own connection creates the write-ahead log when
        // nobody holds the log, and removes it again when it closes.
        let events = WatchFlags::MODIFY | WatchFlags::MOVED_TO;
        add_watch(&inotify, dir, events).ok()?;
        let wal = [name.as_slice(), b"-wal"].concat();
        Some(Changes {
            inotify,
            names: [name, wal],
        })
    }

    /// Blocks until the log changes; the events read with that change go with it, so a burst
    /// of writes is one wake.
    fn wait(&self) {
        let mut buffer = [std::mem::MaybeUninit::uninit(); 4096];
        let mut events = rustix::fs::inotify::Reader::new(&self.inotify, &mut buffer);
        loop {
            match events.next() {
                Ok(event) => {
                    let name = event.file_name().map(std::ffi::CStr::to_bytes);
                    if name.is_some_and(|name| self.names.iter().any(|n| n == name)) {
                        while !events.is_buffer_empty() {
                            let _ = events.next();
                        }
                        return;
                    }
                }
                Err(rustix::io::Errno::INTR) => {}
                // An error would come back at once: look at the interval instead of spinning.
                Err(_) => return std::thread::sleep(FOLLOW_INTERVAL),
            }
        }
    }
}

fn tail(args: &AuditLogArgs, lines: usize, follow: bool) -> anyhow::Result<u8> {
    let path = db_path(args)?;
    let mut last_seq = 0;
    let mut out = std::io::stdout().lock();
    // Following is woken by each change in the log's directory (its database and write-ahead
    // log), by whichever process appends. Watched before the first look, so no append is
    // missed.
    let changes = follow.then(|| Changes::watch(&path)).flatten();
    for record in toolgate_audit::last(&path, lines)? {
        last_seq = record.seq;
        if writeln!(out, "{}", visible(&line(&record))).is_err() {
            return Ok(0);
        }
    }
    if !follow {
        return Ok(0);
    }
    loop {
        let _ = out.flush();
        match &changes {
            Some(changes) => changes.wait(),
            None => std::thread::sleep(FOLLOW_INTERVAL),
        }
        for record in toolgate_audit::after(&path, last_seq, 1000)? {
            last_seq = record.seq;
            if writeln!(out, "{}", visible(&line(&record))).is_err() {
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
    let started = field(call, "started").and_then(|v| v.as_u64());
    let reason = match (field(call, "rejection"), field(call, "error")) {
        _ if text(field(call, "status")) == "sealed" => format!(
            "epoch {}, to record {}",
            field(call, "epoch").and_then(|v| v.as_u64()).unwrap_or(0),
            field(call, "head_seq")
                .and_then(|v| v.as_u64())
                .unwrap_or(0)
        ),
        _ if text(field(call, "status")) == "interrupted" => {
            format!("outcome_unknown (started {})", started.unwrap_or(0))
        }
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
    // JSON lines, with the characters a terminal would act on written as JSON escapes.
    let mut out = JsonWriter::new(std::io::BufWriter::new(std::io::stdout().lock()));
    toolgate_audit::export_jsonl(&path, &mut out)?;
    out.finish()?;
    Ok(0)
}
