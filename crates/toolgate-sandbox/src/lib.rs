//! toolgate's confinement of an approved command: a child confined between fork and exec, so
//! that what a person allowed to run can write only the workspace and its own temporary
//! directory, cannot read toolgate's state or the usual credential stores, and reaches the
//! network only as its spec says.
//!
//! The work is split in two so that the child does nothing but system calls: [`Sandbox::prepare`]
//! runs in the parent and does everything that allocates (the paths are resolved and opened,
//! the Landlock ruleset is built, the seccomp filters are compiled); [`Prepared::apply_in_child`]
//! only enforces them, and [`Prepared::confine`] installs it as a command's `pre_exec` hook.
//! The machine is probed once ([`Sandbox::detect`]); a machine that cannot enforce the rules in
//! force is refused with [`SandboxError::Unavailable`] (`sandbox_unavailable`), never silently
//! confined less, and each prepared sandbox names what it enforces and what it does not
//! ([`Enforced`]).
//!
//! ```no_run
//! use std::path::Path;
//! use std::process::Command;
//! use toolgate_sandbox::{DenyList, Sandbox, SandboxSpec};
//!
//! let sandbox = Sandbox::detect();
//! let mut spec = SandboxSpec::new("/work/project", "/tmp/toolgate-call-1");
//! spec.denied = DenyList::defaults(Path::new("/home/ada"), &["/home/ada/.local/state/toolgate"]);
//! let prepared = sandbox.prepare(&spec)?;
//! let mut command = Command::new("/bin/sh");
//! command.args(["-c", "make test"]).current_dir("/work/project");
//! prepared.confine(&mut command);
//! let status = command.status()?;
//! println!("{status}; {}", prepared.enforced());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod capabilities;
mod filesystem;
mod mounts;
mod probe;
mod seccomp;
mod spec;
mod stores;

use std::fmt;
use std::io;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;

use landlock::{
    ABI, AccessFs, BitFlags, PathBeneath, RulesetCreated, RulesetCreatedAttr, RulesetStatus,
};
use rustix::process::{Resource, Rlimit};

pub use probe::{MountNamespaces, Support, probe};
pub use spec::{DenyList, Limits, NetworkMode, SandboxSpec, UnixSockets};
pub use stores::UserDirs;

/// The lowest Landlock ABI the rules in force need: TCP rules came with 4, the abstract Unix
/// socket and signal scopes with 6.
const REQUIRED_ABI: u8 = 6;

/// Why a sandbox could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// This machine cannot enforce the rules in force.
    #[error("sandbox unavailable: {missing}")]
    Unavailable {
        /// What is missing, in words for the operator.
        missing: String,
    },
    /// A readable or writable path of the spec cannot be resolved.
    #[error("cannot use `{path}` as a sandbox path: {source}")]
    Path {
        /// The path as given.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// A path could not be opened for a Landlock rule.
    #[error("cannot open a path for a landlock rule: {0}")]
    PathFd(#[from] landlock::PathFdError),
    /// Landlock refused a rule.
    #[error("landlock refused a rule: {0}")]
    Landlock(#[from] landlock::RulesetError),
    /// The seccomp filters could not be compiled.
    #[error("cannot compile the seccomp filter: {0}")]
    Seccomp(#[from] seccompiler::BackendError),
}

impl SandboxError {
    /// The stable code an outcome carries.
    pub fn code(&self) -> &'static str {
        match self {
            SandboxError::Unavailable { .. } => "sandbox_unavailable",
            SandboxError::Path { .. } => "sandbox_invalid_path",
            SandboxError::PathFd(_) | SandboxError::Landlock(_) | SandboxError::Seccomp(_) => {
                "sandbox_failed"
            }
        }
    }
}

/// The sandbox of this machine: what it supports, probed once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sandbox {
    support: Support,
}

impl Sandbox {
    /// Probes the running kernel.
    pub fn detect() -> Self {
        Sandbox { support: probe() }
    }

    /// A sandbox that believes the kernel supports `support` (what `detect` found, or a
    /// narrower claim: a test's way to see the refusal of a machine it is not on).
    pub fn with_support(support: Support) -> Self {
        Sandbox { support }
    }

    /// What this sandbox found.
    pub fn support(&self) -> Support {
        self.support
    }

    /// Resolves and opens the paths of `spec`, builds its Landlock ruleset and compiles its
    /// seccomp filters, in the calling process; nothing is enforced yet.
    pub fn prepare(&self, spec: &SandboxSpec) -> Result<Prepared, SandboxError> {
        let abi_number = self.check()?;
        let abi = ABI::from(i32::from(abi_number));
        let read_only = if self.support.mount_namespaces.possible() {
            let mut writable = spec.writable.clone();
            writable.push(spec.temp_dir.clone());
            mounts::ReadOnly::prepare(&writable, &spec.pinned, &spec.read_only).map_err(
                |source| SandboxError::Path {
                    path: spec.temp_dir.clone(),
                    source,
                },
            )?
        } else {
            mounts::ReadOnly::default()
        };
        let (ruleset, plan) = filesystem::ruleset(spec, abi, read_only.own_terminals())?;
        let terminal_access = filesystem::terminal_access(abi);
        let filters = seccomp::filters(spec.network, spec.unix_sockets)?;
        let enforced = Enforced::describe(spec, abi_number, &plan, &read_only);
        Ok(Prepared {
            inner: Arc::new(Inner {
                ruleset,
                filters,
                read_only,
                terminal_access,
                limits: spec.limits,
                enforced,
            }),
        })
    }

    /// Whether this machine can enforce the rules in force, and with which Landlock ABI;
    /// [`SandboxError::Unavailable`] says what is missing.
    pub fn check(&self) -> Result<u8, SandboxError> {
        let abi = self
            .support
            .landlock_abi
            .ok_or_else(|| SandboxError::Unavailable {
                missing: "landlock is not available on this kernel (not built in, or not enabled \
                      at boot: `lsm=` must name `landlock`)"
                    .into(),
            })?;
        if abi < REQUIRED_ABI {
            return Err(SandboxError::Unavailable {
                missing: format!(
                    "landlock abi {abi} is too old: the rules in force need abi {REQUIRED_ABI} \
                     (tcp rules from abi 4, abstract unix socket and signal scopes from abi 6)"
                ),
            });
        }
        if !self.support.seccomp {
            return Err(SandboxError::Unavailable {
                missing: "seccomp filters are not available on this kernel".into(),
            });
        }
        Ok(abi)
    }
}

/// A sandbox ready to be applied to children; cheap to clone.
#[derive(Debug, Clone)]
pub struct Prepared {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    ruleset: RulesetCreated,
    filters: seccomp::Filters,
    read_only: mounts::ReadOnly,
    /// What the child may do in its own devpts instance, where it gets one.
    terminal_access: BitFlags<AccessFs>,
    limits: Limits,
    enforced: Enforced,
}

impl Prepared {
    /// What this sandbox enforces and what it leaves open, for the outcome's evidence.
    pub fn enforced(&self) -> &Enforced {
        &self.inner.enforced
    }

    /// Installs [`Prepared::apply_in_child`] as `command`'s `pre_exec` hook: every process
    /// spawned from it is confined before it executes its program, and one that cannot be
    /// confined is not run (the spawn fails with the error).
    pub fn confine(&self, command: &mut Command) {
        let prepared = self.clone();
        install(command, move || prepared.apply_in_child());
    }

    /// Confines the calling thread for good: its controlling terminal left, limits,
    /// descriptors above 2 closed at exec, the read-only binds and its own devpts instances
    /// in a mount namespace of its own (where there are any), the dangerous capabilities
    /// dropped, `no_new_privs`, the Landlock ruleset, the seccomp filters, in that order.
    /// Meant for a
    /// child between fork and exec: it makes system calls only, and allocates nothing and
    /// takes no lock (the ruleset descriptor is duplicated, the filters are already compiled).
    pub fn apply_in_child(&self) -> io::Result<()> {
        let inner = &*self.inner;
        leave_controlling_terminal()?;
        set_limit(Resource::Core, Some(0))?;
        set_limit(Resource::Fsize, inner.limits.file_size)?;
        set_limit(Resource::As, inner.limits.address_space)?;
        set_limit(Resource::Nproc, inner.limits.processes)?;
        set_limit(Resource::Nofile, inner.limits.open_files)?;
        close_from_three_at_exec()?;
        let own_terminals = inner.read_only.apply_in_child()?;
        capabilities::drop_in_child()?;
        rustix::thread::set_no_new_privs(true)?;

        let mut ruleset = inner.ruleset.try_clone()?;
        if let Some(root) = &own_terminals {
            // The duplicate shares the parent's ruleset, so this rule stays in it for later
            // children too; it names this child's own devpts root, which no other namespace
            // mounts, and a later child's domain cannot reach this one's processes.
            ruleset = ruleset
                .add_rule(PathBeneath::new(root, inner.terminal_access))
                .map_err(|e| os_error(&e))?;
        }
        drop(own_terminals);
        let status = ruleset.restrict_self().map_err(|e| os_error(&e))?;
        if status.ruleset != RulesetStatus::FullyEnforced {
            return Err(io::Error::from_raw_os_error(libc::EPERM));
        }
        for program in &inner.filters.programs {
            seccompiler::apply_filter(program).map_err(|e| match e {
                seccompiler::Error::Seccomp(e) | seccompiler::Error::Prctl(e) => e,
                _ => io::Error::from_raw_os_error(libc::EINVAL),
            })?;
        }
        Ok(())
    }
}

fn set_limit(resource: Resource, value: Option<u64>) -> io::Result<()> {
    match value {
        None => Ok(()),
        Some(v) => Ok(rustix::process::setrlimit(
            resource,
            Rlimit {
                current: Some(v),
                maximum: Some(v),
            },
        )?),
    }
}

/// Leaves the controlling terminal this process inherited, if any, so that `/dev/tty` is no
/// longer the person's terminal: a command started from `toolgate call` in a terminal (or
/// from a server started in one) could otherwise print a false password prompt there and
/// read what is typed, whatever its standard streams are. `TIOCNOTTY` rather than `setsid`:
/// the child stays in toolgate's session and its own process group, which is how toolgate
/// tells its children from what they leave behind. A session leader would hang up its
/// terminal's foreground group by it; toolgate never makes a confined child one, so a
/// session leader with a terminal here is refused rather than guessed about.
fn leave_controlling_terminal() -> io::Result<()> {
    use rustix::fs::{Mode, OFlags};
    use rustix::io::Errno;
    let flags = OFlags::RDWR | OFlags::NOCTTY | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let tty = match rustix::fs::open(c"/dev/tty", flags, Mode::empty()) {
        Ok(tty) => tty,
        // No controlling terminal (`ENXIO`), a hung-up one (`EIO`), no `/dev/tty` or none the
        // user may open: nothing the child could open either.
        Err(Errno::NXIO | Errno::IO | Errno::NOENT | Errno::ACCESS | Errno::PERM) => {
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    if rustix::process::getsid(None)? == rustix::process::getpid() {
        return Err(io::Error::from_raw_os_error(libc::EPERM));
    }
    no_controlling_terminal(&tty)
}

#[expect(
    unsafe_code,
    reason = "TIOCNOTTY has no safe wrapper in rustix or std; it takes no argument"
)]
fn no_controlling_terminal(tty: &impl std::os::fd::AsRawFd) -> io::Result<()> {
    // SAFETY: `TIOCNOTTY` reads and writes no memory of ours (its argument is ignored); it
    // only clears this process's controlling terminal. The descriptor is open for the call.
    let rc = unsafe { libc::ioctl(tty.as_raw_fd(), libc::TIOCNOTTY) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The operating-system error inside `error`, without allocating: a child between fork and
/// exec reports only an errno to its parent anyway.
fn os_error(error: &(dyn std::error::Error + 'static)) -> io::Error {
    let mut next = Some(error);
    while let Some(e) = next {
        if let Some(code) = e
            .downcast_ref::<io::Error>()
            .and_then(io::Error::raw_os_error)
        {
            return io::Error::from_raw_os_error(code);
        }
        next = e.source();
    }
    io::Error::from_raw_os_error(libc::EPERM)
}

/// Gives the memory the allocator holds free back to the system. glibc keeps what a
/// long-running server frees (the state of ended HTTP sessions, for one) scattered between
/// pages still in use and returns none of it by itself. It lives here, beside the other few
/// calls toolgate makes that have no safe wrapper.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[expect(unsafe_code, reason = "glibc's malloc_trim has no safe wrapper")]
pub fn release_free_memory() {
    // SAFETY: malloc_trim takes no pointer and only walks glibc's own heaps under their
    // locks; it may run on any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Elsewhere the allocator is left to itself.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn release_free_memory() {}

/// Keeps `fds` open across `command`'s exec, where they are marked close-on-exec (as every
/// descriptor of this process is, and as [`Prepared::confine`] marks every one above 2 in the
/// child): installed after the confinement, it clears the mark on these alone, in the child
/// only, so that no other child started meanwhile inherits them. A hook's sealed copies of the
/// files its command names reach it this way, as `/proc/self/fd/N`.
pub fn keep_open_at_exec(command: &mut Command, fds: Vec<Arc<std::os::fd::OwnedFd>>) {
    install(command, move || {
        for fd in &fds {
            rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
        }
        Ok(())
    });
}

#[expect(
    unsafe_code,
    reason = "the confinement must run between fork and exec, which only pre_exec reaches"
)]
fn install<F>(command: &mut Command, hook: F)
where
    F: FnMut() -> io::Result<()> + Send + Sync + 'static,
{
    // `Prepared::apply_in_child` makes system calls only: `open`, `getsid`, `ioctl(TIOCNOTTY)`
    // and `close` of `/dev/tty`, `setrlimit`, `close_range`, the mount tier's `unshare` and
    // `mount`s, `prctl`, `fcntl(F_DUPFD_CLOEXEC)` (the ruleset's descriptor duplicated),
    // `landlock_restrict_self`, `close`, `seccomp`, on data prepared in the parent and reached
    // through an `Arc` that is only read.
    // SAFETY: `pre_exec` runs `hook` in the child after fork, where only async-signal-safe
    // work is sound. The hooks this crate installs are `Prepared::apply_in_child` (above) and
    // `keep_open_at_exec`'s, which makes `fcntl(F_SETFD)` calls on descriptors it holds. They
    // allocate nothing (errors are raw errnos, the filters are already compiled) and take no
    // lock.
    unsafe {
        command.pre_exec(hook);
    }
}

#[expect(
    unsafe_code,
    reason = "close_range has no safe wrapper in rustix or std, and it takes integers only"
)]
fn close_from_three_at_exec() -> io::Result<()> {
    // Marked close-on-exec rather than closed: std's own descriptor that reports a failed exec
    // back to the parent must stay open until the exec, and so must the ruleset's.
    // SAFETY: `close_range` reads no memory of ours; it takes three integers and changes only
    // descriptor flags, which no Rust object relies on.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC as libc::c_uint,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Makes the calling process, the one that starts confined children, not dumpable: its
/// `/proc` entries (environment, memory maps, descriptors) then need `CAP_SYS_PTRACE`, which
/// a confined child does not keep, even where it runs as the same user, or as root. Call it
/// once, early; it also stops core dumps of this process.
pub fn protect_parent() -> io::Result<()> {
    Ok(rustix::process::set_dumpable_behavior(
        rustix::process::DumpableBehavior::NotDumpable,
    )?)
}

/// The tiers a prepared sandbox enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tier {
    /// Landlock for paths, TCP ports and scopes; seccomp for the rest.
    LandlockSeccomp,
    /// The same, and a mount namespace of the child's own with paths bound read-only.
    LandlockSeccompMounts,
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tier::LandlockSeccomp => f.write_str("landlock+seccomp"),
            Tier::LandlockSeccompMounts => f.write_str("landlock+seccomp+mount-namespace"),
        }
    }
}

/// What a prepared sandbox enforces and what it does not, in words for the outcome's evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Enforced {
    /// The tiers in force.
    pub tier: Tier,
    /// The Landlock ABI the ruleset was built for.
    pub landlock_abi: u8,
    /// What is enforced, one sentence each.
    pub enforced: Vec<String>,
    /// What is not closed, one sentence each; never empty (Landlock leaves the names and
    /// metadata of denied paths visible).
    pub gaps: Vec<String>,
}

impl Enforced {
    fn describe(
        spec: &SandboxSpec,
        abi: u8,
        plan: &filesystem::Plan,
        read_only: &mounts::ReadOnly,
    ) -> Self {
        let show = |paths: &[PathBuf]| {
            paths
                .iter()
                .map(|p| format!("`{}`", p.display()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut writable = spec.writable.clone();
        writable.push(spec.temp_dir.clone());
        let mut enforced = vec![
            format!(
                "landlock abi {abi}: writes only beneath {} ({} rules)",
                show(&writable),
                plan.writable.len()
            ),
            format!(
                "landlock: the system readable but {} ({} rules)",
                show(&plan.denied),
                plan.readable.len()
            ),
            "landlock: abstract unix sockets and signals outside the sandbox scoped away".into(),
        ];
        match spec.network {
            NetworkMode::None => enforced.push(
                "network none: no tcp bind or connect (landlock), no socket but AF_UNIX \
                 (seccomp)"
                    .into(),
            ),
            NetworkMode::Proxy { port } => enforced.push(format!(
                "network proxy: tcp connect only to port {port}, no tcp bind (landlock); ip \
                 sockets only as tcp streams (seccomp)"
            )),
            NetworkMode::DangerousUnconfined => {}
        }
        enforced.push(
            "seccomp: io_uring, ptrace, process_vm_readv/writev, extended attributes, bpf, perf_event_open, keyrings, \
             userfaultfd, unshare, setns, namespaces in clone, clone3, mounts, chroot, file \
             handles, kernel modules, kexec, reboot, swap, TIOCSTI refused; other \
             architectures' and x32 system calls refused"
                .into(),
        );
        let mut limits = vec!["RLIMIT_CORE 0".to_string()];
        for (name, value) in [
            ("RLIMIT_FSIZE", spec.limits.file_size),
            ("RLIMIT_AS", spec.limits.address_space),
            ("RLIMIT_NPROC", spec.limits.processes),
            ("RLIMIT_NOFILE", spec.limits.open_files),
        ] {
            if let Some(v) = value {
                limits.push(format!("{name} {v}"));
            }
        }
        enforced.push(format!(
            "no_new_privs; descriptors above 2 closed at exec; capabilities that reach other \
             processes or the kernel dropped (CAP_SYS_PTRACE, CAP_SYS_ADMIN, CAP_CHOWN, \
             CAP_KILL, CAP_NET_RAW, …); {}",
            limits.join(", ")
        ));
        if spec.unix_sockets == UnixSockets::PairsOnly {
            enforced.push(
                "unix sockets: connected stream pairs only, no socket that could connect to a \
                 path (seccomp)"
                    .into(),
            );
        }
        let mounted = !read_only.is_empty();
        enforced.push(if read_only.own_terminals() {
            "terminals: no controlling terminal (`/dev/tty` is not the person's); \
             pseudo-terminals only from a devpts instance of its own, so no other \
             terminal's `/dev/pts/N`"
                .into()
        } else {
            "terminals: no controlling terminal (`/dev/tty` is not the person's); \
             `/dev/pts` and `/dev/ptmx` not granted, so no other terminal's `/dev/pts/N`"
                .into()
        });
        if mounted {
            let git = if read_only.shown().is_empty() {
                String::new()
            } else {
                format!(", and {} read-only inside them", show(read_only.shown()))
            };
            enforced.push(format!(
                "mount namespace: every mount read-only (no chmod, chown, times or writes) but \
                 {}{git}",
                show(&writable)
            ));
        }
        let mut gaps = gaps(spec.network, spec.unix_sockets, abi, mounted);
        if mounted && !read_only.own_terminals() {
            gaps.push(NO_PTY.into());
        }
        Enforced {
            tier: if mounted {
                Tier::LandlockSeccompMounts
            } else {
                Tier::LandlockSeccomp
            },
            landlock_abi: abi,
            enforced,
            gaps,
        }
    }
}

/// Where the child cannot have a devpts instance of its own: the price of keeping it from the
/// person's terminals.
const NO_PTY: &str = "no devpts instance of the command's own: it gets no pseudo-terminal \
                      at all (`/dev/ptmx` and `/dev/pts` are not granted, since another \
                      terminal's `/dev/pts/N` could not be told from its own), so programs \
                      that need one (`script`, `expect`, a pty test) fail";

/// What a sandbox with `network` and `unix` sockets on a kernel of Landlock ABI `abi`, with or
/// without `read_only_mounts` (the mount-namespace tier), leaves open, one sentence each: what
/// a person approving a call should know, and what every outcome names.
pub fn gaps(
    network: NetworkMode,
    unix: UnixSockets,
    abi: u8,
    read_only_mounts: bool,
) -> Vec<String> {
    let mut gaps = Vec::new();
    match network {
        NetworkMode::None => {}
        NetworkMode::Proxy { .. } => gaps.push(
            "landlock names ports, not hosts: the proxy's tcp port is reachable on any address, \
             not only on 127.0.0.1 (another listener on that port elsewhere would be too)"
                .into(),
        ),
        NetworkMode::DangerousUnconfined => gaps.push(
            "network unconfined: the operator's `dangerous_unconfined_network` setting".into(),
        ),
    }
    if abi < 9 && unix == UnixSockets::Allowed {
        gaps.push(format!(
            "pathname unix sockets outside the sandbox (a docker daemon's, an ssh agent's, a \
             session bus) are reachable: landlock restricts them from abi 9, this kernel has \
             abi {abi}"
        ));
    }
    gaps.push(
        "names and metadata (stat) of denied paths are visible: landlock checks opening, not \
         looking up"
            .into(),
    );
    gaps.push(
        "the directories along the path to a denied one cannot be listed, and entries made in \
         them during the call can be neither read nor written"
            .into(),
    );
    if read_only_mounts {
        gaps.push("no pid or network namespace: the host's processes are seen".into());
    } else {
        gaps.push(NO_PTY.into());
        gaps.push(
            "no mount namespace: the mode and times of files outside the workspace that the \
             command's user owns can be changed (landlock governs opening, not chmod or \
             utime), and the paths asked to be read-only or pinned (the files that run later) are \
             as writable as the rest of the workspace while it runs"
                .into(),
        );
        gaps.push("no pid or network namespace: the host's processes are seen".into());
    }
    gaps
}

impl fmt::Display for Enforced {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "sandbox: {} (landlock abi {})",
            self.tier, self.landlock_abi
        )?;
        for line in &self.enforced {
            writeln!(f, "  enforced: {line}")?;
        }
        for line in &self.gaps {
            writeln!(f, "  gap: {line}")?;
        }
        Ok(())
    }
}
