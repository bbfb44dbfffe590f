//! What the process tests read of `/proc`: whether a process can still act, the CPU time it
//! spent, and the pids a probe wrote down.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A process the test started, killed (by its pid) when the test ends however it ends.
pub struct Killed(pub Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Another process of the same user, with `TOOLGATE_PROBE_SECRET=canary-environment` in its
/// environment, for a confined process to try to read or signal.
pub fn canary_process() -> Killed {
    Killed(
        Command::new("sleep")
            .arg("120")
            .env("TOOLGATE_PROBE_SECRET", "canary-environment")
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// Whether `pid` is a process that can still act (not a zombie, not dead).
pub fn running(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => {
            let after = &stat[stat.rfind(')').unwrap() + 1..];
            !matches!(after.split_whitespace().next(), Some("Z" | "X"))
        }
        Err(_) => false,
    }
}

/// The CPU time process `pid` has used, in clock ticks.
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // After the command's `)`: the state is the first field, user and system time the 12th
    // and 13th.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .unwrap()
        .1
        .split_whitespace()
        .collect();
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

/// The pids a probe wrote to `file`, one a line.
pub fn pids(file: &Path) -> Vec<u32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect()
}
