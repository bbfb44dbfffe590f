//! The workspace every hostile-input corpus row runs against, and the corpus itself.
//!
//! Shared by the library tests and the CLI tests (and later transports) through `#[path]`, so
//! every entry point is held to the same table.

#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// A temporary directory holding `ws/` (the workspace) and `outside/` (what must stay out of
/// reach).
pub struct Fixture {
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let outside = dir.path().join("outside");
        fs::create_dir_all(ws.join("src")).unwrap();
        fs::create_dir_all(ws.join("target")).unwrap();
        fs::create_dir_all(ws.join("sub")).unwrap();
        fs::create_dir_all(&outside).unwrap();
        fs::write(ws.join("a.txt"), "alpha\nbeta\ngamma\n").unwrap();
        fs::write(
            ws.join("src/lib.rs"),
            "pub fn answer() -> u32 {\n    42\n}\n",
        )
        .unwrap();
        fs::write(ws.join(".gitignore"), "target/\n").unwrap();
        fs::write(ws.join("target/junk.txt"), "build output\n").unwrap();
        fs::write(ws.join(".env"), "API_KEY=supersecret\n").unwrap();
        fs::write(ws.join("binary.bin"), [0u8, 159, 146, 150, 0, 1]).unwrap();
        fs::write(outside.join("secret.txt"), "outside the workspace\n").unwrap();
        std::os::unix::fs::symlink("a.txt", ws.join("link_in")).unwrap();
        std::os::unix::fs::symlink(outside.join("secret.txt"), ws.join("link_out")).unwrap();
        std::os::unix::fs::symlink("link_out", ws.join("link_chain")).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("dir_out")).unwrap();
        std::os::unix::fs::symlink("../outside", ws.join("rel_out")).unwrap();
        std::os::unix::fs::symlink("..", ws.join("sub/up")).unwrap();
        std::os::unix::fs::symlink("../../outside/secret.txt", ws.join("sub/deep_out")).unwrap();
        Fixture { dir }
    }

    pub fn workspace(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    /// Everything under the fixture directory, workspace and outside alike: each path with its
    /// kind, mode, and contents or link target. A row that was rejected or failed must leave
    /// this unchanged.
    pub fn snapshot(&self) -> Vec<(String, String)> {
        tree(self.dir.path(), &|path, metadata| {
            let mode = std::os::unix::fs::PermissionsExt::mode(&metadata.permissions());
            if metadata.file_type().is_symlink() {
                format!("link {}", fs::read_link(path).unwrap().display())
            } else if metadata.is_dir() {
                format!("dir {mode:o}")
            } else {
                format!("file {mode:o} {:?}", fs::read(path).unwrap())
            }
        })
    }

    /// Writes the named configuration (and its policy file) beside the workspace and returns
    /// its path; `default` means no configuration.
    pub fn config(&self, name: &str) -> Option<PathBuf> {
        match name {
            "default" => None,
            "restricted" => {
                let path = self.dir.path().join("restricted.toml");
                fs::write(
                    &path,
                    concat!(
                        "policy = \"restricted.cedar\"\n",
                        "[[tool]]\nname = \"list_dir\"\nsurfaces = [\"cli\", \"console\"]\n",
                        "[[tool]]\nname = \"search_text\"\nenabled = false\n",
                    ),
                )
                .unwrap();
                fs::write(
                    self.dir.path().join("restricted.cedar"),
                    "@id(\"no-dotenv\")\nforbid (principal, action, resource)\nwhen { context.paths.contains(\".env\") };\n",
                )
                .unwrap();
                Some(path)
            }
            other => panic!("unknown fixture configuration `{other}`"),
        }
    }
}

/// Every path below `root` (links not followed, a directory after what it holds), named
/// relative to `root`, each with what `describe` says of it and its metadata.
pub fn tree(
    root: &Path,
    describe: &dyn Fn(&Path, &fs::Metadata) -> String,
) -> Vec<(String, String)> {
    fn visit(
        root: &Path,
        dir: &Path,
        describe: &dyn Fn(&Path, &fs::Metadata) -> String,
        out: &mut Vec<(String, String)>,
    ) {
        let mut entries: Vec<_> = fs::read_dir(dir).unwrap().map(|e| e.unwrap()).collect();
        entries.sort_by_key(|e| e.file_name());
        for entry in entries {
            let path = entry.path();
            let name = path.strip_prefix(root).unwrap().display().to_string();
            let metadata = fs::symlink_metadata(&path).unwrap();
            if metadata.is_dir() {
                visit(root, &path, describe, out);
            }
            out.push((name, describe(&path, &metadata)));
        }
    }
    let mut out = Vec::new();
    visit(root, root, describe, &mut out);
    out
}

/// One row of `tests/corpus/hostile.jsonl`.
#[derive(Debug, Clone)]
pub struct Row {
    pub name: String,
    pub tool: String,
    /// Raw argument text, with `@huge`, `@deep` and `@many` expanded.
    pub args: String,
    pub surface: String,
    pub profile: String,
    pub config: String,
    /// `rejected` (with stage and code) or `failed` (with the tool error code).
    pub status: String,
    pub stage: Option<String>,
    pub code: String,
}

pub fn corpus() -> Vec<Row> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/corpus/hostile.jsonl");
    let text = fs::read_to_string(&path).unwrap();
    text.lines()
        .filter(|line| !line.trim().is_empty() && !line.starts_with("//"))
        .map(|line| {
            let v: Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            let s = |key: &str, default: &str| {
                v.get(key)
                    .and_then(Value::as_str)
                    .unwrap_or(default)
                    .to_owned()
            };
            let args = match v.get("args") {
                Some(Value::String(text)) if text == "@huge" => {
                    format!("{{\"path\": \"{}\"}}", "a".repeat(2 * 1024 * 1024))
                }
                Some(Value::String(text)) if text == "@deep" => {
                    format!("{{\"path\": {}1{}}}", "[".repeat(200), "]".repeat(200))
                }
                Some(Value::String(text)) if text == "@many" => {
                    let empty = vec!["{}"; 150_000].join(",");
                    format!("{{\"path\": \"a.txt\", \"edits\": [{empty}]}}")
                }
                Some(Value::String(text)) => text.clone(),
                Some(other) => other.to_string(),
                None => "{}".to_owned(),
            };
            Row {
                name: s("name", "?"),
                tool: s("tool", ""),
                args,
                surface: s("surface", "chat"),
                profile: s("profile", "default"),
                config: s("config", "default"),
                status: s("status", "rejected"),
                stage: v.get("stage").and_then(Value::as_str).map(str::to_owned),
                code: s("code", ""),
            }
        })
        .collect()
}

/// Fills `home` with every credential store the sandbox keeps commands and upstream servers
/// from, each holding `canary`, as the stores themselves hold secrets; the SSH key is
/// user-only, as ssh keeps it, so that a probe that changes its mode shows.
pub fn credential_stores(home: &Path, canary: &str) {
    for (path, body) in [
        (".ssh/id_ed25519", format!("{canary} ssh private key\n")),
        (".ssh/known_hosts", format!("{canary} known hosts\n")),
        (
            ".aws/credentials",
            format!("[default]\naws_secret_access_key = {canary}\n"),
        ),
        (
            ".gnupg/private-keys-v1.d/canary.key",
            format!("{canary} gpg key\n"),
        ),
        (
            ".config/gh/hosts.yml",
            format!("github.com:\n  oauth_token: {canary}\n"),
        ),
        (
            ".config/gcloud/application_default_credentials.json",
            format!("{{\"refresh_token\": \"{canary}\"}}\n"),
        ),
        (
            ".azure/msal_token_cache.json",
            format!("{{\"AccessToken\": \"{canary}\"}}\n"),
        ),
        (
            ".netrc",
            format!("machine example.com login me password {canary}\n"),
        ),
        (
            ".docker/config.json",
            format!("{{\"auths\": {{\"{canary}\": {{}}}}}}\n"),
        ),
        (".kube/config", format!("users: [{{name: {canary}}}]\n")),
        (
            ".npmrc",
            format!("//registry.npmjs.org/:_authToken={canary}\n"),
        ),
        (".pypirc", format!("[pypi]\npassword = {canary}\n")),
        (
            ".cargo/credentials.toml",
            format!("[registry]\ntoken = \"{canary}\"\n"),
        ),
        (
            ".git-credentials",
            format!("https://me:{canary}@example.com\n"),
        ),
        (".pgpass", format!("db:5432:app:me:{canary}\n")),
        (".my.cnf", format!("[client]\npassword = {canary}\n")),
        (".vault-token", format!("{canary}\n")),
        (
            ".terraform.d/credentials.tfrc.json",
            format!("{{\"credentials\": {{\"app.terraform.io\": {{\"token\": \"{canary}\"}}}}}}\n"),
        ),
        (".s3cfg", format!("[default]\nsecret_key = {canary}\n")),
    ] {
        let file = home.join(path);
        fs::create_dir_all(file.parent().unwrap()).unwrap();
        fs::write(file, body).unwrap();
    }
    use std::os::unix::fs::PermissionsExt as _;
    fs::set_permissions(
        home.join(".ssh/id_ed25519"),
        fs::Permissions::from_mode(0o600),
    )
    .unwrap();
}
