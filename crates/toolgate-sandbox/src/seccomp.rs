//! The seccomp filters: system calls a confined child is refused (with `EPERM`, never killed,
//! so a program sees an ordinary error), compiled to BPF in the parent.
//!
//! Landlock confines paths and TCP ports; what it does not cover is refused here: sockets of
//! other families and kinds (UDP, raw, packet, netlink), io_uring (whose operations bypass the
//! system-call checks), extended attributes, tracing and reading other processes, kernel
//! keyrings, BPF, perf, userfaultfd, new namespaces and mounts, loading kernel modules, and
//! typing into the terminal (`TIOCSTI`).
//!
//! ```no_run
//! use toolgate_sandbox::{NetworkMode, Sandbox, SandboxSpec};
//!
//! let mut spec = SandboxSpec::new("/work/project", "/tmp/call");
//! spec.network = NetworkMode::None; // only AF_UNIX sockets
//! let prepared = Sandbox::detect().prepare(&spec)?;
//! # Ok::<(), toolgate_sandbox::SandboxError>(())
//! ```

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen as Len, SeccompCmpOp as Op, SeccompCondition,
    SeccompFilter, SeccompRule, TargetArch, sock_filter,
};

use crate::{NetworkMode, SandboxError, UnixSockets};

/// System calls refused whatever the network mode.
const REFUSED: &[libc::c_long] = &[
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_userfaultfd,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_chroot,
    // A file handle names an inode without a path, which path-based rules cannot see.
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_reboot,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_pidfd_getfd,
    // Extended attributes are metadata Landlock does not govern: refused, so that a file
    // outside the workspace cannot be marked by a command. Copying tools treat `EPERM` here
    // as "not supported" and go on.
    libc::SYS_setxattr,
    libc::SYS_lsetxattr,
    libc::SYS_fsetxattr,
    libc::SYS_removexattr,
    libc::SYS_lremovexattr,
    libc::SYS_fremovexattr,
    SYS_SETXATTRAT,
    SYS_REMOVEXATTRAT,
];

/// `setxattrat` and `removexattrat` (Linux 6.13), the same on every architecture.
const SYS_SETXATTRAT: libc::c_long = 463;
const SYS_REMOVEXATTRAT: libc::c_long = 466;

/// `clone` flags that make a namespace (`CLONE_NEWTIME` shares its bit with the exit signal
/// in `clone`, and is only honoured by `clone3` and `unshare`, both refused).
const NAMESPACE_FLAGS: [u64; 7] = [
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];

/// The compiled filters, installed in this order.
#[derive(Debug)]
pub(crate) struct Filters {
    pub(crate) programs: Vec<BpfProgram>,
}

/// Compiles the filters for `network` and `unix`.
pub(crate) fn filters(network: NetworkMode, unix: UnixSockets) -> Result<Filters, SandboxError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    for nr in REFUSED {
        // An empty rule list matches the call whatever its arguments.
        rules.insert(*nr, Vec::new());
    }
    rules.insert(
        libc::SYS_clone,
        NAMESPACE_FLAGS
            .iter()
            .map(|flag| rule(vec![cond(0, Len::Qword, Op::MaskedEq(*flag), *flag)?]))
            .collect::<Result<_, _>>()?,
    );
    // The kernel compares an ioctl's command as 32 bits, so the filter does too.
    rules.insert(
        libc::SYS_ioctl,
        [libc::TIOCSTI, libc::TIOCLINUX]
            .iter()
            .map(|cmd| rule(vec![cond(1, Len::Dword, Op::Eq, *cmd)?]))
            .collect::<Result<_, _>>()?,
    );
    match (socket_rules(network)?, unix) {
        // Every `socket` call refused: an empty rule list matches whatever the arguments.
        (Some(_), UnixSockets::PairsOnly) if network == NetworkMode::None => {
            rules.insert(libc::SYS_socket, Vec::new());
        }
        (Some(mut socket), UnixSockets::PairsOnly) => {
            socket.push(rule(vec![cond(
                0,
                Len::Dword,
                Op::Eq,
                libc::AF_UNIX as u64,
            )?])?);
            rules.insert(libc::SYS_socket, socket);
        }
        (None, UnixSockets::PairsOnly) => {
            rules.insert(
                libc::SYS_socket,
                vec![rule(vec![cond(
                    0,
                    Len::Dword,
                    Op::Eq,
                    libc::AF_UNIX as u64,
                )?])?],
            );
        }
        (Some(socket), UnixSockets::Allowed) => {
            rules.insert(libc::SYS_socket, socket);
        }
        (None, UnixSockets::Allowed) => {}
    }
    if unix == UnixSockets::PairsOnly {
        // A datagram pair is not connected for good: `sendto` could aim it at a path.
        rules.insert(
            libc::SYS_socketpair,
            [libc::SOCK_DGRAM, libc::SOCK_RDM, libc::SOCK_RAW, 10]
                .iter()
                .map(|kind| rule(vec![cond(1, Len::Dword, Op::MaskedEq(0xf), *kind as u64)?]))
                .collect::<Result<_, _>>()?,
        );
    }
    let refused = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    let mut programs = vec![BpfProgram::try_from(refused)?];

    // `clone3` passes its flags in memory a filter cannot read, so it is refused as unknown
    // (`ENOSYS`), on which the C libraries fall back to `clone`, whose flags are checked.
    let mut clone3 = BTreeMap::new();
    clone3.insert(libc::SYS_clone3, Vec::new());
    programs.push(BpfProgram::try_from(SeccompFilter::new(
        clone3,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )?)?);
    if let Some(x32) = x32_refusal() {
        programs.push(x32);
    }
    Ok(Filters { programs })
}

/// The `socket` rules: a matching call is refused.
fn socket_rules(network: NetworkMode) -> Result<Option<Vec<SeccompRule>>, SandboxError> {
    let unix = libc::AF_UNIX as u64;
    match network {
        NetworkMode::DangerousUnconfined => Ok(None),
        NetworkMode::None => Ok(Some(vec![rule(vec![cond(0, Len::Dword, Op::Ne, unix)?])?])),
        NetworkMode::Proxy { .. } => {
            let (inet, inet6) = (libc::AF_INET as u64, libc::AF_INET6 as u64);
            // Any family but Unix and IP.
            let mut out = vec![rule(vec![
                cond(0, Len::Dword, Op::Ne, unix)?,
                cond(0, Len::Dword, Op::Ne, inet)?,
                cond(0, Len::Dword, Op::Ne, inet6)?,
            ])?];
            for family in [inet, inet6] {
                // An IP socket must be a TCP stream: the type without its SOCK_NONBLOCK and
                // SOCK_CLOEXEC bits is SOCK_STREAM, and the protocol 0 or IPPROTO_TCP (a
                // stream of SCTP or MPTCP is not what Landlock's TCP rules govern).
                for kind in [
                    libc::SOCK_DGRAM,
                    libc::SOCK_RAW,
                    libc::SOCK_RDM,
                    libc::SOCK_SEQPACKET,
                    libc::SOCK_DCCP,
                    // SOCK_PACKET, obsolete but still accepted by the kernel.
                    10,
                ] {
                    out.push(rule(vec![
                        cond(0, Len::Dword, Op::Eq, family)?,
                        cond(1, Len::Dword, Op::MaskedEq(0xf), kind as u64)?,
                    ])?);
                }
                let tcp = libc::IPPROTO_TCP as u64;
                out.push(rule(vec![
                    cond(0, Len::Dword, Op::Eq, family)?,
                    cond(2, Len::Dword, Op::Gt, tcp)?,
                ])?);
                out.push(rule(vec![
                    cond(0, Len::Dword, Op::Eq, family)?,
                    cond(2, Len::Dword, Op::Gt, 0)?,
                    cond(2, Len::Dword, Op::Lt, tcp)?,
                ])?);
            }
            Ok(Some(out))
        }
    }
}

/// On x86-64, the x32 system calls share the architecture tag with the 64-bit ones but carry
/// bit 30 in their number, so rules keyed by the 64-bit numbers would not see them; this
/// hand-written filter refuses every one of them.
fn x32_refusal() -> Option<BpfProgram> {
    if std::env::consts::ARCH != "x86_64" {
        return None;
    }
    const LD_W_ABS: u16 = 0x20;
    const JEQ_K: u16 = 0x05 | 0x10;
    const JGE_K: u16 = 0x05 | 0x30;
    const RET_K: u16 = 0x06;
    const ARCH_OFFSET: u32 = 4;
    const NR_OFFSET: u32 = 0;
    const AUDIT_ARCH_X86_64: u32 = 62 | 0x8000_0000 | 0x4000_0000;
    const X32_BIT: u32 = 0x4000_0000;
    let ins = |code, jt, jf, k| sock_filter { code, jt, jf, k };
    Some(vec![
        ins(LD_W_ABS, 0, 0, ARCH_OFFSET),
        // Another architecture is left to the other filters (which kill it).
        ins(JEQ_K, 0, 3, AUDIT_ARCH_X86_64),
        ins(LD_W_ABS, 0, 0, NR_OFFSET),
        ins(JGE_K, 0, 1, X32_BIT),
        ins(RET_K, 0, 0, libc::SECCOMP_RET_ERRNO | libc::EPERM as u32),
        ins(RET_K, 0, 0, libc::SECCOMP_RET_ALLOW),
    ])
}

fn rule(conditions: Vec<SeccompCondition>) -> Result<SeccompRule, SandboxError> {
    Ok(SeccompRule::new(conditions)?)
}

fn cond(arg: u8, len: Len, op: Op, value: u64) -> Result<SeccompCondition, SandboxError> {
    Ok(SeccompCondition::new(arg, len, op, value)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_compiles() {
        for mode in [
            NetworkMode::None,
            NetworkMode::Proxy { port: 8080 },
            NetworkMode::DangerousUnconfined,
        ] {
            for unix in [UnixSockets::PairsOnly, UnixSockets::Allowed] {
                let f = filters(mode, unix).unwrap();
                assert!(f.programs.iter().all(|p| !p.is_empty()));
            }
        }
    }
}
