//! The background thread: what committers tell it, and how it flushes committed records,
//! writes the head file and seals epochs that end without records.

use std::fs::File;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

use crate::chain;
use crate::head::{Head, HeadFile};
use crate::seal::{self};

use super::group_commit::{Entry, Pending, Shared};

/// The longest a committed record waits to be flushed to the disk, and the least time between
/// two writes of the head file while records keep coming.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(50);

/// What the background thread hears after commits: the newest record, and whether every
/// commit since it last heard was flushed.
#[derive(Debug, Clone, Copy)]
pub(super) struct Committed {
    pub(super) head: Head,
    pub(super) flushed: bool,
}

/// Where committers leave what the background thread is to hear.
///
/// A committer wakes the thread only when it sleeps with nothing to flush; while it waits
/// out [`FLUSH_INTERVAL`] with records pending, it reads the news when it wakes. Under a
/// steady stream of calls the thread is woken once per interval, not once per commit.
#[derive(Debug, Default)]
pub(super) struct Mailbox {
    inbox: Mutex<Inbox>,
    news: Condvar,
}

#[derive(Debug, Default)]
struct Inbox {
    news: Option<Committed>,
    /// The thread sleeps until news comes.
    idle: bool,
    /// The log is closing: flush what is there and stop.
    closed: bool,
}

impl Mailbox {
    pub(super) fn post(&self, committed: Committed) {
        let mut inbox = self.inbox.lock().unwrap_or_else(PoisonError::into_inner);
        let flushed = inbox.news.is_none_or(|news| news.flushed) && committed.flushed;
        inbox.news = Some(Committed {
            head: committed.head,
            flushed,
        });
        if inbox.idle {
            inbox.idle = false;
            self.news.notify_one();
        }
    }

    pub(super) fn close(&self) {
        self.inbox
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .closed = true;
        self.news.notify_one();
    }

    /// Waits until `deadline` (forever without one), or until news comes if `woken` — then
    /// returns the news, and whether the log is closing (which ends any wait).
    fn take(&self, deadline: Option<Instant>, woken: bool) -> (Option<Committed>, bool) {
        let mut inbox = self.inbox.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if inbox.closed || (woken && inbox.news.is_some()) {
                break;
            }
            let now = Instant::now();
            if deadline.is_some_and(|at| at <= now) {
                break;
            }
            inbox.idle = woken;
            inbox = match deadline {
                None => self
                    .news
                    .wait(inbox)
                    .unwrap_or_else(PoisonError::into_inner),
                Some(at) => {
                    let waited = self.news.wait_timeout(inbox, at - now);
                    waited.unwrap_or_else(PoisonError::into_inner).0
                }
            };
        }
        inbox.idle = false;
        (inbox.news.take(), inbox.closed)
    }
}

/// The background thread: flushes committed records within [`FLUSH_INTERVAL`], writes the
/// head file of what is flushed at most once per interval, and seals each epoch as it ends.
/// When the log is dropped, it flushes and writes the newest head at once.
///
/// The head file only ever names a flushed record: one that named a record lost in a power
/// cut would make the log look truncated, and stop toolgate from appending to it.
pub(super) fn background_loop(
    head_file: &HeadFile,
    wal: &Path,
    inbox: &Mailbox,
    failed: &AtomicBool,
    epochs: Option<seal::Epochs>,
    shared: &Weak<Shared>,
) {
    // Should this thread stop unexpectedly, committed records would never be flushed and the
    // head file would stop following the log unnoticed: every later commit is refused.
    let _guard = FailOnPanic(failed);
    let write = |head: Head, unflushed: bool| {
        if unflushed && flush_file(wal).is_err() {
            failed.store(true, Ordering::Release);
            return;
        }
        if head_file.write(head).is_err() {
            failed.store(true, Ordering::Release);
        }
    };
    let mut last_write: Option<Instant> = None;
    let mut pending: Option<Head> = None;
    let mut unflushed = false;
    let next_seal = |now_ms: u64| epochs.map(|e| e.end_of(e.at(now_ms)));
    let mut seal_at = next_seal(chain::now_ms());
    loop {
        let mut deadline: Option<Instant> = None;
        if pending.is_some() {
            deadline = Some(last_write.map_or_else(Instant::now, |t| t + FLUSH_INTERVAL));
        }
        if let Some(at) = seal_at {
            // A few milliseconds late, so the clock is past the end when the committer looks.
            let until =
                Instant::now() + Duration::from_millis(at.saturating_sub(chain::now_ms()) + 5);
            deadline = Some(deadline.map_or(until, |d| d.min(until)));
        }
        let (news, closed) = inbox.take(deadline, pending.is_none());
        if let Some(committed) = news {
            pending = Some(committed.head);
            unflushed |= !committed.flushed;
        }
        if closed {
            if let Some(head) = pending {
                write(head, unflushed);
            }
            return;
        }
        let ready = last_write.is_none_or(|t| t.elapsed() >= FLUSH_INTERVAL);
        if let (true, Some(head)) = (ready, pending) {
            write(head, unflushed);
            pending = None;
            unflushed = false;
            last_write = Some(Instant::now());
        }
        if let Some(at) = seal_at
            && chain::now_ms() >= at
        {
            if let Some(shared) = shared.upgrade() {
                let _ = shared.submit(Pending {
                    ticket: 0,
                    entry: Entry::Tick,
                    flush: true,
                });
            }
            seal_at = next_seal(chain::now_ms());
        }
    }
}

/// Marks the log failed if the thread holding it unwinds.
struct FailOnPanic<'a>(&'a AtomicBool);

impl Drop for FailOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Release);
        }
    }
}

/// Flushes the WAL of records committed without a flush. Once a checkpoint has moved them
/// into the database (and flushed it), the WAL may be gone or start over; flushing what is
/// there then is still right.
fn flush_file(wal: &Path) -> std::io::Result<()> {
    match File::open(wal) {
        Ok(file) => file.sync_data(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}
