//! The environment a command gets: an allowlist of harmless variables, minus a denylist that
//! always wins.
//!
//! A command inherits nothing by default. What passes is what tools need to find themselves
//! and behave (PATH, HOME, locale, toolchain homes); what never passes is anything that looks
//! like a credential, or that makes an interpreter or the dynamic loader run code the command
//! did not name (`LD_PRELOAD`, `NODE_OPTIONS`, `BASH_ENV`, `GIT_CONFIG_*`, …). Names are
//! compared case-insensitively, since a denylist that `Aws_Secret_Key` slips past is no list.

use std::ffi::OsString;

/// Variables passed through by exact name (upper case).
const ALLOWED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "NO_COLOR",
    "TZ",
    "TMPDIR",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
    "GOPATH",
    "GOROOT",
    "JAVA_HOME",
    "PYENV_ROOT",
    "VIRTUAL_ENV",
    "NVM_DIR",
    "XDG_CACHE_HOME",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_RUNTIME_DIR",
];

/// Prefixes passed through (upper case): the locale categories.
const ALLOWED_PREFIXES: &[&str] = &["LC_"];

/// Names refused whatever the allowlist says (upper case).
const DENIED: &[&str] = &[
    // Files a shell or interpreter runs before the command's own code.
    "ENV",
    "BASH_ENV",
    "ZDOTDIR",
    "PROMPT_COMMAND",
    "PS4",
    "SHELLOPTS",
    "BASHOPTS",
    "IFS",
    "CDPATH",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "PYTHONINSPECT",
    "PERL5OPT",
    "PERL5LIB",
    "PERLLIB",
    "RUBYOPT",
    "RUBYLIB",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "JDK_JAVA_OPTIONS",
    "RUSTC_WRAPPER",
    "RUSTC_WORKSPACE_WRAPPER",
    "SSH_AUTH_SOCK",
];

/// Prefixes refused (upper case): the dynamic loaders, and every `GIT_` variable, since many
/// of them inject configuration or commands (`GIT_CONFIG_*`, `GIT_SSH_COMMAND`, `GIT_ASKPASS`,
/// `GIT_EXTERNAL_DIFF`, `GIT_EXEC_PATH`).
const DENIED_PREFIXES: &[&str] = &["LD_", "DYLD_", "GIT_", "NPM_CONFIG_"];

/// Suffixes refused (upper case): credentials by naming convention.
const DENIED_SUFFIXES: &[&str] = &["_TOKEN", "_KEY", "_PAT", "_AUTH"];

/// Fragments refused anywhere in a name (upper case).
const DENIED_FRAGMENTS: &[&str] = &["SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "PRIVATE"];

/// Whether the allowlist allows `name`.
pub fn is_allowed(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    ALLOWED.contains(&upper.as_str())
        || ALLOWED_PREFIXES
            .iter()
            .any(|p| upper.starts_with(p) && upper.len() > p.len())
}

/// Whether the denylist refuses `name`. The denylist wins over the allowlist.
pub fn is_denied(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    DENIED.contains(&upper.as_str())
        || DENIED_PREFIXES.iter().any(|p| upper.starts_with(p))
        || DENIED_SUFFIXES.iter().any(|s| upper.ends_with(s))
        || DENIED_FRAGMENTS.iter().any(|f| upper.contains(f))
}

/// The variables of `ambient` a command may see: allowed, not denied, sorted by name, the first
/// of any duplicate kept. `PATH` keeps only its absolute entries, since an empty or relative
/// entry makes every lookup depend on the command's working directory.
pub fn scrub_env(ambient: impl Iterator<Item = (String, String)>) -> Vec<(String, String)> {
    let mut kept: Vec<(String, String)> = Vec::new();
    for (name, value) in ambient {
        if !is_allowed(&name) || is_denied(&name) || kept.iter().any(|(k, _)| *k == name) {
            continue;
        }
        let value = if name == "PATH" {
            absolute_path_entries(&value)
        } else {
            value
        };
        kept.push((name, value));
    }
    kept.sort();
    kept
}

/// The variables of `vars` (an environment as `std::env::vars_os` gives it) whose name and
/// value are UTF-8; `std::env::vars` would panic on the others. This crate reads no
/// environment: its caller gives it one.
pub fn utf8_env(
    vars: impl IntoIterator<Item = (OsString, OsString)>,
) -> impl Iterator<Item = (String, String)> {
    vars.into_iter()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
}

/// The absolute entries of a `PATH` value, in order.
fn absolute_path_entries(path: &str) -> String {
    path.split(':')
        .filter(|entry| entry.starts_with('/'))
        .collect::<Vec<_>>()
        .join(":")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_denylist_wins_over_the_allowlist() {
        // (name, passes)
        let table = [
            ("PATH", true),
            ("HOME", true),
            ("home", true),
            ("USER", true),
            ("LOGNAME", true),
            ("LANG", true),
            ("LC_ALL", true),
            ("LC_CTYPE", true),
            ("LC_", false),
            ("TERM", true),
            ("TZ", true),
            ("TMPDIR", true),
            ("SHELL", true),
            ("CARGO_HOME", true),
            ("RUSTUP_HOME", true),
            ("XDG_CACHE_HOME", true),
            // Not on the allowlist.
            ("EDITOR", false),
            ("PWD", false),
            ("CARGO_TARGET_DIR", false),
            ("RANDOM_THING", false),
            // Credentials, in any case.
            ("FAKE_API_TOKEN", false),
            ("GITHUB_TOKEN", false),
            ("AWS_SECRET_ACCESS_KEY", false),
            ("AWS_ACCESS_KEY_ID", false),
            ("aws_secret_access_key", false),
            ("OPENAI_API_KEY", false),
            ("DB_PASSWORD", false),
            ("GOOGLE_APPLICATION_CREDENTIALS", false),
            ("SSH_AUTH_SOCK", false),
            // Code injection.
            ("LD_PRELOAD", false),
            ("LD_LIBRARY_PATH", false),
            ("ld_preload", false),
            ("DYLD_INSERT_LIBRARIES", false),
            ("NODE_OPTIONS", false),
            ("PYTHONPATH", false),
            ("PYTHONSTARTUP", false),
            ("BASH_ENV", false),
            ("ENV", false),
            ("GIT_CONFIG_COUNT", false),
            ("GIT_SSH_COMMAND", false),
            ("GIT_DIR", false),
            ("RUSTC_WRAPPER", false),
        ];
        for (name, passes) in table {
            let kept = scrub_env([(name.to_owned(), "v".to_owned())].into_iter());
            assert_eq!(!kept.is_empty(), passes, "{name}");
        }
        // A name on the allowlist's prefix that looks like a secret is still refused.
        assert!(is_allowed("LC_SECRET_KEY"));
        assert!(is_denied("LC_SECRET_KEY"));
        assert!(scrub_env([("LC_SECRET_KEY".into(), "x".into())].into_iter()).is_empty());
    }

    #[test]
    fn path_keeps_only_absolute_entries_and_the_result_is_sorted() {
        let kept = scrub_env(
            [
                ("TERM".to_owned(), "xterm".to_owned()),
                (
                    "PATH".to_owned(),
                    ":.:bin:/usr/bin::/bin:./node_modules/.bin".to_owned(),
                ),
                ("PATH".to_owned(), "/evil".to_owned()),
            ]
            .into_iter(),
        );
        assert_eq!(
            kept,
            [
                ("PATH".to_owned(), "/usr/bin:/bin".to_owned()),
                ("TERM".to_owned(), "xterm".to_owned()),
            ]
        );
    }

    #[test]
    fn the_ambient_environment_is_readable() {
        // Whatever this process has, reading it must not panic and must be UTF-8.
        let scrubbed = scrub_env(utf8_env(std::env::vars_os()));
        assert!(
            scrubbed
                .iter()
                .all(|(name, _)| is_allowed(name) && !is_denied(name))
        );
    }
}
