//! The credential stores of the common developer tools, kept as data
//! (`credential_stores.txt`, compiled in): one line a store, saying where it lies relative to
//! the home directory or an XDG base directory, and which program keeps what there. Each
//! entry is resolved under every place its base may be: a `config` entry under `~/.config`
//! and under `$XDG_CONFIG_HOME` where that is elsewhere, and so on; a `$NAME` entry wherever
//! the store's own environment variable moves it (`GNUPGHOME`, `DOCKER_CONFIG`, …). This crate
//! reads no environment: the caller says where the directories are, and gives the values of
//! the variables [`UserDirs::variables`] names ([`UserDirs`]).
//!
//! ```
//! use std::path::Path;
//! use toolgate_sandbox::{DenyList, UserDirs};
//!
//! let mut dirs = UserDirs::new("/home/ada");
//! dirs.config_home = Some("/srv/ada/config".into());
//! let stores = DenyList::credential_stores(&dirs);
//! assert!(stores.iter().any(|p| p == Path::new("/home/ada/.config/gh")));
//! assert!(stores.iter().any(|p| p == Path::new("/srv/ada/config/gh")));
//!
//! assert!(UserDirs::variables().contains(&"GNUPGHOME"));
//! dirs.moved.push(("GNUPGHOME".into(), "/srv/ada/keys".into()));
//! let stores = DenyList::credential_stores(&dirs);
//! assert!(stores.iter().any(|p| p == Path::new("/srv/ada/keys")));
//! ```

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt as _;
use std::path::{Component, Path, PathBuf};

/// The data, one store a line (the file's header says how it reads).
const STORES: &str = include_str!("credential_stores.txt");

/// Where the user's files are, as the caller found them: the home directory, and the XDG
/// base directories where they are set (to an absolute path; an unset or relative one is
/// `None`, and the XDG default under the home directory applies).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserDirs {
    /// `$HOME`.
    pub home: PathBuf,
    /// `$XDG_CONFIG_HOME`.
    pub config_home: Option<PathBuf>,
    /// `$XDG_DATA_HOME`.
    pub data_home: Option<PathBuf>,
    /// `$XDG_CACHE_HOME`.
    pub cache_home: Option<PathBuf>,
    /// `$XDG_RUNTIME_DIR`.
    pub runtime_dir: Option<PathBuf>,
    /// The variables of [`UserDirs::variables`] that are set, each with its value as set:
    /// where a store's own variable moves it. A value may list paths separated by `:` (as
    /// `KUBECONFIG` does); a relative path among them is ignored.
    pub moved: Vec<(String, OsString)>,
}

impl UserDirs {
    /// The home directory alone: the XDG directories at their defaults beneath it.
    pub fn new(home: impl Into<PathBuf>) -> Self {
        UserDirs {
            home: home.into(),
            config_home: None,
            data_home: None,
            cache_home: None,
            runtime_dir: None,
            moved: Vec::new(),
        }
    }

    /// The environment variables that move a store of the data (`$GNUPGHOME`, …), whose
    /// values the caller gives in [`UserDirs::moved`].
    pub fn variables() -> Vec<&'static str> {
        let mut names: Vec<&str> = STORES
            .lines()
            .filter_map(|line| parse(line.trim()))
            .filter_map(|store| match store.base {
                Base::Variable(name) => Some(name),
                _ => None,
            })
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }

    /// Where the variable `name` puts its store: each absolute path its value lists.
    fn moved_to(&self, name: &str) -> Vec<PathBuf> {
        self.moved
            .iter()
            .filter(|(set, _)| set == name)
            .flat_map(|(_, value)| value.as_bytes().split(|b| *b == b':'))
            .map(|part| PathBuf::from(std::ffi::OsStr::from_bytes(part)))
            .filter(|path| path.is_absolute())
            .collect()
    }

    /// Every directory `base` may be: its default under the home directory, and the XDG
    /// variable's value where that is set elsewhere; for a store's own variable, where it
    /// moves the store.
    fn places(&self, base: Base<'_>) -> Vec<PathBuf> {
        let (default, set) = match base {
            Base::Variable(name) => return self.moved_to(name),
            Base::Home => (Some(self.home.clone()), None),
            Base::Config => (Some(self.home.join(".config")), self.config_home.as_ref()),
            Base::Data => (
                Some(self.home.join(".local/share")),
                self.data_home.as_ref(),
            ),
            Base::Cache => (Some(self.home.join(".cache")), self.cache_home.as_ref()),
            Base::Runtime => (None, self.runtime_dir.as_ref()),
            Base::System => (Some(PathBuf::from("/")), None),
        };
        let mut out: Vec<PathBuf> = default.into_iter().collect();
        if let Some(set) = set.filter(|p| p.is_absolute() && !out.contains(p)) {
            out.push(set.clone());
        }
        out
    }

    /// Every directory a base may be, for a data line that does not parse.
    fn all_places(&self) -> Vec<PathBuf> {
        [
            Base::Home,
            Base::Config,
            Base::Data,
            Base::Cache,
            Base::Runtime,
        ]
        .into_iter()
        .flat_map(|base| self.places(base))
        .chain(self.moved.iter().flat_map(|(name, _)| self.moved_to(name)))
        .collect()
    }
}

/// What a store's path is relative to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Base<'a> {
    Home,
    Config,
    Data,
    Cache,
    Runtime,
    System,
    /// Where the environment variable of this name puts the store (`$GNUPGHOME`).
    Variable(&'a str),
}

/// One line of the data.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Store<'a> {
    base: Base<'a>,
    path: &'a str,
    who: &'a str,
}

/// The stores of `text` resolved for `dirs`, the `system` ones only if `system`. A line that
/// is not `base | path | who` (an unknown base, an absolute or climbing path, a missing
/// column) is no store: it denies every place a base may be, whole.
pub(crate) fn resolve(text: &str, dirs: &UserDirs, system: bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match parse(line) {
            Some(store) if store.base == Base::System && !system => {}
            // `.` is the place itself: the file or directory the variable names.
            Some(store) if store.path == "." => out.extend(dirs.places(store.base)),
            Some(store) => {
                for place in dirs.places(store.base) {
                    out.push(place.join(store.path.trim_start_matches('/')));
                }
            }
            None => out.extend(dirs.all_places()),
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    out.retain(|p| seen.insert(p.clone()));
    out
}

/// The compiled-in stores resolved for `dirs`. The system's own stores are only readable
/// by root, so they are denied only to a process running as root: elsewhere the kernel
/// denies them already, and the rules that enumerate `/etc` around them would cost every
/// call some milliseconds for nothing.
pub(crate) fn defaults(dirs: &UserDirs) -> Vec<PathBuf> {
    resolve(STORES, dirs, rustix::process::geteuid().is_root())
}

fn parse(line: &str) -> Option<Store<'_>> {
    let mut columns = line.split('|').map(str::trim);
    let (base, path, who) = (columns.next()?, columns.next()?, columns.next()?);
    if columns.next().is_some() || path.is_empty() || who.is_empty() {
        return None;
    }
    let base = match base {
        "home" => Base::Home,
        "config" => Base::Config,
        "data" => Base::Data,
        "cache" => Base::Cache,
        "runtime" => Base::Runtime,
        "system" => Base::System,
        variable => {
            let name = variable.strip_prefix('$')?;
            let plain =
                !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            if !plain {
                return None;
            }
            Base::Variable(name)
        }
    };
    // A variable's own place is a store of its own (`$GNUPGHOME | .`).
    if path == "." {
        return matches!(base, Base::Variable(_)).then_some(Store { base, path, who });
    }
    let components: Vec<Component<'_>> = Path::new(path).components().collect();
    let climbs = components
        .iter()
        .any(|c| matches!(c, Component::ParentDir | Component::CurDir));
    let absolute = Path::new(path).is_absolute();
    // A system path is absolute and names something below `/`; every other is relative.
    if climbs || absolute != (base == Base::System) || (absolute && components.len() < 2) {
        return None;
    }
    Some(Store { base, path, who })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_line_of_the_data_is_a_store_and_none_is_listed_twice() {
        let mut seen = std::collections::BTreeSet::new();
        let mut count = 0;
        for line in STORES.lines().map(str::trim) {
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let store = parse(line).unwrap_or_else(|| panic!("not a store: {line}"));
            assert!(
                store.who.contains(':') || store.base == Base::System,
                "say which program keeps what: {line}"
            );
            assert!(seen.insert((store.base, store.path)), "twice: {line}");
            count += 1;
        }
        assert!(count > 100, "{count}");
    }

    #[test]
    fn a_config_entry_is_denied_under_dot_config_and_xdg_config_home_alike() {
        let mut dirs = UserDirs::new("/home/ada");
        dirs.config_home = Some("/x/config".into());
        dirs.data_home = Some("/x/data".into());
        dirs.cache_home = Some("relative/is/ignored".into());
        dirs.runtime_dir = Some("/run/x".into());
        let got = resolve(STORES, &dirs, true);
        for want in [
            "/home/ada/.config/gh",
            "/x/config/gh",
            "/home/ada/.git-credentials",
            "/home/ada/.config/git/credentials",
            "/x/config/git/credentials",
            "/home/ada/.claude/.credentials.json",
            "/home/ada/.claude.json*",
            "/home/ada/.codex/auth.json",
            "/home/ada/.local/share/keyrings",
            "/x/data/keyrings",
            "/home/ada/.cache/git/credential",
            "/run/x/containers/auth.json",
            "/etc/shadow*",
        ] {
            assert!(got.iter().any(|p| p == Path::new(want)), "{want}");
        }
        assert!(!got.iter().any(|p| p.starts_with("relative")));
        // No runtime directory given: no runtime entry.
        let plain = resolve(STORES, &UserDirs::new("/home/ada"), false);
        assert!(!plain.iter().any(|p| p.starts_with("/etc")));
        assert!(
            !plain
                .iter()
                .any(|p| p.ends_with("containers/auth.json") && !p.starts_with("/home/ada"))
        );
    }

    #[test]
    fn a_store_its_own_variable_moves_is_denied_where_it_moved() {
        let mut dirs = UserDirs::new("/home/ada");
        for (name, value) in [
            ("GNUPGHOME", "/x/gnupg"),
            ("DOCKER_CONFIG", "/x/docker"),
            ("KUBECONFIG", "/x/kube/a:relative/b:/x/kube/c"),
            ("CARGO_HOME", "/x/cargo"),
            ("SSH_AUTH_SOCK", "/x/agent.sock"),
            ("AWS_SHARED_CREDENTIALS_FILE", "/x/aws-credentials"),
            ("UNRELATED", "/x/unrelated"),
        ] {
            dirs.moved.push((name.to_owned(), value.into()));
        }
        let got = resolve(STORES, &dirs, false);
        for want in [
            "/x/gnupg",
            "/x/docker/config.json",
            "/x/kube/a",
            "/x/kube/c",
            "/x/cargo/credentials*",
            "/x/agent.sock",
            "/x/aws-credentials",
            // The defaults stay denied too.
            "/home/ada/.gnupg",
            "/home/ada/.docker/config.json",
        ] {
            assert!(got.iter().any(|p| p == Path::new(want)), "{want}: {got:?}");
        }
        assert!(!got.iter().any(|p| p.starts_with("relative")));
        assert!(!got.iter().any(|p| p == Path::new("/x/docker")));
        assert!(!got.iter().any(|p| p == Path::new("/x/unrelated")));
        for name in [
            "GNUPGHOME",
            "DOCKER_CONFIG",
            "KUBECONFIG",
            "AWS_SHARED_CREDENTIALS_FILE",
            "AWS_CONFIG_FILE",
            "AZURE_CONFIG_DIR",
            "CLOUDSDK_CONFIG",
            "NPM_CONFIG_USERCONFIG",
            "CARGO_HOME",
            "GH_CONFIG_DIR",
            "PASSWORD_STORE_DIR",
            "SSH_AUTH_SOCK",
        ] {
            assert!(UserDirs::variables().contains(&name), "{name}");
        }
        // A variable's place is the store only where the data says `.`; nothing else.
        assert_eq!(
            parse("$GNUPGHOME | . | GnuPG: keys").map(|s| s.path),
            Some(".")
        );
        assert_eq!(parse("home | . | the home directory: whole"), None);
        assert_eq!(parse("$ | . | no name"), None);
        assert_eq!(parse("$A-B | . | not a name"), None);
    }

    #[test]
    fn a_line_that_does_not_parse_denies_every_base_whole() {
        let mut dirs = UserDirs::new("/h");
        dirs.config_home = Some("/c".into());
        for bad in [
            "home | .ssh",
            "homes | .ssh | ssh: keys",
            "home | /etc/passwd | absolute under home",
            "home | ../other | climbs",
            "system | relative | not absolute",
            "config | a | b | c",
        ] {
            let got = resolve(bad, &dirs, true);
            for whole in ["/h", "/h/.config", "/c", "/h/.local/share", "/h/.cache"] {
                assert!(got.iter().any(|p| p == Path::new(whole)), "{bad}: {whole}");
            }
        }
        assert_eq!(
            resolve("home | .ssh | ssh: keys", &dirs, true),
            vec![PathBuf::from("/h/.ssh")]
        );
    }
}
