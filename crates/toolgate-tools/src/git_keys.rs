//! The keys of git's configuration that make git run a program or read a file that selects
//! one, as one table ([`KEYS`]), each with what its value is to git and what runs. Two parts of
//! toolgate read it: the preview of a git command line (`git -c KEY=VALUE`, a URL operand:
//! [`crate::interpreter`]), and the guard of the files a repository's configuration names
//! as code that runs later ([`crate::git_named`]).
//!
//! Section and key names are matched ignoring ASCII case, as git matches them; a
//! subsection (`[remote "o"]`, `remote.o.url`) is kept as written.
//!
//! URLs are read as git's transport code reads them (`gitremote-helpers(7)`,
//! `git-remote-ext(1)`): `ext::COMMAND ARGS` makes git start COMMAND with ARGS (split at
//! unescaped spaces, no shell) whenever it contacts the remote, where `protocol.ext.allow` or
//! `protocol.allow` permits (never by default, and for submodules only when `always`);
//! `TRANSPORT::ADDRESS`, a `TRANSPORT://` URL git does not handle itself, and
//! `remote.NAME.vcs = TRANSPORT` make it start the remote helper `git-remote-TRANSPORT`.

/// What a key's value is to git.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Value {
    /// Another configuration file git reads, relative to the file that names it.
    Include,
    /// The directory git runs hooks from, relative to the work tree.
    Hooks,
    /// A file git reads that selects programs (`core.attributesFile`), relative to the work
    /// tree.
    File,
    /// A command git runs, through the shell where it is more than a word.
    Program,
    /// A shell command git runs where the value starts with `!` (an alias, a submodule's
    /// `update`).
    Bang,
    /// A URL git contacts: see [`url_runs`].
    Url,
    /// A URL that replaces another (`url.BASE.insteadOf`): the URL is the subsection, BASE.
    BaseUrl,
    /// A remote helper's name: git runs `git-remote-VALUE`.
    Helper,
    /// Which transports git may use: `ext` (so `ext::` URLs) only where this permits.
    Allow,
}

/// Whether a key sits under a subsection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Sub {
    /// `[core]`: never.
    No,
    /// `[diff "pdf"]`: always.
    Yes,
    /// `[credential]` and `[credential "https://…"]` alike.
    Either,
}

/// One row of [`KEYS`]: keys of `sections` (lowercase) whose last part is one of `keys`
/// (lowercase; none listed: every key of the section).
#[derive(Debug)]
pub(crate) struct GitKey {
    pub(crate) sections: &'static [&'static str],
    pub(crate) sub: Sub,
    pub(crate) keys: &'static [&'static str],
    pub(crate) value: Value,
    /// What git runs, and when: for the preview and the documentation.
    pub(crate) runs: &'static str,
}

const EVERY: &[&str] = &[];

/// Every key of git's configuration that makes git run a program or read a file that
/// selects one, in the order they are checked.
pub(crate) const KEYS: &[GitKey] = &[
    GitKey {
        sections: &["include"],
        sub: Sub::Either,
        keys: &["path"],
        value: Value::Include,
        runs: "git reads the file as more configuration",
    },
    GitKey {
        sections: &["includeif"],
        sub: Sub::Yes,
        keys: &["path"],
        value: Value::Include,
        runs: "git reads the file as more configuration where the condition holds",
    },
    GitKey {
        sections: &["core"],
        sub: Sub::No,
        keys: &["hookspath"],
        value: Value::Hooks,
        runs: "git runs its hooks from that directory on commit, checkout, merge, push and more",
    },
    GitKey {
        sections: &["core"],
        sub: Sub::No,
        keys: &["attributesfile"],
        value: Value::File,
        runs: "git reads attributes from it, which choose the filters and diff drivers it runs",
    },
    GitKey {
        sections: &["core"],
        sub: Sub::No,
        keys: &[
            "fsmonitor",
            "sshcommand",
            "pager",
            "editor",
            "askpass",
            "alternaterefscommand",
            "gitproxy",
        ],
        value: Value::Program,
        runs: "git runs it: the file system monitor on every status, ssh to reach a remote, \
               the pager, the editor, the password prompt",
    },
    GitKey {
        sections: &["diff"],
        sub: Sub::Yes,
        keys: &["textconv", "command"],
        value: Value::Program,
        runs: "git runs the diff driver on files whose attributes name it",
    },
    GitKey {
        sections: &["diff"],
        sub: Sub::No,
        keys: &["external"],
        value: Value::Program,
        runs: "git runs it for every diff",
    },
    GitKey {
        sections: &["interactive"],
        sub: Sub::No,
        keys: &["difffilter"],
        value: Value::Program,
        runs: "git runs it on `add -p`",
    },
    GitKey {
        sections: &["filter"],
        sub: Sub::Yes,
        keys: &["clean", "smudge", "process"],
        value: Value::Program,
        runs: "git runs the filter on files whose attributes name it, on add, status and checkout",
    },
    GitKey {
        sections: &["merge"],
        sub: Sub::Yes,
        keys: &["driver"],
        value: Value::Program,
        runs: "git runs the merge driver on files whose attributes name it",
    },
    GitKey {
        sections: &["mergetool", "difftool", "browser", "man"],
        sub: Sub::Yes,
        keys: &["cmd", "path"],
        value: Value::Program,
        runs: "git runs the tool on `mergetool`, `difftool`, `help` and `web--browse`",
    },
    GitKey {
        sections: &["guitool"],
        sub: Sub::Yes,
        keys: &["cmd"],
        value: Value::Program,
        runs: "git gui runs it",
    },
    GitKey {
        sections: &["web", "help"],
        sub: Sub::No,
        keys: &["browser"],
        value: Value::Program,
        runs: "git runs the browser on `help --web` and `instaweb`",
    },
    GitKey {
        sections: &["hook"],
        sub: Sub::Yes,
        keys: &["command"],
        value: Value::Program,
        runs: "git runs it on the events `hook.NAME.event` names, as it runs a hook",
    },
    GitKey {
        sections: &["init"],
        sub: Sub::No,
        keys: &["templatedir"],
        value: Value::File,
        runs: "git copies the directory into the repository it makes on `init` and `clone`, \
               its `hooks/` among it, which then run",
    },
    GitKey {
        sections: &["credential"],
        sub: Sub::Either,
        keys: &["helper"],
        value: Value::Program,
        runs: "git runs the credential helper whenever it needs a password",
    },
    GitKey {
        sections: &["gpg"],
        sub: Sub::Either,
        keys: &["program"],
        value: Value::Program,
        runs: "git runs it to sign and verify commits and tags",
    },
    GitKey {
        sections: &["gpg"],
        sub: Sub::Yes,
        keys: &["defaultkeycommand"],
        value: Value::Program,
        runs: "git runs it to choose the signing key",
    },
    GitKey {
        sections: &["uploadpack"],
        sub: Sub::No,
        keys: &["packobjectshook"],
        value: Value::Program,
        runs: "git runs it when serving a fetch",
    },
    GitKey {
        sections: &["imap"],
        sub: Sub::No,
        keys: &["tunnel"],
        value: Value::Program,
        runs: "git runs it on `imap-send`",
    },
    GitKey {
        sections: &["instaweb"],
        sub: Sub::No,
        keys: &["httpd"],
        value: Value::Program,
        runs: "git runs it on `instaweb`",
    },
    GitKey {
        sections: &["sendemail"],
        sub: Sub::Either,
        keys: &["sendmailcmd", "smtpserver", "tocmd", "cccmd", "headercmd"],
        value: Value::Program,
        runs: "git runs it on `send-email`",
    },
    GitKey {
        sections: &["sequence"],
        sub: Sub::No,
        keys: &["editor"],
        value: Value::Program,
        runs: "git runs it on `rebase -i`",
    },
    GitKey {
        sections: &["pager"],
        sub: Sub::No,
        keys: EVERY,
        value: Value::Program,
        runs: "git runs it as the pager of that sub-command",
    },
    GitKey {
        sections: &["remote"],
        sub: Sub::Yes,
        keys: &["uploadpack", "receivepack"],
        value: Value::Program,
        runs: "git runs it on the remote's side, which for a local remote is this machine",
    },
    GitKey {
        sections: &["trailer"],
        sub: Sub::Yes,
        keys: &["command", "cmd"],
        value: Value::Program,
        runs: "git runs it on `interpret-trailers` and `commit --trailer`",
    },
    GitKey {
        sections: &["alias"],
        sub: Sub::Either,
        keys: EVERY,
        value: Value::Bang,
        runs: "git runs the shell command of a `!` alias when the alias is the sub-command",
    },
    GitKey {
        sections: &["submodule"],
        sub: Sub::Yes,
        keys: &["update"],
        value: Value::Bang,
        runs: "git runs the shell command of a `!` update on `submodule update`",
    },
    GitKey {
        sections: &["remote"],
        sub: Sub::Yes,
        keys: &["url", "pushurl"],
        value: Value::Url,
        runs: "git runs the command of an `ext::` URL, or the remote helper a \
               `TRANSPORT::` URL names, on fetch, pull, push, ls-remote and remote update",
    },
    GitKey {
        sections: &["branch"],
        sub: Sub::Yes,
        keys: &["remote", "pushremote"],
        value: Value::Url,
        runs: "git takes a value that names no configured remote as a URL, on fetch, pull \
               and push from that branch: an `ext::` one runs its command, a `TRANSPORT::` \
               one its remote helper",
    },
    GitKey {
        sections: &["remote"],
        sub: Sub::No,
        keys: &["pushdefault"],
        value: Value::Url,
        runs: "git takes a value that names no configured remote as a URL, on push: an \
               `ext::` one runs its command, a `TRANSPORT::` one its remote helper",
    },
    GitKey {
        sections: &["submodule"],
        sub: Sub::Yes,
        keys: &["url"],
        value: Value::Url,
        runs: "git runs the command of an `ext::` URL (where `protocol.ext.allow` is \
               `always`), or the remote helper a `TRANSPORT::` URL names, on `submodule \
               update` and clone or fetch with `--recurse-submodules`",
    },
    GitKey {
        sections: &["url"],
        sub: Sub::Yes,
        keys: &["insteadof", "pushinsteadof"],
        value: Value::BaseUrl,
        runs: "git contacts the URL of the subsection instead of those starting with the \
               value: an `ext::` one runs its command, a `TRANSPORT::` one its remote helper",
    },
    GitKey {
        sections: &["remote"],
        sub: Sub::Yes,
        keys: &["vcs"],
        value: Value::Helper,
        runs: "git runs the remote helper `git-remote-VALUE` for the remote, on fetch, pull \
               and push",
    },
    GitKey {
        sections: &["protocol"],
        sub: Sub::Either,
        keys: &["allow"],
        value: Value::Allow,
        runs: "git may use the transport: `ext` (none set: never) runs the command of an \
               `ext::` URL, a remote helper's (none set: `user`) runs `git-remote-NAME`",
    },
];

/// The row of [`KEYS`] for a key: its section, its subsection if any, and its last part.
pub(crate) fn lookup(
    section: &str,
    subsection: Option<&str>,
    key: &str,
) -> Option<&'static GitKey> {
    KEYS.iter().find(|row| {
        let sub = match row.sub {
            Sub::No => subsection.is_none(),
            Sub::Yes => subsection.is_some(),
            Sub::Either => true,
        };
        sub && row.sections.iter().any(|s| s.eq_ignore_ascii_case(section))
            && (row.keys.is_empty() || row.keys.iter().any(|k| k.eq_ignore_ascii_case(key)))
    })
}

/// A dotted key as `git -c` takes it (`remote.o.url`, `url.ext::sh x.insteadOf`): its
/// section (to the first `.`), subsection (between) and last part (after the last `.`).
fn split(dotted: &str) -> Option<(&str, Option<&str>, &str)> {
    let (section, rest) = dotted.split_once('.')?;
    Some(match rest.rsplit_once('.') {
        Some((subsection, key)) => (section, Some(subsection), key),
        None => (section, None, rest),
    })
}

/// The row of [`KEYS`] for a dotted key as `git -c` and `--config-env` take it, with its
/// subsection.
pub(crate) fn lookup_dotted(dotted: &str) -> Option<(&'static GitKey, Option<&str>)> {
    let (section, subsection, key) = split(dotted)?;
    lookup(section, subsection, key).map(|row| (row, subsection))
}

/// The URL a value of `row` makes git contact, if any: the value of a [`Value::Url`], the
/// subsection of a [`Value::BaseUrl`].
pub(crate) fn url_of<'a>(
    row: &GitKey,
    subsection: Option<&'a str>,
    value: &'a str,
) -> Option<&'a str> {
    match row.value {
        Value::Url => Some(value),
        Value::BaseUrl => subsection,
        _ => None,
    }
}

/// What contacting a URL makes git run, beyond git itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Runs {
    /// `ext::`: this command's words, which git starts without a shell.
    Command(Vec<String>),
    /// The remote helper `git-remote-NAME`, found in git's exec path or on `PATH`.
    Helper(String),
}

/// A command's words as shell text, each quoted where it holds a blank or a character the
/// shell reads, for the preview and to be looked into as a command line.
pub(crate) fn shell_text(words: &[String]) -> String {
    words
        .iter()
        .map(|w| {
            if w.is_empty()
                || w.contains(|c: char| c.is_whitespace() || "'\"\\$`;&|<>()".contains(c))
            {
                format!("'{}'", w.replace('\'', "'\\''"))
            } else {
                w.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Transports git handles itself in a `TRANSPORT://` URL: any other starts a remote helper.
const NATIVE: &[&str] = &[
    "http", "https", "ftp", "ftps", "git", "ssh", "git+ssh", "ssh+git", "file",
];

/// What git runs to contact `url` (`gitremote-helpers(7)`, "Invocation"): `ext::COMMAND`
/// runs COMMAND; `TRANSPORT::ADDRESS`, and `TRANSPORT://` for a transport git does not
/// handle itself, run `git-remote-TRANSPORT`. `None` for a URL git handles itself.
pub(crate) fn url_runs(url: &str) -> Option<Runs> {
    let url = url.trim();
    // A scheme, as git's transport code reads one: a letter, then letters, digits, `+`, `-`
    // and `.`.
    let end = url
        .char_indices()
        .find(|&(i, c)| {
            !(c.is_ascii_alphabetic() || (i > 0 && (c.is_ascii_digit() || "+-.".contains(c))))
        })
        .map_or(url.len(), |(i, _)| i);
    let (scheme, rest) = url.split_at(end);
    if scheme.is_empty() {
        return None;
    }
    if let Some(address) = rest.strip_prefix("::") {
        if scheme.eq_ignore_ascii_case("ext") {
            return Some(Runs::Command(ext_command(address)));
        }
        return Some(Runs::Helper(scheme.to_owned()));
    }
    let native = NATIVE.iter().any(|n| n.eq_ignore_ascii_case(scheme));
    (rest.starts_with("://") && !native).then(|| Runs::Helper(scheme.to_owned()))
}

/// The words of an `ext::` URL's command: `git-remote-ext(1)` splits it at unescaped
/// spaces, `% ` being a space and `%%` a `%` inside a word, `%s`/`%S` the service's name,
/// and drops the words starting `%G` and `%V` (what it sends, not what it runs).
fn ext_command(address: &str) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut chars = address.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            '%' => match chars.next() {
                Some(' ') => word.push(' '),
                Some('%') => word.push('%'),
                Some('s') => word.push_str("upload-pack"),
                Some('S') => word.push_str("git-upload-pack"),
                Some(other) => {
                    word.push('%');
                    word.push(other);
                }
                None => word.push('%'),
            },
            other => word.push(other),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    words.retain(|w| !w.starts_with("%G") && !w.starts_with("%V"));
    words
}

/// The hooks git runs from `core.hooksPath`, as `githooks(5)` names them (git-p4's too): the
/// preview binds each, and the guard of files that run later names each where a hooks
/// directory cannot be guarded whole.
pub(crate) const HOOKS: &[&str] = &[
    "applypatch-msg",
    "pre-applypatch",
    "post-applypatch",
    "pre-commit",
    "pre-merge-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "pre-rebase",
    "post-checkout",
    "post-merge",
    "pre-push",
    "pre-receive",
    "update",
    "proc-receive",
    "post-receive",
    "post-update",
    "reference-transaction",
    "push-to-checkout",
    "pre-auto-gc",
    "post-rewrite",
    "sendemail-validate",
    "fsmonitor-watchman",
    "post-index-change",
    "p4-changelist",
    "p4-prepare-changelist",
    "p4-post-changelist",
    "p4-pre-submit",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_found_in_every_spelling_git_accepts() {
        let table: &[(&str, Option<Value>)] = &[
            ("core.fsmonitor", Some(Value::Program)),
            ("CORE.FsMonitor", Some(Value::Program)),
            ("core.x.fsmonitor", None),
            ("diff.pdf.textconv", Some(Value::Program)),
            ("diff.textconv", None),
            ("pager.log", Some(Value::Program)),
            ("alias.t", Some(Value::Bang)),
            ("remote.o.url", Some(Value::Url)),
            ("Remote.Origin.PushURL", Some(Value::Url)),
            ("remote.url", None),
            ("remote.a.b.c.vcs", Some(Value::Helper)),
            ("url.ext::sh ./x.sh.insteadOf", Some(Value::BaseUrl)),
            ("URL.ext::sh x.PushInsteadOf", Some(Value::BaseUrl)),
            ("protocol.allow", Some(Value::Allow)),
            ("Protocol.ext.Allow", Some(Value::Allow)),
            ("submodule.s.url", Some(Value::Url)),
            ("branch.main.remote", Some(Value::Url)),
            ("Branch.Main.PushRemote", Some(Value::Url)),
            ("remote.pushDefault", Some(Value::Url)),
            ("branch.remote", None),
            ("web.browser", Some(Value::Program)),
            ("Help.Browser", Some(Value::Program)),
            ("hook.lint.command", Some(Value::Program)),
            ("HOOK.Lint.Command", Some(Value::Program)),
            ("hook.command", None),
            ("init.templateDir", Some(Value::File)),
            ("init.x.templatedir", None),
            ("user.name", None),
        ];
        for (dotted, want) in table {
            let (section, subsection, key) = split(dotted).unwrap();
            assert_eq!(
                lookup(section, subsection, key).map(|row| row.value),
                *want,
                "{dotted}"
            );
        }
        assert_eq!(
            split("url.ext::sh ./x.sh.insteadOf"),
            Some(("url", Some("ext::sh ./x.sh"), "insteadOf"))
        );
    }

    #[test]
    fn urls_say_what_they_run() {
        let command = |s: &str| Some(Runs::Command(s.split(' ').map(str::to_owned).collect()));
        let helper = |s: &str| Some(Runs::Helper(s.to_owned()));
        let table: &[(&str, Option<Runs>)] = &[
            ("ext::sh ./x.sh", command("sh ./x.sh")),
            ("EXT::./x.sh %S", command("./x.sh git-upload-pack")),
            (
                "ext::sh -c ./x.sh% %s",
                Some(Runs::Command(
                    ["sh", "-c", "./x.sh upload-pack"]
                        .map(str::to_owned)
                        .to_vec(),
                )),
            ),
            ("ext::./x.sh %G/repo %Vhost 100%%", command("./x.sh 100%")),
            ("  ext::./y.sh", command("./y.sh")),
            ("hg::https://example.com/r", helper("hg")),
            (
                "persistent-https://example.com/r",
                helper("persistent-https"),
            ),
            ("https://example.com/r", None),
            ("GIT+SSH://example.com/r", None),
            ("git@example.com:r.git", None),
            ("./relative/path", None),
            ("/abs/path", None),
            ("::x", None),
            ("1x::y", None),
        ];
        for (url, want) in table {
            assert_eq!(url_runs(url), *want, "{url}");
        }
        let words = ["sh", "-c", "./x.sh 'a'", ""].map(str::to_owned);
        assert_eq!(shell_text(&words), r#"sh -c './x.sh '\''a'\''' ''"#);
    }
}
