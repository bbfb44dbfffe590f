//! Cancellation that wakes whoever waits for it.
//!
//! A call can be given up by its client (MCP `notifications/cancelled`), by its transport
//! (the connection closed) or by toolgate (shutdown). Whatever the call is doing then —
//! waiting for a person, for an upstream's answer, for a child process — must stop at once,
//! not at its next look at a flag. A [`Cancel`] is that signal: [`Cancel::cancel`] sets it,
//! wakes every thread in [`Cancel::wait_until`] and calls every waker registered with
//! [`Cancel::on_cancel`] (which a waiter on something else — a condition variable, an
//! eventfd, a channel — uses to be woken too).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::Instant;

/// A cancellation signal, shared by cloning. Once cancelled it stays cancelled.
#[derive(Clone, Default)]
pub struct Cancel {
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    cancelled: AtomicBool,
    wakers: Mutex<Wakers>,
    woken: Condvar,
}

#[derive(Default)]
struct Wakers {
    next: u64,
    /// Each registered waker with the number its guard removes it by.
    each: Vec<(u64, Waker)>,
}

type Waker = Box<dyn Fn() + Send + Sync>;

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cancel")
            .field("cancelled", &self.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl Cancel {
    /// A signal not yet given.
    pub fn new() -> Self {
        Self::default()
    }

    /// A signal already given: for a call that is to stop before it starts.
    pub fn given() -> Self {
        let cancel = Self::new();
        cancel.cancel();
        cancel
    }

    /// Gives the signal: wakes every waiter and calls every waker, once. Later calls do
    /// nothing.
    pub fn cancel(&self) {
        let wakers = {
            let mut wakers = self.lock();
            // Set under the lock, so that a waiter that found it unset is already waiting
            // (it checks under the same lock) and a waker registered after this sees it set.
            if self.shared.cancelled.swap(true, Ordering::AcqRel) {
                return;
            }
            std::mem::take(&mut wakers.each)
        };
        self.shared.woken.notify_all();
        // Called outside the lock: a waker may take locks of its own, and may even register
        // or drop another waker.
        for (_, wake) in wakers {
            wake();
        }
    }

    /// Whether the signal was given.
    pub fn is_cancelled(&self) -> bool {
        self.shared.cancelled.load(Ordering::Acquire)
    }

    /// Waits until the signal is given or `deadline` passes; whether it was given.
    pub fn wait_until(&self, deadline: Instant) -> bool {
        let mut wakers = self.lock();
        loop {
            if self.is_cancelled() {
                return true;
            }
            let Some(left) = deadline.checked_duration_since(Instant::now()) else {
                return false;
            };
            wakers = match self.shared.woken.wait_timeout(wakers, left) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Calls `wake` once when the signal is given — at once, on this thread, if it already
    /// was. Dropping the returned guard takes `wake` back.
    #[must_use = "dropping the guard takes the waker back at once"]
    pub fn on_cancel(&self, wake: impl Fn() + Send + Sync + 'static) -> OnCancel {
        let mut wakers = self.lock();
        if self.is_cancelled() {
            drop(wakers);
            wake();
            return OnCancel { cancel: None };
        }
        let id = wakers.next;
        wakers.next += 1;
        wakers.each.push((id, Box::new(wake)));
        OnCancel {
            cancel: Some((self.clone(), id)),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Wakers> {
        self.shared
            .wakers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// A waker registered with [`Cancel::on_cancel`]; dropping it takes the waker back.
#[derive(Default)]
pub struct OnCancel {
    cancel: Option<(Cancel, u64)>,
}

impl std::fmt::Debug for OnCancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnCancel")
            .field("registered", &self.cancel.is_some())
            .finish()
    }
}

impl Drop for OnCancel {
    fn drop(&mut self) {
        if let Some((cancel, id)) = self.cancel.take() {
            cancel.lock().each.retain(|(each, _)| *each != id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::time::Duration;

    #[test]
    fn a_waiter_is_woken_at_once() {
        let cancel = Cancel::new();
        let waiter = std::thread::spawn({
            let cancel = cancel.clone();
            move || {
                let started = Instant::now();
                let given = cancel.wait_until(Instant::now() + Duration::from_secs(60));
                (given, started.elapsed())
            }
        });
        std::thread::sleep(Duration::from_millis(20));
        cancel.cancel();
        let (given, waited) = waiter.join().unwrap();
        assert!(given);
        assert!(waited < Duration::from_secs(30), "{waited:?}");
    }

    #[test]
    fn a_deadline_ends_the_wait_without_the_signal() {
        let cancel = Cancel::new();
        assert!(!cancel.wait_until(Instant::now() + Duration::from_millis(10)));
        assert!(!cancel.is_cancelled());
        cancel.cancel();
        assert!(cancel.wait_until(Instant::now()));
    }

    #[test]
    fn wakers_run_once_and_only_while_registered() {
        let cancel = Cancel::new();
        let calls = Arc::new(AtomicUsize::new(0));
        let counting = |calls: &Arc<AtomicUsize>| {
            let calls = Arc::clone(calls);
            move || {
                calls.fetch_add(1, Ordering::SeqCst);
            }
        };
        let kept = cancel.on_cancel(counting(&calls));
        drop(cancel.on_cancel(counting(&calls)));
        cancel.cancel();
        cancel.cancel();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        // Registered after the signal: called at once.
        let late = cancel.on_cancel(counting(&calls));
        assert_eq!(calls.load(Ordering::SeqCst), 2);
        drop((kept, late));
    }

    #[test]
    fn a_waker_may_register_another() {
        let cancel = Cancel::new();
        let inner = Arc::new(Mutex::new(None));
        let _outer = cancel.on_cancel({
            let cancel = cancel.clone();
            let inner = Arc::clone(&inner);
            move || {
                let guard = cancel.on_cancel(|| {});
                *inner.lock().unwrap() = Some(guard);
            }
        });
        cancel.cancel();
        assert!(inner.lock().unwrap().is_some());
    }
}
