//! Finding the program an `argv[0]` names, as an absolute, canonical path.
//!
//! The path found here is what a person approves and what runs, so it is resolved completely:
//! symbolic links followed, `..` gone. A bare name is searched in `PATH` (absolute entries
//! only); a name with a `/` is taken relative to the working directory, as a shell would.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::ExecError;

/// The absolute, canonical path of the executable regular file `argv0` names.
///
/// `path_var` is the `PATH` the command will run with; `cwd` (absolute) is where a name with a
/// `/` is looked up.
pub fn resolve_program(
    argv0: &str,
    path_var: Option<&str>,
    cwd: &Path,
) -> Result<PathBuf, ExecError> {
    if argv0.is_empty() {
        return Err(ExecError::ProgramNotFound {
            program: String::new(),
            reason: "the program name is empty".to_owned(),
        });
    }
    if argv0.contains('\0') {
        return Err(ExecError::ProgramNotFound {
            program: argv0.escape_debug().to_string(),
            reason: "the program name contains a NUL byte".to_owned(),
        });
    }
    if argv0.contains('/') {
        let candidate = cwd.join(argv0);
        return match candidate_kind(&candidate) {
            Candidate::Executable(path) => Ok(path),
            Candidate::NotExecutable(path) => Err(ExecError::NotExecutable {
                path: path.display().to_string(),
            }),
            Candidate::Missing => Err(ExecError::ProgramNotFound {
                program: argv0.to_owned(),
                reason: format!("there is no such file (looked in `{}`)", cwd.display()),
            }),
        };
    }
    let mut not_executable = None;
    for dir in path_var.unwrap_or_default().split(':') {
        // An empty or relative entry would search the working directory, which the command's
        // caller may control.
        if !dir.starts_with('/') {
            continue;
        }
        match candidate_kind(&Path::new(dir).join(argv0)) {
            Candidate::Executable(path) => return Ok(path),
            Candidate::NotExecutable(path) => {
                not_executable.get_or_insert(path);
            }
            Candidate::Missing => {}
        }
    }
    match not_executable {
        Some(path) => Err(ExecError::NotExecutable {
            path: path.display().to_string(),
        }),
        None => Err(ExecError::ProgramNotFound {
            program: argv0.to_owned(),
            reason: if path_var.is_some_and(|p| !p.is_empty()) {
                "it is in no directory of PATH".to_owned()
            } else {
                "PATH is empty".to_owned()
            },
        }),
    }
}

enum Candidate {
    Executable(PathBuf),
    NotExecutable(PathBuf),
    Missing,
}

/// What `path` is, once every link is followed.
fn candidate_kind(path: &Path) -> Candidate {
    // Most PATH entries miss: one stat says so, where canonicalizing takes one per component.
    if std::fs::metadata(path).is_err() {
        return Candidate::Missing;
    }
    let Ok(canonical) = std::fs::canonicalize(path) else {
        return Candidate::Missing;
    };
    match std::fs::metadata(&canonical) {
        Ok(meta) if meta.is_file() && meta.permissions().mode() & 0o111 != 0 => {
            Candidate::Executable(canonical)
        }
        // A plain file, a directory, a device: keep looking in PATH, as `execvp` does, and name
        // it if nothing better turns up.
        Ok(_) => Candidate::NotExecutable(canonical),
        Err(_) => Candidate::Missing,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn executable(path: &Path) {
        fs::write(path, "#!/bin/sh\n").unwrap();
        fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn bare_names_are_searched_in_absolute_path_entries() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        let (a, b) = (root.join("a"), root.join("b"));
        fs::create_dir_all(&a).unwrap();
        fs::create_dir_all(&b).unwrap();
        executable(&b.join("tool"));
        // Not executable in the first directory: skipped, as execvp does.
        fs::write(a.join("tool"), "data").unwrap();
        let path = format!("{}:{}", a.display(), b.display());
        assert_eq!(
            resolve_program("tool", Some(&path), &root).unwrap(),
            b.join("tool")
        );
        // A relative PATH entry is never searched, even when cwd holds the program.
        assert!(matches!(
            resolve_program("tool", Some(".:b"), &root),
            Err(ExecError::ProgramNotFound { .. })
        ));
        assert!(matches!(
            resolve_program("tool", Some(&a.display().to_string()), &root),
            Err(ExecError::NotExecutable { .. })
        ));
        let error = resolve_program("nope", Some(&path), &root).unwrap_err();
        assert_eq!(error.code(), "program_not_found");
        assert_eq!(
            error.to_string(),
            "program `nope` was not found: it is in no directory of PATH"
        );
        assert_eq!(
            resolve_program("nope", None, &root)
                .unwrap_err()
                .to_string(),
            "program `nope` was not found: PATH is empty"
        );
    }

    #[test]
    fn names_with_a_slash_are_relative_to_cwd_and_canonical() {
        let dir = tempfile::tempdir().unwrap();
        let root = fs::canonicalize(dir.path()).unwrap();
        fs::create_dir_all(root.join("bin")).unwrap();
        executable(&root.join("bin/real"));
        std::os::unix::fs::symlink("real", root.join("bin/alias")).unwrap();
        fs::write(root.join("plain.txt"), "x").unwrap();
        assert_eq!(
            resolve_program("./bin/alias", None, &root).unwrap(),
            root.join("bin/real")
        );
        assert_eq!(
            resolve_program("bin/../bin/real", None, &root).unwrap(),
            root.join("bin/real")
        );
        let absolute = root.join("bin/alias").display().to_string();
        assert_eq!(
            resolve_program(&absolute, Some("/usr/bin"), Path::new("/")).unwrap(),
            root.join("bin/real")
        );
        let error = resolve_program("./plain.txt", None, &root).unwrap_err();
        assert_eq!(error.code(), "not_executable");
        let error = resolve_program("./bin", None, &root).unwrap_err();
        assert_eq!(error.code(), "not_executable");
        let error = resolve_program("./missing", None, &root).unwrap_err();
        assert_eq!(error.code(), "program_not_found");
        assert_eq!(
            resolve_program("", None, &root).unwrap_err().code(),
            "program_not_found"
        );
        assert_eq!(
            resolve_program("a\0b", Some("/usr/bin"), &root)
                .unwrap_err()
                .code(),
            "program_not_found"
        );
    }
}
