//! The Landlock ruleset: what a confined child may read, write and connect to, built in the
//! parent (paths opened, rules added) so that the child only has to enforce it.
//!
//! Landlock only grants, and a rule on a directory covers everything beneath it, so "the
//! system minus a deny list" cannot be said directly. It is granted by enumeration instead:
//! starting at `/`, a directory with no denied path beneath it is granted whole; one with a
//! denied path beneath it is not granted itself, but each of its entries is considered in
//! turn (a denied entry is left out, the others recursed into). So only the directories along
//! the path to a denied one stay ungranted: their own listing is refused (`ls ~` fails when
//! `~/.ssh` is denied, and so does `ls /` since `/tmp` is), and an entry made in them after
//! the call started is not readable. Symbolic links met on the way are left out: Landlock
//! checks the target a path resolves to, which is granted or not on its own.
//!
//! ```no_run
//! use toolgate_sandbox::{Sandbox, SandboxSpec};
//!
//! // The ruleset is built by `prepare`; nothing is enforced until a child applies it.
//! let prepared = Sandbox::detect().prepare(&SandboxSpec::new("/work/project", "/tmp/call"))?;
//! print!("{}", prepared.enforced());
//! # Ok::<(), toolgate_sandbox::SandboxError>(())
//! ```

use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    PathFd, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};

use crate::{NetworkMode, SandboxError, SandboxSpec};

/// Devices every program expects to open for writing; granted read and write (and their
/// ioctls) though `/dev` is otherwise read-only. `/dev/tty` is the opener's controlling
/// terminal, and a confined child has none (see `leave_controlling_terminal`): opening it
/// fails with `ENXIO`, as under cron.
const DEVICES: [&str; 4] = ["/dev/null", "/dev/zero", "/dev/full", "/dev/tty"];

/// The pseudo-terminal multiplexer, granted read and write only where the child gets a
/// devpts instance of its own (the mount tier), in which `/dev/ptmx` then makes its
/// terminals; the child grants that instance itself (see `mounts::ReadOnly::own_terminals`).
/// The host's `/dev/pts` is never granted: it is every terminal of the machine, the
/// person's among them, and no rule can tell a command's own from another's. Without the
/// tier the command gets no pseudo-terminal, and the report names the gap.
const TERMINALS: [&str; 1] = ["/dev/ptmx"];

/// What a child may do in the devpts instance of its own: open its terminals, use their
/// ioctls, list them.
pub(crate) fn terminal_access(abi: ABI) -> BitFlags<AccessFs> {
    let mut access = AccessFs::ReadFile | AccessFs::WriteFile | AccessFs::ReadDir;
    if abi >= ABI::V5 {
        access |= AccessFs::IoctlDev;
    }
    access
}

/// Devices granted for reading only. Nothing else of `/dev` is granted: a block device read
/// as root is every file on its disk, denied ones included, and `/dev/input` is every key
/// typed.
const READ_DEVICES: [&str; 2] = ["/dev/random", "/dev/urandom"];

/// Never granted whole: only [`DEVICES`], [`TERMINALS`] and [`READ_DEVICES`] in it are.
const DEV: &str = "/dev";

/// What the ruleset grants, kept for the report.
#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) readable: Vec<PathBuf>,
    pub(crate) writable: Vec<PathBuf>,
    pub(crate) denied: Vec<PathBuf>,
}

/// Builds the ruleset for `spec` with a hard requirement on every right, network rule and
/// scope it handles, for a kernel of Landlock ABI `abi`; the pseudo-terminal devices are
/// granted only when the child gets `own_terminals`.
pub(crate) fn ruleset(
    spec: &SandboxSpec,
    abi: ABI,
    own_terminals: bool,
) -> Result<(RulesetCreated, Plan), SandboxError> {
    let denied = holes(spec);
    let mut plan = Plan {
        readable: Vec::new(),
        writable: Vec::new(),
        denied: denied.clone(),
    };
    let mut unlisted = denied.clone();
    unlisted.push(PathBuf::from(DEV));
    unlisted.sort();
    grant(Path::new("/"), &unlisted, &mut plan.readable);
    for root in &spec.readable {
        grant(&canonical(root)?, &denied, &mut plan.readable);
    }
    for root in spec.writable.iter().chain([&spec.temp_dir]) {
        grant(&canonical(root)?, &denied, &mut plan.writable);
    }

    let handled = AccessFs::from_all(abi);
    // The kernel is asked for every right in force with a hard requirement; one it lacks is
    // this machine's shortcoming, never a reason to confine less.
    let unavailable = |e: landlock::RulesetError| SandboxError::Unavailable {
        missing: format!("landlock on this kernel refuses a rule in force: {e}"),
    };
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled)
        .map_err(unavailable)?;
    if spec.network != NetworkMode::DangerousUnconfined {
        ruleset = ruleset
            .handle_access(AccessNet::BindTcp | AccessNet::ConnectTcp)
            .map_err(unavailable)?;
    }
    ruleset = ruleset
        .scope(Scope::AbstractUnixSocket | Scope::Signal)
        .map_err(unavailable)?;
    let mut created = ruleset.create().map_err(unavailable)?.no_new_privs(true);

    let read = AccessFs::from_read(abi);
    for path in &plan.readable {
        created = add_path(created, path, read, abi)?;
    }
    for path in &plan.writable {
        created = add_path(created, path, handled, abi)?;
    }
    let mut device = AccessFs::ReadFile | AccessFs::WriteFile;
    if abi >= ABI::V5 {
        device |= AccessFs::IoctlDev;
    }
    let terminals: &[&str] = if own_terminals { &TERMINALS } else { &[] };
    for dev in DEVICES.iter().chain(terminals) {
        if Path::new(dev).exists() {
            created = add_path(created, Path::new(dev), device, abi)?;
        }
    }
    for dev in READ_DEVICES {
        if Path::new(dev).exists() {
            created = add_path(created, Path::new(dev), AccessFs::ReadFile.into(), abi)?;
        }
    }
    if let NetworkMode::Proxy { port } = spec.network {
        created = created.add_rule(NetPort::new(port, AccessNet::ConnectTcp))?;
    }
    Ok((created, plan))
}

fn canonical(path: &Path) -> Result<PathBuf, SandboxError> {
    path.canonicalize().map_err(|source| SandboxError::Path {
        path: path.to_path_buf(),
        source,
    })
}

fn add_path(
    ruleset: RulesetCreated,
    path: &Path,
    access: BitFlags<AccessFs>,
    abi: ABI,
) -> Result<RulesetCreated, SandboxError> {
    // A file cannot be granted a right that only means something for a directory (listing,
    // making entries); the hard requirement would refuse it.
    let access = if path.is_dir() {
        access
    } else {
        access & AccessFs::from_file(abi)
    };
    let fd = match PathFd::new(path) {
        Ok(fd) => fd,
        // A path that vanished since it was listed needs no rule: nothing there to reach.
        Err(_) if !path.exists() => return Ok(ruleset),
        Err(e) => return Err(e.into()),
    };
    Ok(ruleset.add_rule(PathBeneath::new(fd, access))?)
}

/// The denied paths, resolved as Landlock sees them (through symbolic links), with each
/// `prefix*` entry expanded to what its directory holds now plus the prefix itself.
fn holes(spec: &SandboxSpec) -> Vec<PathBuf> {
    let mut resolver = Resolver::default();
    let mut out = Vec::new();
    for entry in spec.denied.entries() {
        let name = entry
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match (name.strip_suffix('*'), entry.parent()) {
            (Some(prefix), Some(dir)) => {
                out.push(resolver.resolve(&dir.join(prefix)));
                if let Ok(read) = std::fs::read_dir(dir) {
                    for item in read.flatten() {
                        if item.file_name().to_string_lossy().starts_with(prefix) {
                            out.push(resolver.resolve(&item.path()));
                        }
                    }
                }
            }
            _ => out.push(resolver.resolve(entry)),
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Resolves paths as Landlock sees them, remembering every directory met on the way: the
/// deny list's entries share a few parents (`~`, `~/.config`, `~/.local/share`), and most
/// name stores that do not exist on a given machine, whose children need no look at all.
#[derive(Default)]
struct Resolver {
    /// Each path looked at: where it resolves to, and whether it exists.
    known: HashMap<PathBuf, (PathBuf, bool)>,
}

impl Resolver {
    /// `path` with its symbolic links resolved; a path that does not exist yet keeps its
    /// name under its resolved parent, so it stays a hole should it appear.
    fn resolve(&mut self, path: &Path) -> PathBuf {
        self.look(path).0
    }

    fn look(&mut self, path: &Path) -> (PathBuf, bool) {
        if let Some(known) = self.known.get(path) {
            return known.clone();
        }
        // Only a plain absolute path is resolved a component at a time; `..` and `.` are
        // left to the system's own resolution.
        let plain = path.is_absolute()
            && path
                .components()
                .all(|c| matches!(c, Component::RootDir | Component::Normal(_)));
        let found = match (plain, path.parent(), path.file_name()) {
            (true, Some(parent), Some(name)) => {
                let (real_parent, parent_exists) = self.look(parent);
                let candidate = real_parent.join(name);
                if !parent_exists {
                    (candidate, false)
                } else {
                    match std::fs::symlink_metadata(&candidate) {
                        Ok(meta) if !meta.file_type().is_symlink() => (candidate, true),
                        Ok(_) => match candidate.canonicalize() {
                            Ok(real) => (real, true),
                            // A dangling link: the hole is the link's own name.
                            Err(_) => (candidate, false),
                        },
                        Err(_) => (candidate, false),
                    }
                }
            }
            _ => match path.canonicalize() {
                Ok(real) => (real, true),
                Err(_) => match (path.parent(), path.file_name()) {
                    (Some(parent), Some(name)) => (self.resolve(parent).join(name), false),
                    _ => (path.to_path_buf(), false),
                },
            },
        };
        self.known.insert(path.to_path_buf(), found.clone());
        found
    }
}

/// Grants `root` minus `holes` (sorted): `root` itself when no hole is at or beneath it,
/// otherwise its entries one by one (see the module documentation).
fn grant(root: &Path, holes: &[PathBuf], out: &mut Vec<PathBuf>) {
    // `holes` is sorted, and paths order by their components, so the holes at or beneath
    // `root` are the run that starts where `root` would be: one look finds the first, for
    // the hundreds of entries of `/` and `$HOME` against the hundreds of holes.
    let first = holes
        .get(holes.partition_point(|h| h.as_path() < root))
        .filter(|h| h.starts_with(root));
    match first {
        Some(hole) if hole == root => return,
        Some(_) => {}
        None => {
            out.push(root.to_path_buf());
            return;
        }
    }
    // A directory that cannot be listed is left ungranted: less access, never more.
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let is_link = entry.file_type().map(|t| t.is_symlink()).unwrap_or(true);
        if !is_link {
            grant(&entry.path(), holes, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_to_a_hole_is_enumerated_and_the_hole_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        for d in ["home/.ssh", "home/src", "other"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        std::fs::write(base.join("home/.bashrc"), "").unwrap();
        std::os::unix::fs::symlink(base.join("home/.ssh"), base.join("home/link")).unwrap();
        let mut out = Vec::new();
        grant(&base, &[base.join("home/.ssh")], &mut out);
        out.sort();
        assert_eq!(
            out,
            vec![
                base.join("home/.bashrc"),
                base.join("home/src"),
                base.join("other")
            ]
        );
    }

    #[test]
    fn the_resolver_follows_links_and_keeps_names_that_do_not_exist() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(base.join("real/config")).unwrap();
        std::os::unix::fs::symlink(base.join("real"), base.join("home")).unwrap();
        std::os::unix::fs::symlink(base.join("gone"), base.join("real/dangling")).unwrap();
        let mut resolver = Resolver::default();
        for (path, want) in [
            ("home/config/gh", "real/config/gh"),
            ("home/config", "real/config"),
            ("home/missing/deeper/file", "real/missing/deeper/file"),
            ("home/dangling", "real/dangling"),
            ("home/config/../config/x", "real/config/x"),
        ] {
            assert_eq!(
                resolver.resolve(&base.join(path)),
                base.join(want),
                "{path}"
            );
        }
    }

    #[test]
    fn a_hole_beside_a_directory_of_a_longer_name_is_not_beneath_it() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        for d in ["a/b/c", "a/b/d", "a/b-x", "a/bc"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        let mut holes = vec![base.join("a/b-x"), base.join("a/b/c"), base.join("a/bc")];
        holes.sort();
        let mut out = Vec::new();
        grant(&base.join("a/b"), &holes, &mut out);
        assert_eq!(out, vec![base.join("a/b/d")]);
        let mut out = Vec::new();
        grant(
            &base.join("a/b"),
            &[base.join("a/b-x"), base.join("a/bc")],
            &mut out,
        );
        assert_eq!(out, vec![base.join("a/b")]);
    }

    #[test]
    fn a_prefix_entry_denies_what_starts_with_it() {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().canonicalize().unwrap();
        std::fs::write(base.join("credentials.toml"), "").unwrap();
        std::fs::write(base.join("config.toml"), "").unwrap();
        let mut spec = SandboxSpec::new(&base, &base);
        spec.denied = crate::DenyList::default();
        spec.denied.add(&base.join("credentials*"));
        let got = holes(&spec);
        assert_eq!(
            got,
            vec![base.join("credentials"), base.join("credentials.toml")]
        );
    }
}
