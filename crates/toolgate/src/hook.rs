//! A `[[hook]]` as a program: spoken to in `toolgate.hook/1` (one JSON object on its standard
//! input, exactly one on its standard output), started confined as commands are (no network,
//! the workspace read-only, nothing of toolgate's state), its whole process tree ended when it
//! answers or its time is up. Whatever is not a clean answer is the hook's failure, of a kind.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rustix::fs::{MemfdFlags, SealFlags};
use toolgate_confine::{Child, Confined, Confinement, StartError};
use toolgate_core::{
    Digest, Hook, HookAnswer, HookEvent, HookFailure, HookFailureKind, HookInput, HookMode,
    MAX_HOOK_ANSWER_BYTES, canonical_json, sha256_digest,
};
use toolgate_exec::{CancelToken, CommandSpec, ExecError, Exit, PreExec};

use crate::settings::hooks::{FileRole, HookFile, HookSpec};

/// The fixed search path of a hook's environment.
pub(crate) const HOOK_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// What a hook's environment holds besides `TMPDIR`: a fixed search path and locale, nothing
/// of the user's variables (tokens, toolgate's own settings).
fn hook_env() -> Vec<(String, String)> {
    vec![
        ("PATH".to_owned(), HOOK_PATH.to_owned()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
    ]
}

/// Confinements kept made between calls, per hook: as many as its calls that ran at once.
const MAX_IDLE_CONFINEMENTS: usize = 4;

/// What tells one state of a file from another without reading it: a write changes its
/// modification and change times, a swap its device and inode. Only whether a file is read
/// again hangs on it: what runs is always a sealed copy whose bytes were checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileKey {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl FileKey {
    fn of(meta: &std::fs::Metadata) -> FileKey {
        FileKey {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// A file's bytes, read once into an anonymous file (a memfd) sealed against writing, growing
/// and shrinking: what a hook runs, and the copy its command's file arguments name, so that a
/// swap of the file after its bytes were checked changes nothing that runs.
#[derive(Debug)]
pub struct Sealed {
    fd: Arc<OwnedFd>,
    key: FileKey,
    digest: Digest,
}

impl Sealed {
    /// The bytes of the regular file at `path`, copied and sealed, with their digest.
    pub fn copy(path: &Path) -> io::Result<Sealed> {
        let (meta, bytes) = read_regular(path)?;
        let mut copy = File::from(memfd()?);
        copy.write_all(&bytes)?;
        rustix::fs::fcntl_add_seals(
            &copy,
            SealFlags::WRITE | SealFlags::GROW | SealFlags::SHRINK | SealFlags::SEAL,
        )?;
        Ok(Sealed {
            fd: Arc::new(OwnedFd::from(copy)),
            key: FileKey::of(&meta),
            digest: sha256_digest(&bytes),
        })
    }

    /// The copy's name in a child that inherited its descriptor: `/proc/self/fd/N`.
    pub fn path_in_child(&self) -> String {
        format!("/proc/self/fd/{}", self.fd.as_raw_fd())
    }
}

/// The largest file of a hook's that is read (its program, interpreter or a file its command
/// names, and what a project's configuration runs): a runtime such as node is about 100 MiB.
/// A file swapped for a larger one (a sparse file of a terabyte) is refused, not read whole
/// into memory before its digest is compared.
pub(crate) const MAX_HOOK_FILE_BYTES: u64 = 256 << 20;

/// The metadata and bytes of the regular file at `path`, opened without blocking, so that a
/// FIFO put in its place cannot hang the caller (a load, a call and every other call of the
/// hook, which waits for the copies) waiting for a writer: it is refused like any non-file.
/// Reads of a regular file are unaffected by the flag. A file over [`MAX_HOOK_FILE_BYTES`]
/// is refused (`FileTooLarge`): by its size, and by reading at most one byte more than the
/// limit should it grow while it is read.
pub(crate) fn read_regular(path: &Path) -> io::Result<(std::fs::Metadata, Vec<u8>)> {
    let mut file = File::options()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits().cast_signed())
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(io::Error::other("it is not a regular file"));
    }
    if meta.len() > MAX_HOOK_FILE_BYTES {
        return Err(too_large());
    }
    let bytes = read_at_most(&mut file, meta.len(), MAX_HOOK_FILE_BYTES)?;
    Ok((meta, bytes))
}

/// Everything `source` holds, `expected` bytes of it foreseen, if that is at most `limit`
/// bytes: at most `limit + 1` are read to tell.
fn read_at_most(source: &mut impl Read, expected: u64, limit: u64) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::with_capacity(usize::try_from(expected.min(limit)).unwrap_or(0));
    source
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    if u64::try_from(bytes.len()).unwrap_or(u64::MAX) > limit {
        return Err(too_large());
    }
    Ok(bytes)
}

fn too_large() -> io::Error {
    io::Error::new(
        io::ErrorKind::FileTooLarge,
        format!(
            "it is larger than {} MiB, the most toolgate reads of a hook's file",
            MAX_HOOK_FILE_BYTES >> 20
        ),
    )
}

/// An anonymous file that may be sealed, closed at exec, executable.
fn memfd() -> io::Result<OwnedFd> {
    let flags = MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING;
    // `MFD_EXEC` (Linux 6.3) keeps it executable where `vm.memfd_noexec` would make it
    // otherwise; an older kernel refuses the flag it does not know.
    match rustix::fs::memfd_create(c"toolgate-hook", flags | MemfdFlags::EXEC) {
        Err(rustix::io::Errno::INVAL) => Ok(rustix::fs::memfd_create(c"toolgate-hook", flags)?),
        other => Ok(other?),
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What one call runs: the sealed program (or its interpreter), its `argv[0]` and arguments,
/// and the copies it must inherit across exec.
struct Command {
    exec: String,
    arg0: String,
    args: Vec<String>,
    kept: Vec<Arc<OwnedFd>>,
}

/// One configured hook, run as its program over one workspace.
#[derive(Debug)]
pub struct ProcessHook {
    spec: HookSpec,
    confinement: Arc<Confinement>,
    /// Where it runs: the workspace's root, which it may read and not write.
    cwd: PathBuf,
    /// The sealed copy of each of `spec.files` checked last, reused while the file is as it
    /// was then.
    sealed: Mutex<Vec<Option<Arc<Sealed>>>>,
    /// Confinements made for earlier calls (the sandbox prepared, a private `TMPDIR`, emptied
    /// after each call), so that a call does not build its ruleset and filters again.
    idle: Mutex<Vec<Confined>>,
}

impl ProcessHook {
    /// The hook of `spec` run in the workspace at `cwd` (its canonical root), whose files
    /// named relative to it are digested now. Before it runs, [`ProcessHook::outside_workspace`]
    /// must pass.
    pub fn new(
        spec: HookSpec,
        confinement: Arc<Confinement>,
        cwd: PathBuf,
    ) -> Result<Self, String> {
        let spec = spec.in_directory(&cwd)?;
        Ok(ProcessHook {
            spec,
            confinement,
            cwd,
            sealed: Mutex::new(Vec::new()),
            idle: Mutex::new(Vec::new()),
        })
    }

    /// Refuses the hook when it runs or reads a file a command could change in its workspace
    /// (see [`HookSpec::outside_workspace`]).
    pub fn outside_workspace(&self) -> Result<(), String> {
        self.spec.outside_workspace(&self.cwd)
    }

    /// A sealed copy of each of the hook's files whose bytes are those taken at load; a file
    /// that is gone or changed since fails the hook. A file is read again only when its
    /// device, inode, size or times differ from the copy's.
    fn checked(&self) -> Result<Vec<Option<Arc<Sealed>>>, HookFailure> {
        let mut cache = lock(&self.sealed);
        cache.resize(self.spec.files.len(), None);
        let mut copies = Vec::with_capacity(cache.len());
        for (file, slot) in self.spec.files.iter().zip(cache.iter_mut()) {
            let copy = check(file, slot).inspect_err(|_| *slot = None)?;
            copies.push(copy);
        }
        Ok(copies)
    }

    /// The command that runs the checked copies: the program's, or for a `#!` program its
    /// interpreter's with the program's copy as the script; each file argument replaced by
    /// its copy's name.
    fn command(&self, copies: &[Option<Arc<Sealed>>]) -> Result<Command, HookFailure> {
        let missing = |path: &Path| {
            HookFailure::new(
                HookFailureKind::MissingProgram,
                format!("`{}` is not there", path.display()),
            )
        };
        let mut args = self.spec.args.clone();
        let mut kept = Vec::new();
        let mut program = None;
        let mut interpreter = None;
        for (file, copy) in self.spec.files.iter().zip(copies) {
            match (&file.role, copy) {
                (FileRole::Program, Some(copy)) => program = Some(copy),
                (FileRole::Interpreter { arg }, Some(copy)) => {
                    interpreter = Some((file, copy, arg));
                }
                (FileRole::Argument(index), Some(copy)) => {
                    if let Some(arg) = args.get_mut(*index) {
                        *arg = copy.path_in_child();
                        kept.push(Arc::clone(&copy.fd));
                    }
                }
                (FileRole::Program | FileRole::Interpreter { .. }, None) => {
                    return Err(missing(&file.path));
                }
                (FileRole::Argument(_), None) => {}
            }
        }
        let program = program.ok_or_else(|| missing(&self.spec.program))?;
        Ok(match interpreter {
            None => Command {
                exec: program.path_in_child(),
                arg0: self.spec.program.display().to_string(),
                args,
                kept,
            },
            Some((file, copy, arg)) => {
                kept.push(Arc::clone(&program.fd));
                Command {
                    exec: copy.path_in_child(),
                    arg0: file.path.display().to_string(),
                    args: arg
                        .iter()
                        .cloned()
                        .chain([program.path_in_child()])
                        .chain(args)
                        .collect(),
                    kept,
                }
            }
        })
    }

    /// A confinement made for an earlier call, or a new one.
    fn confined(&self) -> Result<Confined, StartError> {
        match lock(&self.idle).pop() {
            Some(confined) => Ok(confined),
            None => self.confinement.start(Child::new("toolgate-hook-")),
        }
    }

    /// Keeps `confined` for the next call once what this one left in its `TMPDIR` is
    /// removed; one whose call did not end cleanly (killed, or with a process nobody can
    /// vouch is gone, which might still write there) or that cannot be emptied is ended.
    fn give_back(&self, confined: Confined, clean: bool) {
        let emptied = clean
            && confined
                .env()
                .iter()
                .find(|(name, _)| name == "TMPDIR")
                .is_some_and(|(_, dir)| empty_dir(Path::new(dir)));
        let mut idle = lock(&self.idle);
        if emptied && idle.len() < MAX_IDLE_CONFINEMENTS {
            idle.push(confined);
        } else {
            drop(idle);
            confined.stop();
        }
    }
}

/// The checked copy of `file`: the one in `slot` while the file is as it was then, else a new
/// copy whose digest must be the one taken at load.
fn check(
    file: &HookFile,
    slot: &mut Option<Arc<Sealed>>,
) -> Result<Option<Arc<Sealed>>, HookFailure> {
    let shown = file.path.display();
    let program = file.role == FileRole::Program;
    let changed =
        |what: &str| HookFailure::new(HookFailureKind::Changed, format!("`{shown}` {what}"));
    let missing = || {
        HookFailure::new(
            HookFailureKind::MissingProgram,
            format!("`{shown}` is not there"),
        )
    };
    let meta = std::fs::metadata(&file.path);
    let Some(loaded) = &file.digest else {
        return match meta {
            Err(_) if program => Err(missing()),
            Err(_) => Ok(None),
            Ok(_) => Err(changed("appeared since the configuration was loaded")),
        };
    };
    let meta = match meta {
        Ok(meta) => meta,
        Err(_) if program => return Err(missing()),
        Err(_) => return Err(changed("is gone since the configuration was loaded")),
    };
    if let Some(copy) = slot.as_ref().filter(|copy| copy.key == FileKey::of(&meta)) {
        return Ok(Some(Arc::clone(copy)));
    }
    let copy = match Sealed::copy(&file.path) {
        Ok(copy) => copy,
        Err(e) if e.kind() == io::ErrorKind::NotFound && program => return Err(missing()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(changed("is gone since the configuration was loaded"));
        }
        // It was digested at load, within the bound: it has changed since.
        Err(e) if e.kind() == io::ErrorKind::FileTooLarge => {
            return Err(changed(&format!(
                "changed since the configuration was loaded: {e}"
            )));
        }
        Err(e) => {
            return Err(HookFailure::new(
                HookFailureKind::Unstarted,
                format!("cannot make a sealed copy of `{shown}`: {e}"),
            ));
        }
    };
    if copy.digest != *loaded {
        return Err(changed("changed since the configuration was loaded"));
    }
    let copy = Arc::new(copy);
    *slot = Some(Arc::clone(&copy));
    Ok(Some(copy))
}

/// Makes `dir` a directory only this user may write, then removes everything in it; whether
/// it is empty now. A call may have opened it to others (its process owns it, and may change
/// its mode): another local process would leave there what the next call finds.
fn empty_dir(dir: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    let private = std::fs::symlink_metadata(dir).is_ok_and(|meta| meta.is_dir())
        && std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).is_ok();
    if !private {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    for entry in entries {
        let removed = entry.and_then(|entry| match entry.file_type()? {
            kind if kind.is_dir() => std::fs::remove_dir_all(entry.path()),
            _ => std::fs::remove_file(entry.path()),
        });
        if removed.is_err() {
            return false;
        }
    }
    true
}

impl Hook for ProcessHook {
    fn name(&self) -> &str {
        &self.spec.name
    }

    fn event(&self) -> HookEvent {
        self.spec.event
    }

    fn mode(&self) -> HookMode {
        self.spec.mode
    }

    fn applies_to(&self, tool: &str) -> bool {
        self.spec.tools.as_ref().is_none_or(|t| t.contains(tool))
    }

    /// Its name, command and the digests of its files as loaded.
    fn identity(&self) -> String {
        let files: Vec<_> = self
            .spec
            .files
            .iter()
            .map(|file| serde_json::json!([file.path, file.digest]))
            .collect();
        canonical_json(&serde_json::json!({
            "name": self.spec.name,
            "program": self.spec.program,
            "args": self.spec.args,
            "files": files,
        }))
    }

    fn call(&self, input: &HookInput<'_>) -> Result<HookAnswer, HookFailure> {
        let copies = self.checked()?;
        self.run(&copies, input)
    }
}

impl ProcessHook {
    /// Runs the checked `copies`, confined, told of the call by `input`.
    fn run(
        &self,
        copies: &[Option<Arc<Sealed>>],
        input: &HookInput<'_>,
    ) -> Result<HookAnswer, HookFailure> {
        let command = self.command(copies)?;
        let unstarted = |detail: String| HookFailure::new(HookFailureKind::Unstarted, detail);
        let confined = self
            .confined()
            .map_err(|e| unstarted(format!("cannot confine it: {e}")))?;
        let spec = CommandSpec::new(command.exec, &self.cwd)
            .arg0(command.arg0)
            .args(command.args)
            .env(hook_env())
            .stdin(input.to_json())
            .timeout(self.spec.timeout)
            // Enough to tell an answer over the bound from one within it.
            .capture_bytes(2 * (MAX_HOOK_ANSWER_BYTES + 1));
        let mut spec = confined.apply_spec(spec);
        if !command.kept.is_empty() {
            // After the confinement, which marks every descriptor above 2 close-on-exec.
            let confine = spec.pre_exec.take();
            let kept = command.kept;
            spec = spec.pre_exec(PreExec::new(move |child| {
                if let Some(step) = &confine {
                    step.install(child);
                }
                toolgate_sandbox::keep_open_at_exec(child, kept.clone());
            }));
        }
        let cancel = CancelToken::new().map_err(|e| unstarted(e.to_string()))?;
        let ran = toolgate_exec::run(&spec, &cancel);
        let clean = ran
            .as_ref()
            .is_ok_and(|outcome| outcome.stopped.is_none() && outcome.unknowns.is_empty());
        self.give_back(confined, clean);
        let outcome = ran.map_err(|e| match e {
            ExecError::ProgramNotFound { .. } | ExecError::NotExecutable { .. } => {
                HookFailure::new(HookFailureKind::MissingProgram, e.to_string())
            }
            ExecError::Spawn { source, .. } => unstarted(format!(
                "cannot start the checked copy of `{}`: {source}",
                self.spec.program.display()
            )),
            other => unstarted(other.to_string()),
        })?;
        unended(outcome.ended, &outcome.unknowns)?;
        let limit = self.spec.timeout.as_millis();
        if outcome.timed_out() || outcome.cancelled() {
            return Err(HookFailure::new(
                HookFailureKind::Timeout,
                format!("no answer within {limit} ms; its processes were killed"),
            ));
        }
        match outcome.exit {
            Exit::Code(0) => {}
            Exit::Code(code) => {
                return Err(HookFailure::new(
                    HookFailureKind::Exit,
                    format!("it exited with status {code}"),
                ));
            }
            Exit::Signal(signal) => {
                return Err(HookFailure::new(
                    HookFailureKind::Signal,
                    format!("signal {signal} ended it"),
                ));
            }
            Exit::Unknown => {
                return Err(HookFailure::new(
                    HookFailureKind::Signal,
                    "it did not die when killed",
                ));
            }
        }
        let total = outcome.stdout.total_bytes();
        if total > MAX_HOOK_ANSWER_BYTES as u64 {
            return Err(HookFailure::new(
                HookFailureKind::OutputTooLarge,
                format!("{total} bytes of answer; at most {MAX_HOOK_ANSWER_BYTES}"),
            ));
        }
        HookAnswer::parse(outcome.stdout.head(), self.spec.event)
    }
}

/// The failure of a run after which a process of the hook's tree may still be running (it
/// would not die when killed, or could not be looked for): its answer is not taken, whatever
/// it was, since what outlives the answer might still act on the call it was told of. A
/// process it left that was killed and is gone fails nothing.
fn unended(ended: bool, unknowns: &[String]) -> Result<(), HookFailure> {
    if ended {
        return Ok(());
    }
    Err(HookFailure::new(
        HookFailureKind::Unkillable,
        format!(
            "a process it started could not be confirmed dead after it was killed: {}",
            unknowns.join("; ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use serde_json::json;
    use toolgate_core::{HookDecision, Surface};

    use super::*;
    use crate::settings::hooks::command_files;

    const ALLOW: &str = "#!/bin/sh\ncat >/dev/null\necho '{\"decision\": \"allow\"}'\n";
    const DENY: &str =
        "#!/bin/sh\ncat >/dev/null\necho '{\"decision\": \"deny\", \"reason\": \"swapped\"}'\n";

    fn executable(path: &Path, text: &str) {
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    /// The hook `command` over the workspace `dir/ws`, unconfined (the sandbox's part is
    /// tried through the binary by tests/hooks.rs), its files digested now as at load: those
    /// in `dir` lie outside the workspace.
    fn hook(dir: &Path, command: &[&str]) -> ProcessHook {
        let command: Vec<String> = command.iter().map(|a| (*a).to_owned()).collect();
        let spec = HookSpec {
            timeout: std::time::Duration::from_secs(10),
            ..HookSpec::of_command(&command)
        };
        let confinement = Arc::new(Confinement::dangerous_unconfined());
        let ws = dir.join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let hook = ProcessHook::new(spec, confinement, ws.canonicalize().unwrap()).unwrap();
        hook.outside_workspace().unwrap();
        hook
    }

    fn answer(
        hook: &ProcessHook,
        copies: &[Option<Arc<Sealed>>],
    ) -> Result<HookAnswer, HookFailure> {
        let arguments = json!({"path": "a.txt"});
        let input = HookInput {
            event: HookEvent::PreCall,
            call_id: "c-1",
            tool: "read_file",
            version: "1.0",
            arguments: &arguments,
            effect: None,
            actor: "local",
            surface: Surface::Chat,
            resources: &[],
            output: None,
        };
        hook.run(copies, &input)
    }

    /// The race the digest alone lost: the file is swapped after its bytes were checked and
    /// before the program starts. What runs is the checked copy, whether the program itself
    /// is swapped (renamed over) or a script its command names (rewritten in place); the next
    /// call sees the change and fails.
    #[test]
    fn what_runs_is_the_checked_copy_when_a_file_is_swapped_after_the_check() {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("guard");
        let script = dir.path().join("guard.sh");
        executable(&program, ALLOW);
        executable(&script, ALLOW);
        let shown = program.display().to_string();
        let by_name = script.display().to_string();
        for (hook, path) in [
            (hook(dir.path(), &[&shown]), &program),
            (hook(dir.path(), &["/bin/sh", &by_name]), &script),
        ] {
            let copies = hook.checked().unwrap();
            if path == &program {
                let swapped = dir.path().join("swapped");
                executable(&swapped, DENY);
                std::fs::rename(&swapped, path).unwrap();
            } else {
                std::fs::write(path, DENY).unwrap();
            }
            let ran = answer(&hook, &copies).unwrap();
            assert_eq!(
                ran.decision,
                Some(HookDecision::Allow),
                "{}: {ran:?}",
                path.display()
            );
            let failure = hook.checked().unwrap_err();
            assert_eq!(failure.kind, HookFailureKind::Changed, "{failure:?}");
            executable(path, ALLOW);
        }
    }

    /// A run that ended with every process gone gives its answer; one after which a process
    /// may still be running (here, by its run's word: one that will not die cannot be made in
    /// a test) fails `unkillable`, and a clean exit with a valid answer does not change that.
    #[test]
    fn an_answer_is_not_taken_while_a_process_may_still_run() {
        let killed = [toolgate_exec::unknown::DETACHED.to_owned()];
        assert!(unended(true, &[]).is_ok());
        assert!(unended(true, &killed).is_ok(), "killed and gone");
        let unknowns = [
            toolgate_exec::unknown::UNKILLABLE.to_owned(),
            toolgate_exec::unknown::survivor(4242, "sleep"),
        ];
        let failure = unended(false, &unknowns).unwrap_err();
        assert_eq!(failure.kind, HookFailureKind::Unkillable, "{failure:?}");
        assert!(
            failure.detail.contains("could not be confirmed dead")
                && failure.detail.contains("process 4242 (`sleep`)"),
            "{failure:?}"
        );
        // A hook that answers at once and leaves a child behind: the child is killed, the
        // run says every process is gone, and the answer stands.
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("guard");
        executable(
            &script,
            "#!/bin/sh\ncat >/dev/null\nsleep 30 &\necho '{\"decision\": \"allow\"}'\n",
        );
        let hook = hook(dir.path(), &[&script.display().to_string()]);
        let copies = hook.checked().unwrap();
        assert_eq!(
            answer(&hook, &copies).unwrap().decision,
            Some(HookDecision::Allow)
        );
    }

    /// A sealed copy cannot be written, grown or shrunk, even by whoever holds it writable.
    #[test]
    fn a_sealed_copy_cannot_be_changed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("guard");
        executable(&path, ALLOW);
        let copy = Sealed::copy(&path).unwrap();
        assert_eq!(copy.digest, sha256_digest(ALLOW.as_bytes()));
        let mut file = File::from(copy.fd.try_clone().unwrap());
        assert!(file.write_all(b"#!/bin/evil\n").is_err());
        assert!(file.set_len(1).is_err());
        assert!(file.set_len(1 << 20).is_err());
        std::fs::write(&path, DENY).unwrap();
        let now = std::fs::read(format!("/proc/self/fd/{}", copy.fd.as_raw_fd())).unwrap();
        assert_eq!(now, ALLOW.as_bytes());
    }

    /// A FIFO in place of a hook's file is refused at once, not waited on for a writer: when
    /// its copy is made for a call, and when the configuration is loaded.
    #[test]
    fn a_fifo_in_place_of_a_file_is_refused_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("guard");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &path,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::RUSR | rustix::fs::Mode::WUSR,
            0,
        )
        .unwrap();
        let (sender, copied) = std::sync::mpsc::channel();
        let fifo = path.clone();
        std::thread::spawn(move || sender.send(Sealed::copy(&fifo).map(|_| ())));
        let copied = copied
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("the copy waits for a writer of the FIFO");
        assert!(copied.is_err(), "a FIFO is not a regular file");
        let (sender, loaded) = std::sync::mpsc::channel();
        std::thread::spawn(move || sender.send(command_files(&path, &[]).unwrap()));
        let loaded = loaded
            .recv_timeout(std::time::Duration::from_secs(5))
            .expect("the load waits for a writer of the FIFO");
        assert_eq!(loaded[0].digest, None, "nothing of a FIFO is digested");
    }

    /// A hook's file larger than the bound is refused by its size, unread: at load, and when a
    /// file digested at load has grown past it since (a sparse file: no disk is used). Where
    /// the size does not tell, at most one byte past the bound is read.
    #[test]
    fn a_file_over_the_bound_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("guard");
        executable(&path, ALLOW);
        let hook = hook(dir.path(), &[&path.display().to_string()]);
        hook.checked().unwrap();
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(MAX_HOOK_FILE_BYTES + 1)
            .unwrap();
        let error = Sealed::copy(&path).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::FileTooLarge, "{error}");
        assert!(error.to_string().contains("larger than 256 MiB"), "{error}");
        let failure = hook.checked().unwrap_err();
        assert_eq!(failure.kind, HookFailureKind::Changed, "{failure:?}");
        assert!(
            failure.detail.contains("larger than 256 MiB"),
            "{failure:?}"
        );
        let error = command_files(&path, &[]).unwrap_err();
        assert!(
            error.contains(&format!("`{}`", path.display())) && error.contains("256 MiB"),
            "{error}"
        );
        let limit = 1000;
        let mut long = io::repeat(b'x').take(u64::MAX);
        let error = read_at_most(&mut long, 10, limit).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::FileTooLarge);
        assert_eq!(
            long.limit(),
            u64::MAX - limit - 1,
            "read the bound and one byte"
        );
        let within = read_at_most(&mut io::repeat(b'x').take(limit), 0, limit).unwrap();
        assert_eq!(within.len(), 1000);
    }

    /// An unchanged file is not read again; one whose times changed is, and its bytes are
    /// compared again; one whose bytes changed fails.
    #[test]
    fn a_file_is_read_again_only_when_it_changed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("guard");
        executable(&path, ALLOW);
        let hook = hook(dir.path(), &[&path.display().to_string()]);
        let first = hook.checked().unwrap();
        let again = hook.checked().unwrap();
        let same = |a: &[Option<Arc<Sealed>>], b: &[Option<Arc<Sealed>>]| {
            Arc::ptr_eq(a[1].as_ref().unwrap(), b[1].as_ref().unwrap())
        };
        assert_eq!(first.len(), 2, "the program and its interpreter");
        assert!(same(&first, &again), "read once");
        let touched = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(touched)
            .unwrap();
        let renewed = hook.checked().unwrap();
        assert!(!Arc::ptr_eq(
            first[0].as_ref().unwrap(),
            renewed[0].as_ref().unwrap()
        ));
        assert_eq!(
            answer(&hook, &renewed).unwrap().decision,
            Some(HookDecision::Allow)
        );
        std::fs::write(&path, DENY).unwrap();
        assert_eq!(hook.checked().unwrap_err().kind, HookFailureKind::Changed);
    }

    /// An argument naming a file relative to the hook's directory is digested and handed over
    /// as a sealed copy, as an absolute one is.
    #[test]
    fn a_relative_file_argument_is_checked() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("ws/.toolgate/guard.sh");
        std::fs::create_dir_all(script.parent().unwrap()).unwrap();
        executable(&script, ALLOW);
        let hook = hook(dir.path(), &["/bin/sh", ".toolgate/guard.sh"]);
        let copies = hook.checked().unwrap();
        assert_eq!(
            answer(&hook, &copies).unwrap().decision,
            Some(HookDecision::Allow)
        );
        std::fs::write(&script, DENY).unwrap();
        assert_eq!(hook.checked().unwrap_err().kind, HookFailureKind::Changed);
    }

    /// What a call leaves in its `TMPDIR` is gone before the next call gets the directory.
    #[test]
    fn a_kept_confinement_starts_each_call_with_an_empty_tmpdir() {
        let dir = tempfile::tempdir().unwrap();
        let hook = hook(dir.path(), &["/bin/true"]);
        let confined = hook.confined().unwrap();
        let temp = PathBuf::from(&confined.env()[0].1);
        std::fs::create_dir_all(temp.join("a/b")).unwrap();
        std::fs::write(temp.join("a/b/left"), "x").unwrap();
        std::fs::write(temp.join("left"), "x").unwrap();
        hook.give_back(confined, true);
        let again = hook.confined().unwrap();
        assert_eq!(PathBuf::from(&again.env()[0].1), temp, "the same directory");
        assert_eq!(std::fs::read_dir(&temp).unwrap().count(), 0);
    }

    /// A call that opened its `TMPDIR` to other users hands the next call a directory only
    /// this user may write again: another local process cannot leave there what it finds.
    #[test]
    fn a_tmpdir_opened_to_others_is_closed_before_it_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let hook = hook(dir.path(), &["/bin/true"]);
        let confined = hook.confined().unwrap();
        let temp = PathBuf::from(&confined.env()[0].1);
        std::fs::set_permissions(&temp, std::fs::Permissions::from_mode(0o777)).unwrap();
        hook.give_back(confined, true);
        let again = hook.confined().unwrap();
        assert_eq!(PathBuf::from(&again.env()[0].1), temp, "the same directory");
        let mode = std::fs::metadata(&temp).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
    }
}
