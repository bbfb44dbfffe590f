//! What this machine can enforce, probed once at start and reported (by `toolgate sandbox
//! check`, and in every outcome through [`crate::Enforced`]).
//!
//! ```no_run
//! let support = toolgate_sandbox::probe();
//! println!("landlock abi {:?}, seccomp {}", support.landlock_abi, support.seccomp);
//! ```

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, RestrictSelfAttr, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, RulesetError, Scope,
};

/// What the running kernel offers the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Support {
    /// The highest Landlock ABI both the kernel and the `landlock` crate know, or `None` when
    /// Landlock is not built in or not enabled at boot.
    pub landlock_abi: Option<u8>,
    /// Whether seccomp filters can be installed (`Seccomp:` in `/proc/self/status`).
    pub seccomp: bool,
    /// Whether an unprivileged user namespace could be made (not used by the sandbox;
    /// reported for `sandbox check`).
    pub user_namespaces: bool,
    /// Whether this process can give a child a mount namespace with a path bound read-only
    /// (the extra tier that protects a workspace's `.git/hooks` and `.git/config`).
    pub mount_namespaces: MountNamespaces,
}

/// Whether a child can be given a mount namespace with a path bound read-only. Finding out
/// runs a shell in such a child, some milliseconds, so it is done the first time the answer
/// is asked for (by a command's sandbox, by `toolgate sandbox check`), once per process, and
/// never by a process that runs no command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MountNamespaces {
    /// What this machine does, found out when first asked.
    Probed,
    /// A claim, whatever the machine does: a test's way to see another machine.
    Claimed(bool),
}

impl MountNamespaces {
    /// Whether a child can be given one.
    pub fn possible(self) -> bool {
        static PROBED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        match self {
            MountNamespaces::Claimed(possible) => possible,
            MountNamespaces::Probed => *PROBED.get_or_init(crate::mounts::possible),
        }
    }
}

/// Probes the running kernel. Each Landlock ABI is recognised by what it added, tried with a
/// hard requirement on a ruleset that is created and dropped, never enforced. Mount
/// namespaces are tried later, when first asked about ([`MountNamespaces`]).
pub fn probe() -> Support {
    Support {
        landlock_abi: landlock_abi(),
        seccomp: seccomp_available(),
        user_namespaces: user_namespaces_possible(),
        mount_namespaces: MountNamespaces::Probed,
    }
}

fn landlock_abi() -> Option<u8> {
    // From the newest down: V9 added a right (`ResolveUnix`), V8 and V7 only flags of
    // `landlock_restrict_self`, the older ones rights, scopes or network rules.
    if hard(ABI::V9).is_ok() {
        return Some(9);
    }
    if hard(ABI::V1).and_then(|r| r.all_threads(true)).is_ok() {
        return Some(8);
    }
    if hard(ABI::V1).and_then(|r| r.log_new_exec(true)).is_ok() {
        return Some(7);
    }
    [ABI::V6, ABI::V5, ABI::V4, ABI::V3, ABI::V2, ABI::V1]
        .into_iter()
        .zip([6, 5, 4, 3, 2, 1])
        .find(|(abi, _)| hard(*abi).is_ok())
        .map(|(_, n)| n)
}

/// A ruleset handling every right `abi` defines, created with a hard requirement: it fails
/// when the kernel lacks any of them.
fn hard(abi: ABI) -> Result<RulesetCreated, RulesetError> {
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))?;
    if abi >= ABI::V4 {
        ruleset = ruleset.handle_access(AccessNet::from_all(abi))?;
    }
    if abi >= ABI::V6 {
        ruleset = ruleset.scope(Scope::from_all(abi))?;
    }
    ruleset.create()
}

fn seccomp_available() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| s.lines().any(|l| l.starts_with("Seccomp:")))
        .unwrap_or(false)
}

fn user_namespaces_possible() -> bool {
    let max = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(0);
    // Debian and Ubuntu add a switch of their own for unprivileged ones.
    let unprivileged = std::fs::read_to_string("/proc/sys/kernel/unprivileged_userns_clone")
        .map(|s| s.trim() != "0")
        .unwrap_or(true);
    max > 0 && unprivileged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probing_twice_gives_the_same_answer() {
        assert_eq!(probe(), probe());
        let mounts = probe().mount_namespaces;
        assert_eq!(mounts.possible(), mounts.possible());
        assert!(MountNamespaces::Claimed(true).possible());
        assert!(!MountNamespaces::Claimed(false).possible());
    }
}
