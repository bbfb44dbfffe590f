//! Files that commonly hold secrets or steer toolgate itself, named by kind.
//!
//! Stage 4 tags each call with the kinds of sensitive file its paths touch; Cedar policies see
//! them as `context.sensitive`, a set of strings. The default policy forbids each kind with a
//! rule of its own (`sensitive-dotenv`, …), so a rejection names the rule, and an operator who
//! needs, say, `.env.example` replaces that one rule in a policy file (a policy with the same
//! `@id` replaces the default one).
//!
//! Matching is on workspace-relative paths, component by component and ignoring ASCII case,
//! since `.ENV` is `.env` on a case-insensitive file system. Paths reach here already decoded
//! and checked by the workspace (no `..`, no percent-encoding), and stage 4 lists a link's
//! target beside the link, so `notes -> .env` is caught by its target.

/// One kind of sensitive file: how policies name it, the rule that forbids it, and which
/// paths it covers.
#[derive(Debug, Clone, Copy)]
pub struct SensitiveKind {
    /// The value in `context.sensitive`.
    pub kind: &'static str,
    /// The `@id` of the default rule that forbids it (its `@reason` says why).
    pub rule: &'static str,
    covers: fn(&PathParts<'_>) -> bool,
}

/// A lowercased workspace-relative path, split once for every kind to look at.
struct PathParts<'a> {
    whole: &'a str,
    /// The last component.
    name: &'a str,
    /// Every component, the last included.
    components: Vec<&'a str>,
}

impl PathParts<'_> {
    fn has_component(&self, wanted: &str) -> bool {
        self.components.contains(&wanted)
    }
}

/// Every kind, in the order they are checked.
pub const KINDS: [SensitiveKind; 8] = [
    SensitiveKind {
        kind: "dotenv",
        rule: "sensitive-dotenv",
        covers: |p| p.name.starts_with(".env"),
    },
    SensitiveKind {
        kind: "pem",
        rule: "sensitive-pem",
        covers: |p| p.name.ends_with(".pem"),
    },
    SensitiveKind {
        kind: "key",
        rule: "sensitive-key",
        covers: |p| p.name.ends_with(".key"),
    },
    SensitiveKind {
        kind: "ssh_key",
        rule: "sensitive-ssh-key",
        covers: |p| {
            ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"]
                .iter()
                .any(|prefix| p.name.starts_with(prefix))
        },
    },
    SensitiveKind {
        kind: "git_internals",
        rule: "sensitive-git-internals",
        covers: |p| p.has_component(".git"),
    },
    SensitiveKind {
        kind: "ssh_dir",
        rule: "sensitive-ssh-dir",
        covers: |p| p.has_component(".ssh"),
    },
    SensitiveKind {
        kind: "aws_dir",
        rule: "sensitive-aws-dir",
        covers: |p| p.has_component(".aws"),
    },
    // The configuration and policy files in use are added per workspace by `Sensitivity`.
    SensitiveKind {
        kind: TOOLGATE_CONFIG,
        rule: "sensitive-toolgate-config",
        covers: |p| p.name == "toolgate.toml" || p.has_component(".toolgate"),
    },
];

const TOOLGATE_CONFIG: &str = "toolgate_config";

/// Sensitive-path matching for one workspace: the fixed kinds plus the workspace-relative
/// paths of toolgate's own configuration and policy files, and of its state directory, when
/// they live in the workspace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Sensitivity {
    /// Lowercased workspace-relative paths that are toolgate's configuration.
    config_paths: Vec<String>,
    /// Lowercased components of workspace-relative directories that are toolgate's own,
    /// with everything in them.
    config_dirs: Vec<Vec<String>>,
}

impl Sensitivity {
    /// Also treats `paths` (workspace-relative, `/`-separated) as toolgate configuration.
    pub fn with_config_paths(paths: impl IntoIterator<Item = String>) -> Self {
        Sensitivity {
            config_paths: paths.into_iter().map(|p| p.to_ascii_lowercase()).collect(),
            config_dirs: Vec::new(),
        }
    }

    /// Also treats the directory `dir` (workspace-relative, `/`-separated) and everything in
    /// it as toolgate configuration, whatever is created there later. Given the workspace
    /// root (`""` or `.`), that is the whole workspace.
    #[must_use]
    pub fn with_config_dir(mut self, dir: &str) -> Self {
        let lower = dir.to_ascii_lowercase();
        let components = parts(&lower).components;
        self.config_dirs
            .push(components.into_iter().map(str::to_owned).collect());
        self
    }

    /// The kinds `paths` touch, each once, in [`KINDS`] order.
    pub fn kinds(&self, paths: &[String]) -> Vec<&'static str> {
        let mut found = [false; KINDS.len()];
        for path in paths {
            let lower = path.to_ascii_lowercase();
            let parts = parts(&lower);
            for (slot, kind) in found.iter_mut().zip(&KINDS) {
                *slot = *slot || self.covers(kind, &parts);
            }
        }
        KINDS
            .iter()
            .zip(found)
            .filter(|(_, hit)| *hit)
            .map(|(kind, _)| kind.kind)
            .collect()
    }

    /// The first kind `path` matches, if any.
    pub fn kind_of(&self, path: &str) -> Option<&'static SensitiveKind> {
        let lower = path.to_ascii_lowercase();
        let parts = parts(&lower);
        KINDS.iter().find(|kind| self.covers(kind, &parts))
    }

    fn covers(&self, kind: &SensitiveKind, parts: &PathParts<'_>) -> bool {
        (kind.covers)(parts)
            || (kind.kind == TOOLGATE_CONFIG
                && (self.config_paths.iter().any(|p| p == parts.whole)
                    || self.config_dirs.iter().any(|dir| {
                        parts.components.len() >= dir.len()
                            && dir.iter().zip(&parts.components).all(|(d, c)| d == c)
                    })))
    }
}

fn parts(lower: &str) -> PathParts<'_> {
    let components: Vec<&str> = lower
        .split('/')
        .filter(|c| !c.is_empty() && *c != ".")
        .collect();
    PathParts {
        whole: lower,
        name: components.last().copied().unwrap_or_default(),
        components,
    }
}

/// The rule that makes `path` sensitive by default, for tools that filter what they show
/// (`search_text`, `git_diff`) rather than refuse.
pub fn rule_for(path: &str) -> Option<&'static str> {
    Sensitivity::default().kind_of(path).map(|kind| kind.rule)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::DEFAULT_POLICY;

    #[test]
    fn each_kind_by_its_spellings() {
        let table: &[(&str, Option<&str>)] = &[
            (".env", Some("dotenv")),
            (".env.local", Some("dotenv")),
            ("app/.ENV.production", Some("dotenv")),
            (".envrc", Some("dotenv")),
            ("env.example", None),
            ("docs/environment.md", None),
            ("certs/server.pem", Some("pem")),
            ("certs/SERVER.PEM", Some("pem")),
            ("tls/server.key", Some("key")),
            ("keyboard.rs", None),
            ("id_rsa", Some("ssh_key")),
            ("backup/id_rsa.pub", Some("ssh_key")),
            ("id_ed25519", Some("ssh_key")),
            (".git", Some("git_internals")),
            (".git/config", Some("git_internals")),
            ("sub/.git/hooks/pre-commit", Some("git_internals")),
            (".gitignore", None),
            (".github/workflows/ci.yml", None),
            (".ssh/config", Some("ssh_dir")),
            ("home/.aws/credentials", Some("aws_dir")),
            ("toolgate.toml", Some("toolgate_config")),
            ("deploy/TOOLGATE.toml", Some("toolgate_config")),
            (".toolgate/policy.cedar", Some("toolgate_config")),
            ("src/main.rs", None),
            ("", None),
        ];
        let sensitivity = Sensitivity::default();
        for (path, kind) in table {
            assert_eq!(sensitivity.kind_of(path).map(|k| k.kind), *kind, "{path:?}");
        }
    }

    #[test]
    fn configured_paths_are_toolgate_config() {
        let sensitivity = Sensitivity::with_config_paths(["ops/gate.cedar".to_owned()]);
        assert_eq!(
            sensitivity.kinds(&["ops/Gate.cedar".to_owned()]),
            ["toolgate_config"]
        );
        assert!(
            sensitivity
                .kinds(&["ops/other.cedar".to_owned()])
                .is_empty()
        );
    }

    #[test]
    fn a_configured_directory_covers_everything_in_it() {
        let sensitivity = Sensitivity::default().with_config_dir(".local/state/toolgate");
        let table = [
            (".local/state/toolgate", true),
            (".local/state/toolgate/audit.db-wal", true),
            ("./.local/State/TOOLGATE/new/file.txt", true),
            (".local/state/toolgate-other/a.txt", false),
            (".local/state/a.txt", false),
            ("toolgate/a.txt", false),
        ];
        for (path, covered) in table {
            assert_eq!(
                sensitivity.kind_of(path).map(|k| k.kind),
                covered.then_some("toolgate_config"),
                "{path:?}"
            );
        }
        // A workspace that is toolgate's state directory is toolgate's through and through.
        let whole = Sensitivity::default().with_config_dir(".");
        assert_eq!(
            whole.kind_of("src/main.rs").map(|k| k.kind),
            Some("toolgate_config")
        );
    }

    #[test]
    fn kinds_of_several_paths_are_listed_once_in_order() {
        let paths = [
            ".ssh/id_rsa".to_owned(),
            "a/.env".to_owned(),
            "b/.env".to_owned(),
        ];
        assert_eq!(
            Sensitivity::default().kinds(&paths),
            ["dotenv", "ssh_key", "ssh_dir"]
        );
    }

    #[test]
    fn every_kind_has_its_default_rule() {
        for kind in KINDS {
            assert!(
                DEFAULT_POLICY.contains(&format!("@id(\"{}\")", kind.rule)),
                "{}",
                kind.rule
            );
            assert!(
                DEFAULT_POLICY.contains(&format!("context.sensitive.contains(\"{}\")", kind.kind)),
                "{}",
                kind.kind
            );
        }
        assert_eq!(rule_for("x/.env"), Some("sensitive-dotenv"));
        assert_eq!(rule_for("src/lib.rs"), None);
    }
}
