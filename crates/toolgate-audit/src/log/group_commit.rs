//! The queue the callers share and group commit: a caller that finds no commit under way
//! commits everything queued, lingering briefly for the callers of the last batch; the others
//! wait for their answer.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::background::Mailbox;
use super::error::AppendError;
use super::writer::Writer;

/// The most records one transaction takes; more wait for the next.
const MAX_BATCH: usize = 4096;

/// The longest a committer waits for the callers of the last batch to send their next records.
const LINGER: Duration = Duration::from_millis(1);

/// What a queued record does besides being appended.
#[derive(Debug)]
pub(super) enum Entry {
    /// A record and nothing more.
    Plain(String),
    /// A call's start: also noted as open, under this process.
    Start {
        call: String,
        call_id: String,
        tool: String,
    },
    /// A call's outcome: closes its start, if it had one.
    Outcome { call: String, started: Option<u64> },
    /// Appends nothing: lets the committer seal an epoch that ended without records.
    Tick,
}

/// A record waiting to be committed.
#[derive(Debug)]
pub(super) struct Pending {
    pub(super) ticket: u64,
    pub(super) entry: Entry,
    pub(super) flush: bool,
}

/// The queue the callers share.
#[derive(Debug, Default)]
pub(super) struct Queue {
    pub(super) waiting: Vec<Pending>,
    pub(super) committing: bool,
    pub(super) done: HashMap<u64, Result<u64, AppendError>>,
    pub(super) next_ticket: u64,
    /// How many records the last commit took.
    pub(super) expected: usize,
    /// How many queued records a lingering committer waits for (see `LINGER`), 0 when none
    /// lingers: only the caller whose record makes that many wakes it.
    pub(super) linger_for: usize,
    /// How many callers wait for their answer: only if any does is anyone woken after a
    /// commit. A lone caller wakes no one.
    pub(super) awaiting: usize,
}

/// What the callers share.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) queue: Mutex<Queue>,
    /// Wakes callers once their records are answered or no one is committing.
    pub(super) answered: Condvar,
    /// Wakes a lingering committer when as many records as it waits for are queued.
    pub(super) arrived: Condvar,
    pub(super) writer: Mutex<Writer>,
    pub(super) to_background: Arc<Mailbox>,
    pub(super) background_failed: Arc<AtomicBool>,
}

impl Drop for Shared {
    /// The last caller is gone: the background thread flushes what is committed and stops.
    fn drop(&mut self) {
        self.to_background.close();
    }
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> Result<MutexGuard<'_, T>, AppendError> {
    mutex.lock().map_err(|_| AppendError::Stopped)
}

impl Shared {
    /// Queues `pending` and returns its number once it is committed, committing it (with
    /// everything else queued) if no one else is.
    pub(super) fn submit(&self, mut pending: Pending) -> Result<u64, AppendError> {
        let mut queue = lock(&self.queue)?;
        let ticket = queue.next_ticket;
        queue.next_ticket += 1;
        pending.ticket = ticket;
        queue.waiting.push(pending);
        if queue.linger_for > 0 && queue.waiting.len() >= queue.linger_for {
            self.arrived.notify_one();
        }
        loop {
            if let Some(result) = queue.done.remove(&ticket) {
                return result;
            }
            if queue.committing {
                queue.awaiting += 1;
                queue = self
                    .answered
                    .wait(queue)
                    .map_err(|_| AppendError::Stopped)?;
                queue.awaiting -= 1;
                continue;
            }
            queue.committing = true;
            // Callers answered together come back together, but not at once: right after a
            // commit the first of them would otherwise commit alone and leave the rest for
            // the commit after. So the committer waits up to `LINGER` for half as many records
            // as the last commit had; a lone caller (a last commit of one) never waits. Half,
            // not all: while one half's records are committed the other half's callers run
            // their calls, so the commits and the calls share the cores instead of taking
            // turns (docs/audit.md has the figures).
            let target = queue.expected.div_ceil(2).min(MAX_BATCH);
            if queue.waiting.len() < target {
                let linger_until = Instant::now() + LINGER;
                queue.linger_for = target;
                while queue.waiting.len() < target {
                    let left = linger_until.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    queue = match self.arrived.wait_timeout(queue, left) {
                        Ok((queue, _)) => queue,
                        Err(_) => return Err(AppendError::Stopped),
                    };
                }
                queue.linger_for = 0;
            }
            let take = queue.waiting.len().min(MAX_BATCH);
            let batch: Vec<Pending> = queue.waiting.drain(..take).collect();
            queue.expected = batch.len();
            drop(queue);
            let results = self.commit(&batch);
            queue = lock(&self.queue)?;
            for (pending, result) in batch.iter().zip(results) {
                queue.done.insert(pending.ticket, result);
            }
            queue.committing = false;
            if queue.awaiting > 0 {
                self.answered.notify_all();
            }
        }
    }

    /// Commits `batch`; the result of each record, in order.
    fn commit(&self, batch: &[Pending]) -> Vec<Result<u64, AppendError>> {
        let failed = |error: AppendError| batch.iter().map(|_| Err(error.clone())).collect();
        if self.background_failed.load(Ordering::Acquire) {
            return failed(AppendError::Unflushed);
        }
        let mut writer = match lock(&self.writer) {
            Ok(writer) => writer,
            Err(error) => return failed(error),
        };
        // A panic in SQLite's wrapper must not leave every later caller waiting for a commit
        // that never ends.
        let outcome =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| writer.append(batch)));
        match outcome {
            Ok(Ok((seqs, committed))) => {
                if let Some(committed) = committed {
                    self.to_background.post(committed);
                }
                seqs.into_iter().map(Ok).collect()
            }
            Ok(Err(error)) => failed(error),
            Err(_) => failed(AppendError::Stopped),
        }
    }
}
