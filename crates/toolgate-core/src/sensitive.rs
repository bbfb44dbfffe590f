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
//!
//! The tools that enumerate the workspace rather than name a path (`list_dir`, `search_text`,
//! `git_status`, `git_diff`) cannot be refused path by path, so they ask
//! [`Sensitivity::visibility`] instead, with the pipeline's own `Sensitivity` (stage 7 hands it
//! to them in the `ExecContext`): a sensitive *directory* (`.ssh/`, toolgate's state
//! directory) is [`Visibility::Hidden`], pruned from every walk so that neither its name nor
//! anything in it, nor how many things, ever shows; a sensitive *file* (`.env`) is
//! [`Visibility::NameOnly`], listed but never read.

use crate::pipeline::Resource;

/// One kind of sensitive file: how policies name it, the rule that forbids it, and which
/// paths it covers.
#[derive(Debug, Clone, Copy)]
pub struct SensitiveKind {
    /// The value in `context.sensitive`.
    pub kind: &'static str,
    /// The `@id` of the default rule that forbids it (its `@reason` says why).
    pub rule: &'static str,
    /// Whether it covers a path as a file: by its last component (`.env`, `*.pem`), or by its
    /// last few (`.docker/config.json`).
    names: fn(&PathParts<'_>) -> bool,
    /// Directories it covers with everything in them, wherever they are: one component
    /// (`.ssh`) or a run of them (`.config/gcloud`).
    dirs: &'static [&'static str],
}

/// Kinds are told apart by how policies name them.
impl PartialEq for SensitiveKind {
    fn eq(&self, other: &Self) -> bool {
        self.kind == other.kind
    }
}

impl Eq for SensitiveKind {}

/// How a kind covers a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cover {
    /// By its name: the path is a sensitive file.
    Name,
    /// By a directory it is in, or is: the directory and all it holds are sensitive.
    Dir,
}

/// What a tool that enumerates the workspace may show of one path, from least to most
/// withheld.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visibility {
    /// Nothing sensitive: listed and read.
    Visible,
    /// A sensitive file: listed by name (its existence is no secret), never read, so neither
    /// its contents nor anything derived from them (matches, line counts) is shown.
    NameOnly(&'static SensitiveKind),
    /// A sensitive directory or anything in one: never listed, read or counted. Walks prune it.
    Hidden,
}

impl Visibility {
    /// The more withheld of the two: a link is as sensitive as what it leads to.
    #[must_use]
    pub fn or(self, other: Visibility) -> Visibility {
        match (self, other) {
            (Visibility::Hidden, _) | (_, Visibility::Hidden) => Visibility::Hidden,
            (Visibility::NameOnly(kind), _) | (_, Visibility::NameOnly(kind)) => {
                Visibility::NameOnly(kind)
            }
            (Visibility::Visible, Visibility::Visible) => Visibility::Visible,
        }
    }
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
    /// Whether `dir` — one component (`.ssh`), or several joined by `/` (`.config/gcloud`) —
    /// is among the path's components, in a run.
    fn has_dir(&self, dir: &str) -> bool {
        if !dir.contains('/') {
            return self.components.contains(&dir);
        }
        self.components
            .windows(dir.split('/').count())
            .any(|run| run.iter().copied().eq(dir.split('/')))
    }

    /// Whether the path's last components are `tail`.
    fn ends_with(&self, tail: &[&str]) -> bool {
        self.components.ends_with(tail)
    }
}

/// Every kind, in the order they are checked.
pub const KINDS: [SensitiveKind; 10] = [
    SensitiveKind {
        kind: "dotenv",
        rule: "sensitive-dotenv",
        names: |path| path.name.starts_with(".env"),
        dirs: &[],
    },
    SensitiveKind {
        kind: "pem",
        rule: "sensitive-pem",
        names: |path| path.name.ends_with(".pem"),
        dirs: &[],
    },
    SensitiveKind {
        kind: "key",
        rule: "sensitive-key",
        // And keystores: PKCS #12 bundles and Java keystores hold private keys too.
        names: |path| {
            [".key", ".p12", ".pfx", ".jks", ".keystore"]
                .iter()
                .any(|suffix| path.name.ends_with(suffix))
        },
        dirs: &[],
    },
    SensitiveKind {
        kind: "ssh_key",
        rule: "sensitive-ssh-key",
        names: |path| {
            ["id_rsa", "id_dsa", "id_ecdsa", "id_ed25519"]
                .iter()
                .any(|prefix| path.name.starts_with(prefix))
        },
        dirs: &[],
    },
    SensitiveKind {
        kind: "git_internals",
        rule: "sensitive-git-internals",
        names: |_| false,
        dirs: &[".git"],
    },
    SensitiveKind {
        kind: "ssh_dir",
        rule: "sensitive-ssh-dir",
        names: |_| false,
        dirs: &[".ssh"],
    },
    SensitiveKind {
        kind: "aws_dir",
        rule: "sensitive-aws-dir",
        names: |_| false,
        dirs: &[".aws"],
    },
    // The credential stores commands are kept from in the home directory, wherever a
    // workspace holds them (a workspace at `$HOME` holds them all), and the files projects
    // keep that hold credentials in the clear: Terraform's state, a cluster's kubeconfig.
    SensitiveKind {
        kind: "credentials",
        rule: "sensitive-credentials",
        // By the start of the name, as `.env*` is, so that a copy (`.netrc.bak`, `.pgpass~`)
        // is one too.
        names: |path| {
            [
                ".netrc",
                "_netrc",
                ".pgpass",
                ".git-credentials",
                ".pypirc",
                ".my.cnf",
                ".mylogin.cnf",
                ".claude.json",
                ".vault-token",
                ".s3cfg",
                ".terraformrc",
            ]
            .iter()
            .any(|store| path.name.starts_with(store))
                || path.ends_with(&[".docker", "config.json"])
                || path.ends_with(&[".cargo", "credentials"])
                || path.ends_with(&[".cargo", "credentials.toml"])
                || path.ends_with(&[".config", "gh", "hosts.yml"])
                // The stores issue 36 found commands reading; the sandbox's whole list is
                // toolgate-sandbox's `credential_stores.txt`.
                || path.ends_with(&[".config", "git", "credentials"])
                || path.ends_with(&[".claude", ".credentials.json"])
                || path.ends_with(&[".codex", "auth.json"])
                || path.ends_with(&[".config", "containers", "auth.json"])
                || path.ends_with(&[".terraform.d", "credentials.tfrc.json"])
                || path.name == "application_default_credentials.json"
                || path.name.ends_with(".tfstate")
                || path.name.ends_with(".tfstate.backup")
                || path.name == "kubeconfig"
                || path.name.ends_with(".kubeconfig")
        },
        dirs: &[],
    },
    SensitiveKind {
        kind: "credentials_dir",
        rule: "sensitive-credentials-dir",
        names: |_| false,
        dirs: &[".gnupg", ".kube", ".azure", ".config/gcloud"],
    },
    // The configuration and policy files in use, and the state directory, are added per
    // workspace by `Sensitivity`.
    SensitiveKind {
        kind: TOOLGATE_CONFIG,
        rule: "sensitive-toolgate-config",
        names: |path| path.name == "toolgate.toml",
        dirs: &[".toolgate"],
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

    /// What a tool that enumerates the workspace may show of `path`: hidden when a sensitive
    /// directory holds it (or it is one), by name only when it is a sensitive file. A link's
    /// target is the caller's to look up and combine ([`Visibility::or`]).
    pub fn visibility(&self, path: &str) -> Visibility {
        let lower = path.to_ascii_lowercase();
        let parts = parts(&lower);
        let mut named = None;
        for kind in &KINDS {
            match self.cover(kind, &parts) {
                Some(Cover::Dir) => return Visibility::Hidden,
                Some(Cover::Name) => named = named.or(Some(kind)),
                None => {}
            }
        }
        named.map_or(Visibility::Visible, Visibility::NameOnly)
    }

    /// How evidence, which the caller is shown, spells `resource` (`path:…`): a path in
    /// toolgate's state directory as that directory and `…`. What toolgate keeps there (a
    /// token file named by its port, a grants file by its workspace) is no caller's business,
    /// whichever link led a call to it.
    pub fn evidence_resource(&self, resource: &Resource) -> String {
        let Resource::Path(path) = resource else {
            return resource.to_string();
        };
        if self.config_dirs.is_empty() {
            return resource.to_string();
        }
        let lower = path.to_ascii_lowercase();
        let parts = parts(&lower);
        let Some(dir) = self
            .config_dir_of(&parts)
            .filter(|dir| parts.components.len() > dir.len())
        else {
            return resource.to_string();
        };
        // The directory as the caller spelt it.
        let kept: Vec<&str> = path
            .split('/')
            .filter(|c| !c.is_empty() && *c != ".")
            .take(dir.len())
            .collect();
        if kept.is_empty() {
            "path:…".to_owned()
        } else {
            format!("path:{}/…", kept.join("/"))
        }
    }

    /// The directories hidden wherever they are (`.ssh`, `.config/gcloud`), lowercased: for a walker
    /// that prunes by patterns of its own (git's pathspecs) rather than asking path by path.
    pub fn hidden_dir_names(&self) -> impl Iterator<Item = &'static str> {
        KINDS.iter().flat_map(|kind| kind.dirs.iter().copied())
    }

    /// The directories hidden at one place (toolgate's state directory), workspace-relative
    /// and lowercased; `""` is the workspace itself.
    pub fn hidden_dir_paths(&self) -> impl Iterator<Item = String> + '_ {
        self.config_dirs.iter().map(|dir| dir.join("/"))
    }

    fn covers(&self, kind: &SensitiveKind, parts: &PathParts<'_>) -> bool {
        self.cover(kind, parts).is_some()
    }

    /// The configured directory `parts` is, or is in.
    fn config_dir_of(&self, parts: &PathParts<'_>) -> Option<&[String]> {
        self.config_dirs
            .iter()
            .find(|dir| {
                parts.components.len() >= dir.len()
                    && dir.iter().zip(&parts.components).all(|(d, c)| d == c)
            })
            .map(Vec::as_slice)
    }

    /// How `kind` covers `parts`, if it does; a directory wins over a name.
    fn cover(&self, kind: &SensitiveKind, parts: &PathParts<'_>) -> Option<Cover> {
        let config = kind.kind == TOOLGATE_CONFIG;
        if kind.dirs.iter().any(|dir| parts.has_dir(dir))
            || (config && self.config_dir_of(parts).is_some())
        {
            Some(Cover::Dir)
        } else if (kind.names)(parts)
            || (config && self.config_paths.iter().any(|p| p == parts.whole))
        {
            Some(Cover::Name)
        } else {
            None
        }
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
            ("certs/client.p12", Some("key")),
            ("certs/CLIENT.PFX", Some("key")),
            ("android/debug.keystore", Some("key")),
            ("server.jks", Some("key")),
            ("keystore.rs", None),
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
            (".netrc", Some("credentials")),
            ("home/_NETRC", Some("credentials")),
            (".pgpass", Some("credentials")),
            (".git-credentials", Some("credentials")),
            (".pypirc", Some("credentials")),
            (".my.cnf", Some("credentials")),
            (".docker/config.json", Some("credentials")),
            ("docker/config.json", None),
            ("config.json", None),
            (".cargo/credentials.toml", Some("credentials")),
            (".cargo/config.toml", None),
            (".config/gh/hosts.yml", Some("credentials")),
            (".config/gh/config.yml", None),
            (".config/git/credentials", Some("credentials")),
            ("home/.claude/.credentials.json", Some("credentials")),
            (".claude.json", Some("credentials")),
            (".claude.json.backup", Some("credentials")),
            (".codex/auth.json", Some("credentials")),
            ("auth.json", None),
            (".config/containers/auth.json", Some("credentials")),
            (".mylogin.cnf", Some("credentials")),
            ("netrc.rs", None),
            (".netrc.bak", Some("credentials")),
            ("backup/.pgpass~", Some("credentials")),
            (".gnupg/private-keys-v1.d/ab12", Some("credentials_dir")),
            (".gnupg/pubring.kbx", Some("credentials_dir")),
            (".kube/config", Some("credentials_dir")),
            ("kube/config", None),
            (".azure/msal_token_cache.json", Some("credentials_dir")),
            ("azure/pipelines.yml", None),
            (".vault-token", Some("credentials")),
            (".s3cfg", Some("credentials")),
            (".terraformrc", Some("credentials")),
            (".terraform.d/credentials.tfrc.json", Some("credentials")),
            (".terraform.d/plugins/x", None),
            (".config/gcloud/credentials.db", Some("credentials_dir")),
            (
                "home/.CONFIG/gcloud/legacy_credentials/me@example.com/adc.json",
                Some("credentials_dir"),
            ),
            (".config/gcloud", Some("credentials_dir")),
            ("gcloud/main.py", None),
            (".config/gcloudish/x", None),
            ("gcloud/.config/x", None),
            ("application_default_credentials.json", Some("credentials")),
            ("infra/terraform.tfstate", Some("credentials")),
            ("infra/terraform.tfstate.backup", Some("credentials")),
            ("infra/main.tf", None),
            ("kubeconfig", Some("credentials")),
            ("clusters/prod.kubeconfig", Some("credentials")),
            ("pkg/kubeconfig.go", None),
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
    fn directories_are_hidden_and_files_named_only() {
        let sensitivity = Sensitivity::with_config_paths(["ops/gate.cedar".to_owned()])
            .with_config_dir(".local/state/toolgate");
        let named = |rule: &str| Some(rule.to_owned());
        let table: &[(&str, Option<Option<String>>)] = &[
            // Some(None): hidden; Some(Some(rule)): named only; None: visible.
            ("src/main.rs", None),
            (".env", Some(named("sensitive-dotenv"))),
            ("certs/server.pem", Some(named("sensitive-pem"))),
            ("toolgate.toml", Some(named("sensitive-toolgate-config"))),
            ("ops/gate.cedar", Some(named("sensitive-toolgate-config"))),
            // A directory whose name looks like a file's is not a directory rule: what it
            // holds is looked at by its own name.
            (".env.d", Some(named("sensitive-dotenv"))),
            (".env.d/notes.txt", None),
            (".git", Some(None)),
            (".git/config", Some(None)),
            (".ssh", Some(None)),
            ("home/.SSH/id_rsa", Some(None)),
            (".aws/credentials", Some(None)),
            (".toolgate/policy.cedar", Some(None)),
            (".local/state/toolgate", Some(None)),
            (".local/state/toolgate/console-8080.token", Some(None)),
            (
                ".local/State/Toolgate/grants-0123456789abcdef.json",
                Some(None),
            ),
            (".local/state", None),
            (
                ".local/state/toolgate.toml",
                Some(named("sensitive-toolgate-config")),
            ),
            (".local/state/toolgate-other/a.txt", None),
        ];
        for (path, expected) in table {
            let shown = match sensitivity.visibility(path) {
                Visibility::Visible => None,
                Visibility::NameOnly(kind) => Some(Some(kind.rule.to_owned())),
                Visibility::Hidden => Some(None),
            };
            assert_eq!(&shown, expected, "{path:?}");
            // Whatever a walk shows only by name or hides, a read is refused.
            assert_eq!(
                sensitivity.kind_of(path).is_some(),
                expected.is_some(),
                "{path:?}"
            );
        }
        // The fixed kinds need no configuration.
        assert_eq!(
            Sensitivity::default().visibility(".local/state/toolgate/x"),
            Visibility::Visible
        );
        // Every directory hidden, listed for walkers that prune by pattern.
        assert_eq!(
            sensitivity.hidden_dir_names().collect::<Vec<_>>(),
            [
                ".git",
                ".ssh",
                ".aws",
                ".gnupg",
                ".kube",
                ".azure",
                ".config/gcloud",
                ".toolgate"
            ]
        );
        assert_eq!(
            sensitivity.hidden_dir_paths().collect::<Vec<_>>(),
            [".local/state/toolgate"]
        );
        for name in sensitivity.hidden_dir_names() {
            assert_eq!(sensitivity.visibility(name), Visibility::Hidden, "{name}");
        }
    }

    #[test]
    fn evidence_names_nothing_inside_the_state_directory() {
        let sensitivity = Sensitivity::default().with_config_dir(".local/state/toolgate");
        let table = [
            (
                "path:.local/state/toolgate/console-4242.token",
                "path:.local/state/toolgate/…",
            ),
            (
                "path:.Local/State/toolgate/a/b",
                "path:.Local/State/toolgate/…",
            ),
            ("path:.local/state/toolgate", "path:.local/state/toolgate"),
            (
                "path:.local/state/toolgate.toml",
                "path:.local/state/toolgate.toml",
            ),
            ("path:.env", "path:.env"),
            ("program:/usr/bin/true", "program:/usr/bin/true"),
        ];
        let typed = |wire: &str| match wire.split_once(':') {
            Some(("path", path)) => Resource::Path(path.to_owned()),
            Some(("program", program)) => Resource::Program(program.to_owned()),
            _ => unreachable!("{wire}"),
        };
        for (resource, shown) in table {
            assert_eq!(
                sensitivity.evidence_resource(&typed(resource)),
                shown,
                "{resource}"
            );
        }
        let whole = Sensitivity::default().with_config_dir(".");
        assert_eq!(
            whole.evidence_resource(&typed("path:grants-1.json")),
            "path:…"
        );
        assert_eq!(
            Sensitivity::default().evidence_resource(&typed("path:.ssh/id_rsa")),
            "path:.ssh/id_rsa"
        );
    }

    #[test]
    fn the_more_withheld_visibility_wins() {
        let dotenv = &KINDS[0];
        let pem = &KINDS[1];
        let table = [
            (
                Visibility::Visible,
                Visibility::Visible,
                Visibility::Visible,
            ),
            (
                Visibility::Visible,
                Visibility::NameOnly(dotenv),
                Visibility::NameOnly(dotenv),
            ),
            (
                Visibility::NameOnly(pem),
                Visibility::Visible,
                Visibility::NameOnly(pem),
            ),
            (
                Visibility::NameOnly(pem),
                Visibility::NameOnly(dotenv),
                Visibility::NameOnly(pem),
            ),
            (
                Visibility::NameOnly(pem),
                Visibility::Hidden,
                Visibility::Hidden,
            ),
            (Visibility::Hidden, Visibility::Visible, Visibility::Hidden),
        ];
        for (a, b, expected) in table {
            assert_eq!(a.or(b), expected, "{a:?} or {b:?}");
        }
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
    }
}
