//! The capabilities a confined child keeps. A command toolgate runs as root would otherwise
//! hold every capability, and several of them walk around the other tiers: `CAP_SYS_PTRACE`
//! reads any process's `/proc` entries (toolgate's environment and memory maps among them),
//! `CAP_CHOWN` gives any file to anyone, `CAP_KILL`, `CAP_SYS_ADMIN`, `CAP_NET_RAW` and the
//! rest reach the kernel directly. They are dropped from the bounding set and from the
//! effective, permitted and inheritable sets, and the ambient set is cleared, so neither the
//! child nor anything it executes gets them back (root regains only what the bounding set
//! holds at exec). What root keeps is what ordinary file work as root needs: reading and
//! writing files of other owners (`CAP_DAC_OVERRIDE`, `CAP_DAC_READ_SEARCH`, `CAP_FOWNER`,
//! `CAP_FSETID`), changing its own user and groups, and the harmless remainder.

use std::io;

use rustix::thread::{CapabilitySet, CapabilitySets};

/// The capabilities taken away.
pub(crate) const DROPPED: CapabilitySet = CapabilitySet::CHOWN
    .union(CapabilitySet::KILL)
    .union(CapabilitySet::SETPCAP)
    .union(CapabilitySet::LINUX_IMMUTABLE)
    .union(CapabilitySet::NET_BROADCAST)
    .union(CapabilitySet::NET_ADMIN)
    .union(CapabilitySet::NET_RAW)
    .union(CapabilitySet::IPC_OWNER)
    .union(CapabilitySet::SYS_MODULE)
    .union(CapabilitySet::SYS_RAWIO)
    .union(CapabilitySet::SYS_CHROOT)
    .union(CapabilitySet::SYS_PTRACE)
    .union(CapabilitySet::SYS_PACCT)
    .union(CapabilitySet::SYS_ADMIN)
    .union(CapabilitySet::SYS_BOOT)
    .union(CapabilitySet::SYS_RESOURCE)
    .union(CapabilitySet::SYS_TIME)
    .union(CapabilitySet::SYS_TTY_CONFIG)
    .union(CapabilitySet::MKNOD)
    .union(CapabilitySet::AUDIT_WRITE)
    .union(CapabilitySet::AUDIT_CONTROL)
    .union(CapabilitySet::SETFCAP)
    .union(CapabilitySet::MAC_OVERRIDE)
    .union(CapabilitySet::MAC_ADMIN)
    .union(CapabilitySet::SYSLOG)
    .union(CapabilitySet::WAKE_ALARM)
    .union(CapabilitySet::BLOCK_SUSPEND)
    .union(CapabilitySet::AUDIT_READ)
    .union(CapabilitySet::PERFMON)
    .union(CapabilitySet::BPF)
    .union(CapabilitySet::CHECKPOINT_RESTORE);

/// In the child: drops [`DROPPED`] for good. System calls only. The bounding set is emptied
/// of them first (which needs `CAP_SETPCAP`, dropped last, with the other sets).
pub(crate) fn drop_in_child() -> io::Result<()> {
    let sets = rustix::thread::capabilities(None)?;
    if sets.permitted.contains(CapabilitySet::SETPCAP) {
        for bit in DROPPED.iter() {
            if rustix::thread::capability_is_in_bounding_set(bit)? {
                rustix::thread::remove_capability_from_bounding_set(bit)?;
            }
        }
    }
    match rustix::thread::clear_ambient_capability_set() {
        // A kernel without ambient capabilities has none to clear.
        Ok(()) | Err(rustix::io::Errno::INVAL) => {}
        Err(e) => return Err(e.into()),
    }
    rustix::thread::set_capabilities(
        None,
        CapabilitySets {
            effective: sets.effective - DROPPED,
            permitted: sets.permitted - DROPPED,
            inheritable: sets.inheritable - DROPPED,
        },
    )?;
    Ok(())
}
