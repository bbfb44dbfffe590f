//! What [`crate::run`] decides on each wake-up, apart from how it looks and acts.
//!
//! The run loop reaps the leader, looks at the tree in `/proc`, reads the pipes and signals
//! processes; everything it then has to decide — whether to send `SIGTERM`, when the grace is
//! over, when to give up on a tree that will not die, when the output is all in, how long to
//! sleep — is [`step`], a function of what the run knew before and what the wake-up found. It
//! does no I/O, so every decision can be checked against a table of cases without running a
//! command.

use std::time::{Duration, Instant};

use rustix::process::Signal;

use crate::{StopReason, unknown};

/// How long `SIGKILL` is repeated before the runner gives up on a group (a process stuck in
/// the kernel cannot die until it returns).
pub(crate) const KILL_BOUND: Duration = Duration::from_secs(2);

/// How long the pipes are drained once the group is gone. Anything still holding them open
/// then has left the group, and is not waited for.
pub(crate) const DRAIN_BOUND: Duration = Duration::from_millis(250);

/// The wait between two rounds of signals while a tree is being ended.
const ENDING_WAIT: Duration = Duration::from_millis(10);

/// What a run is held to, fixed when it starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Limits {
    /// When the command has run too long; `None` is never (a timeout beyond `Instant`).
    pub(crate) deadline: Option<Instant>,
    /// Time between `SIGTERM` and `SIGKILL`.
    pub(crate) kill_grace: Duration,
    /// The longest sleep while the leader runs: how late a cancellation or an escaping fork
    /// may be seen.
    pub(crate) tick: Duration,
}

/// Where a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// The leader runs.
    Running,
    /// `SIGTERM` sent at this instant; waiting for the tree to empty.
    Terminating(Instant),
    /// The tree stopped and killed since this instant, repeatedly.
    Killing(Instant),
    /// The tree is gone; reading what is left in the pipes until this instant.
    Draining(Instant),
}

/// What the run loop carries from one wake-up to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct State {
    pub(crate) phase: Phase,
    /// Set when the runner ended the command, and why.
    pub(crate) stopped: Option<StopReason>,
    /// Whether processes other than the leader were alive after it ended: in its group only
    /// (false) or also outside it (true).
    pub(crate) left: Option<bool>,
    /// Set once the tree would not die within the kill bound; the run then ends regardless.
    pub(crate) gave_up: bool,
}

impl State {
    pub(crate) const START: State = State {
        phase: Phase::Running,
        stopped: None,
        left: None,
        gave_up: false,
    };
}

/// What one wake-up of the run loop found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Seen {
    pub(crate) now: Instant,
    /// The leader has exited and been reaped.
    pub(crate) exited: bool,
    /// The tree has, or may have, processes other than the leader, as of the last look.
    pub(crate) busy: bool,
    /// This wake-up looked at the tree and found processes other than the leader alive:
    /// whether any of them is outside the leader's group. `None`: no look, or nobody.
    pub(crate) others: Option<bool>,
    /// The caller has given up on the command.
    pub(crate) cancelled: bool,
    /// Both stdout and stderr have reached their end.
    pub(crate) closed: bool,
}

/// What the run loop does next, in this order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Adds this to the outcome's unknowns.
    Note(&'static str),
    /// Sends this signal to the tree as last looked at.
    Signal(Signal),
    /// Stops and then kills the tree, looking again until this instant.
    StopThenKill(Instant),
    /// Waits this long for output, room in stdin, or the leader's exit.
    Wait(Duration),
    /// The run is over.
    End,
}

/// The next state of a run, and what to do about it.
pub(crate) fn step(state: State, seen: Seen, limits: &Limits) -> (State, Vec<Action>) {
    let State {
        phase,
        mut stopped,
        mut left,
        mut gave_up,
    } = state;
    let now = seen.now;
    let mut actions = Vec::with_capacity(4);
    if seen.exited
        && stopped.is_none()
        && let Some(detached) = seen.others
    {
        left = Some(left.unwrap_or(false) || detached);
    }
    let phase = match phase {
        Phase::Running if seen.exited => {
            if seen.busy {
                actions.push(Action::Signal(Signal::TERM));
                Phase::Terminating(now)
            } else {
                Phase::Draining(now + DRAIN_BOUND)
            }
        }
        Phase::Running => {
            let reason = if seen.cancelled {
                Some(StopReason::Cancelled)
            } else if limits.deadline.is_some_and(|d| now >= d) {
                Some(StopReason::Timeout)
            } else {
                None
            };
            match reason {
                Some(reason) => {
                    stopped = Some(reason);
                    actions.push(Action::Note(match reason {
                        StopReason::Timeout => unknown::KILLED_ON_TIMEOUT,
                        StopReason::Cancelled => unknown::KILLED_ON_CANCEL,
                    }));
                    actions.push(Action::Signal(Signal::TERM));
                    // A stopped process cannot act on SIGTERM until continued.
                    actions.push(Action::Signal(Signal::CONT));
                    Phase::Terminating(now)
                }
                None => Phase::Running,
            }
        }
        Phase::Terminating(_) | Phase::Killing(_) if seen.exited && !seen.busy => {
            Phase::Draining(now + DRAIN_BOUND)
        }
        Phase::Terminating(since) if now.saturating_duration_since(since) >= limits.kill_grace => {
            actions.push(Action::StopThenKill(now + KILL_BOUND / 2));
            Phase::Killing(now)
        }
        Phase::Killing(since) if now.saturating_duration_since(since) >= KILL_BOUND => {
            actions.push(Action::Note(unknown::UNKILLABLE));
            gave_up = true;
            Phase::Draining(now + DRAIN_BOUND)
        }
        Phase::Killing(since) => {
            // Again: a fork loop may have made new members since the last time.
            actions.push(Action::StopThenKill(now + Duration::from_millis(50)));
            Phase::Killing(since)
        }
        // Something of the tree turned up once the pipes were being drained: it is ended
        // like any other.
        Phase::Draining(_) if !gave_up && seen.busy => {
            actions.push(Action::Signal(Signal::TERM));
            Phase::Terminating(now)
        }
        Phase::Draining(until) if now >= until && !seen.closed => {
            actions.push(Action::Note(unknown::ESCAPED));
            actions.push(Action::End);
            return (
                State {
                    phase,
                    stopped,
                    left,
                    gave_up,
                },
                actions,
            );
        }
        other => other,
    };
    if matches!(phase, Phase::Draining(_)) && seen.closed {
        actions.push(Action::End);
    } else {
        actions.push(Action::Wait(match phase {
            Phase::Running => limits.deadline.map_or(limits.tick, |d| {
                d.saturating_duration_since(now).min(limits.tick)
            }),
            Phase::Terminating(_) | Phase::Killing(_) => ENDING_WAIT,
            Phase::Draining(until) => until.saturating_duration_since(now),
        }));
    }
    (
        State {
            phase,
            stopped,
            left,
            gave_up,
        },
        actions,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// A wake-up `ms` milliseconds into the run that found nothing of note.
    fn at(t0: Instant, ms: u64) -> Seen {
        Seen {
            now: t0 + MS * u32::try_from(ms).unwrap(),
            exited: false,
            busy: false,
            others: None,
            cancelled: false,
            closed: false,
        }
    }

    impl Seen {
        fn exited(self) -> Seen {
            Seen {
                exited: true,
                ..self
            }
        }
        fn busy(self) -> Seen {
            Seen { busy: true, ..self }
        }
        fn others(self, detached: bool) -> Seen {
            Seen {
                others: Some(detached),
                ..self
            }
        }
        fn cancelled(self) -> Seen {
            Seen {
                cancelled: true,
                ..self
            }
        }
        fn closed(self) -> Seen {
            Seen {
                closed: true,
                ..self
            }
        }
    }

    fn in_phase(phase: Phase) -> State {
        State {
            phase,
            ..State::START
        }
    }

    #[test]
    fn every_transition_of_a_run() {
        use Action::{End, Note, Signal as Send, StopThenKill, Wait};
        use Phase::{Draining, Killing, Terminating};
        let t0 = Instant::now();
        let t = |ms: u64| t0 + MS * u32::try_from(ms).unwrap();
        let limits = Limits {
            deadline: Some(t(1000)),
            kill_grace: MS * 300,
            tick: MS * 20,
        };
        let stopped = |reason, phase| State {
            stopped: Some(reason),
            ..in_phase(phase)
        };
        let left = |detached, phase| State {
            left: Some(detached),
            ..in_phase(phase)
        };
        let gave_up = |phase| State {
            gave_up: true,
            stopped: Some(StopReason::Timeout),
            ..in_phase(phase)
        };
        let drain_at = |ms: u64| Draining(t(ms) + DRAIN_BOUND);
        let rows: Vec<(&str, State, Seen, State, Vec<Action>)> = vec![
            // The leader runs.
            (
                "nothing happens: sleep a tick",
                State::START,
                at(t0, 100),
                State::START,
                vec![Wait(MS * 20)],
            ),
            (
                "output arrives or stops (the capture keeps it, whatever its size): no change",
                State::START,
                at(t0, 100).closed(),
                State::START,
                vec![Wait(MS * 20)],
            ),
            (
                "the deadline is nearer than a tick: sleep until it",
                State::START,
                at(t0, 990),
                State::START,
                vec![Wait(MS * 10)],
            ),
            (
                "the deadline passes: terminate, a stopped tree continued",
                State::START,
                at(t0, 1000),
                stopped(StopReason::Timeout, Terminating(t(1000))),
                vec![
                    Note(unknown::KILLED_ON_TIMEOUT),
                    Send(Signal::TERM),
                    Send(Signal::CONT),
                    Wait(ENDING_WAIT),
                ],
            ),
            (
                "cancellation: terminate",
                State::START,
                at(t0, 100).cancelled(),
                stopped(StopReason::Cancelled, Terminating(t(100))),
                vec![
                    Note(unknown::KILLED_ON_CANCEL),
                    Send(Signal::TERM),
                    Send(Signal::CONT),
                    Wait(ENDING_WAIT),
                ],
            ),
            (
                "cancellation and the deadline at once: cancellation wins",
                State::START,
                at(t0, 1000).cancelled(),
                stopped(StopReason::Cancelled, Terminating(t(1000))),
                vec![
                    Note(unknown::KILLED_ON_CANCEL),
                    Send(Signal::TERM),
                    Send(Signal::CONT),
                    Wait(ENDING_WAIT),
                ],
            ),
            (
                "the leader exits alone: drain the pipes",
                State::START,
                at(t0, 100).exited(),
                in_phase(drain_at(100)),
                vec![Wait(DRAIN_BOUND)],
            ),
            (
                "the leader exits, its output all read: the run is over",
                State::START,
                at(t0, 100).exited().closed(),
                in_phase(drain_at(100)),
                vec![End],
            ),
            (
                "the leader exits past the deadline: an exit, not a timeout",
                State::START,
                at(t0, 1500).exited().cancelled(),
                in_phase(drain_at(1500)),
                vec![Wait(DRAIN_BOUND)],
            ),
            (
                "the leader exits leaving its group busy: terminate, noted as left running",
                State::START,
                at(t0, 100).exited().busy().others(false),
                left(false, Terminating(t(100))),
                vec![Send(Signal::TERM), Wait(ENDING_WAIT)],
            ),
            (
                "the leader exits leaving a detached process: noted as detached",
                State::START,
                at(t0, 100).exited().busy().others(true),
                left(true, Terminating(t(100))),
                vec![Send(Signal::TERM), Wait(ENDING_WAIT)],
            ),
            (
                "the leader exits with an orphan in its grace (busy, nobody alive yet)",
                State::START,
                at(t0, 100).exited().busy(),
                in_phase(Terminating(t(100))),
                vec![Send(Signal::TERM), Wait(ENDING_WAIT)],
            ),
            // SIGTERM sent.
            (
                "terminating, within the grace: wait",
                in_phase(Terminating(t(100))),
                at(t0, 399).busy(),
                in_phase(Terminating(t(100))),
                vec![Wait(ENDING_WAIT)],
            ),
            (
                "a detached process seen later stays detached",
                left(false, Terminating(t(100))),
                at(t0, 150).exited().busy().others(true),
                left(true, Terminating(t(100))),
                vec![Wait(ENDING_WAIT)],
            ),
            (
                "once seen detached, a look finding only the group does not undo it",
                left(true, Terminating(t(100))),
                at(t0, 150).exited().busy().others(false),
                left(true, Terminating(t(100))),
                vec![Wait(ENDING_WAIT)],
            ),
            (
                "the leader of a stopped command exits: not counted as left behind",
                stopped(StopReason::Timeout, Terminating(t(100))),
                at(t0, 150).exited().busy().others(true),
                stopped(StopReason::Timeout, Terminating(t(100))),
                vec![Wait(ENDING_WAIT)],
            ),
            (
                "terminating, the tree empties: drain",
                stopped(StopReason::Cancelled, Terminating(t(100))),
                at(t0, 150).exited(),
                stopped(StopReason::Cancelled, drain_at(150)),
                vec![Wait(DRAIN_BOUND)],
            ),
            (
                "terminating, the tree empty but the leader not reaped: the grace runs on",
                in_phase(Terminating(t(100))),
                at(t0, 150),
                in_phase(Terminating(t(100))),
                vec![Wait(ENDING_WAIT)],
            ),
            (
                "the grace expires: stop and kill the tree",
                in_phase(Terminating(t(100))),
                at(t0, 400).busy(),
                in_phase(Killing(t(400))),
                vec![StopThenKill(t(400) + KILL_BOUND / 2), Wait(ENDING_WAIT)],
            ),
            // The tree stopped and killed.
            (
                "killing, the tree still there: kill again",
                in_phase(Killing(t(400))),
                at(t0, 500).exited().busy(),
                in_phase(Killing(t(400))),
                vec![StopThenKill(t(500) + MS * 50), Wait(ENDING_WAIT)],
            ),
            (
                "killing, the tree gone: drain",
                in_phase(Killing(t(400))),
                at(t0, 500).exited(),
                in_phase(drain_at(500)),
                vec![Wait(DRAIN_BOUND)],
            ),
            (
                "killing, the tree gone and the output in: over",
                in_phase(Killing(t(400))),
                at(t0, 500).exited().closed(),
                in_phase(drain_at(500)),
                vec![End],
            ),
            (
                "the kill bound passes: give up, unkillable",
                stopped(StopReason::Timeout, Killing(t(400))),
                at(t0, 2400).busy(),
                gave_up(drain_at(2400)),
                vec![Note(unknown::UNKILLABLE), Wait(DRAIN_BOUND)],
            ),
            // Draining the pipes.
            (
                "draining, output still coming: wait for the rest of the bound",
                in_phase(drain_at(100)),
                at(t0, 200).exited(),
                in_phase(drain_at(100)),
                vec![Wait(DRAIN_BOUND - MS * 100)],
            ),
            (
                "draining, both pipes at their end: over",
                in_phase(drain_at(100)),
                at(t0, 200).exited().closed(),
                in_phase(drain_at(100)),
                vec![End],
            ),
            (
                "draining, something of the tree turns up: terminate it",
                in_phase(drain_at(100)),
                at(t0, 200).exited().busy().others(false),
                left(false, Terminating(t(200))),
                vec![Send(Signal::TERM), Wait(ENDING_WAIT)],
            ),
            (
                "draining after giving up, the tree still busy: no new round",
                gave_up(drain_at(2400)),
                at(t0, 2500).busy(),
                gave_up(drain_at(2400)),
                vec![Wait(DRAIN_BOUND - MS * 100)],
            ),
            (
                "the drain bound passes with a pipe held open: escaped, over",
                in_phase(drain_at(100)),
                at(t0, 350).exited(),
                in_phase(drain_at(100)),
                vec![Note(unknown::ESCAPED), End],
            ),
            (
                "the drain bound passes after giving up, a pipe held open: escaped, over",
                gave_up(drain_at(2400)),
                at(t0, 2650).busy(),
                gave_up(drain_at(2400)),
                vec![Note(unknown::ESCAPED), End],
            ),
            (
                "the drain bound passes, both pipes at their end: over, nothing escaped",
                in_phase(drain_at(100)),
                at(t0, 350).exited().closed(),
                in_phase(drain_at(100)),
                vec![End],
            ),
        ];
        for (what, before, seen, after, actions) in rows {
            assert_eq!(
                step(before, seen, &limits),
                (after, actions),
                "{what}: from {before:?} on {seen:?}"
            );
        }
    }

    #[test]
    fn without_a_deadline_a_run_sleeps_a_tick() {
        let t0 = Instant::now();
        let limits = Limits {
            deadline: None,
            kill_grace: MS * 300,
            tick: MS * 5,
        };
        assert_eq!(
            step(State::START, at(t0, 1 << 30), &limits),
            (State::START, vec![Action::Wait(MS * 5)])
        );
    }
}
