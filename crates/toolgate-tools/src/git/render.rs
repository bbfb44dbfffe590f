//! `git_diff`: the contents of each side of a change, and the text the model is shown.

use std::path::Path;
use std::time::Instant;

use gix::index::entry::Mode;
use gix::{ObjectId, Repository};
use serde_json::{Map, Value, json};
use similar::{Algorithm, ChangeTag, TextDiff};
use toolgate_core::sensitive::Visibility;
use toolgate_core::{ExecContext, Sensitivity};
use toolgate_workspace::{PathKind, RelPath, Workspace};

use crate::json_len;

use super::contained::describe;
use super::diff::{FileChange, Side};
use super::repository::visibility;

/// Largest blob or file `git_diff` reads to compare; larger ones are listed as `too_large`.
pub const MAX_DIFF_FILE_BYTES: u64 = 8 * 1024 * 1024;

/// Git's own test for binary content: a NUL byte in the first 8000 bytes.
pub(super) const BINARY_PROBE_BYTES: usize = 8000;

/// Lines of context around each change, as `git diff`.
pub(super) const CONTEXT_LINES: usize = 3;

/// Reads each side of a change: objects from the repository, worktree files through the
/// workspace.
pub(super) struct ContentReader<'a> {
    pub(super) repo: &'a Repository,
    pub(super) workspace: &'a Workspace,
    pub(super) sensitivity: &'a Sensitivity,
}

/// Why a side could not be compared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Unreadable {
    TooLarge,
    Failed(String),
}

impl ContentReader<'_> {
    fn read(&self, path: &str, side: &Side) -> Result<Vec<u8>, Unreadable> {
        match side {
            Side::Absent => Ok(Vec::new()),
            // Git shows a submodule as the commit it records.
            Side::Object { id, mode } if *mode == Mode::COMMIT => {
                Ok(format!("Subproject commit {id}\n").into_bytes())
            }
            Side::Object { id, .. } => self.object(id),
            Side::Worktree { mode } if *mode == Mode::SYMLINK => self.link_text(path),
            Side::Worktree { mode } if *mode == Mode::FILE || *mode == Mode::FILE_EXECUTABLE => {
                self.worktree_file(path)
            }
            Side::Worktree { .. } => Err(Unreadable::Failed(
                "it is a directory or submodule in the working tree".to_owned(),
            )),
        }
    }

    fn object(&self, id: &ObjectId) -> Result<Vec<u8>, Unreadable> {
        let failed = |e: gix::Error| {
            Unreadable::Failed(format!(
                "cannot read its object: {}",
                describe(self.workspace.root(), &e)
            ))
        };
        let header = self.repo.find_header(*id).map_err(failed)?;
        if header.size() > MAX_DIFF_FILE_BYTES {
            return Err(Unreadable::TooLarge);
        }
        let object = self.repo.find_object(*id).map_err(failed)?;
        Ok(object.detach().data)
    }

    fn worktree_file(&self, path: &str) -> Result<Vec<u8>, Unreadable> {
        let rel = self.rel(path)?;
        let (bytes, len) = self
            .workspace
            .read_file(&rel, MAX_DIFF_FILE_BYTES + 1)
            .map_err(|e| Unreadable::Failed(e.to_string()))?;
        if len > MAX_DIFF_FILE_BYTES || bytes.len() as u64 > MAX_DIFF_FILE_BYTES {
            return Err(Unreadable::TooLarge);
        }
        Ok(bytes)
    }

    /// A tracked link is diffed as its text, as git does; it is never followed. The link is
    /// read by path, so its directory must first be shown to be a real directory inside the
    /// workspace, reached without links.
    fn link_text(&self, path: &str) -> Result<Vec<u8>, Unreadable> {
        let rel = self.rel(path)?;
        let components: Vec<&str> = rel.components().collect();
        let parent = match components.split_last() {
            Some((_, [])) | None => RelPath::root(),
            Some((_, parents)) => RelPath::from_components(parents.iter().copied())
                .ok_or_else(|| Unreadable::Failed(format!("`{path}` has no parent")))?,
        };
        let resolved = self
            .workspace
            .resolve(&parent)
            .map_err(|e| Unreadable::Failed(e.to_string()))?;
        if resolved.kind != PathKind::Dir || resolved.through_symlink {
            return Err(Unreadable::Failed(format!(
                "`{parent}` is not a directory reached without symbolic links"
            )));
        }
        let target = std::fs::read_link(self.workspace.ambient_path(&rel))
            .map_err(|e| Unreadable::Failed(format!("cannot read the link `{path}`: {e}")))?;
        Ok(target.into_os_string().into_encoded_bytes())
    }

    /// The rule that keeps `path` from being shown, if one does.
    fn sensitive_rule(&self, path: &str) -> Option<&'static str> {
        match visibility(self.workspace, self.sensitivity, path) {
            Visibility::Visible => None,
            Visibility::NameOnly(kind) => Some(kind.rule),
            // Hidden paths were withheld before rendering; never shown if one were not.
            Visibility::Hidden => Some(
                self.sensitivity
                    .kind_of(path.trim_end_matches('/'))
                    .map_or("sensitive", |kind| kind.rule),
            ),
        }
    }

    /// The rule that keeps the text of a link at `path` from being shown: the text names a
    /// sensitive path, which, in a link the tree once held, no longer has to exist.
    fn link_text_rule(&self, path: &str, side: &Side, text: &[u8]) -> Option<&'static str> {
        if side.mode() != Some(Mode::SYMLINK) {
            return None;
        }
        let target = link_target(self.workspace.root(), path, text)?;
        self.sensitivity.kind_of(&target).map(|kind| kind.rule)
    }

    fn rel(&self, path: &str) -> Result<RelPath, Unreadable> {
        self.workspace
            .check_path(path)
            .map_err(|e| Unreadable::Failed(e.to_string()))
    }
}

/// One file's part of the output.
#[derive(Debug)]
pub(super) struct Rendered {
    pub(super) summary: Value,
    pub(super) text: String,
}

/// The entry in `files` and the diff text for `change`.
pub(super) fn render(
    reader: &ContentReader<'_>,
    change: &FileChange,
    cx: &ExecContext,
) -> Rendered {
    let mut summary = Map::new();
    summary.insert("path".to_owned(), json!(change.path));
    if let Some(old_path) = &change.old_path {
        summary.insert("old_path".to_owned(), json!(old_path));
    }
    summary.insert("status".to_owned(), json!(change.status));
    let done = |summary: Map<String, Value>, text: String| Rendered {
        summary: Value::Object(summary),
        text,
    };

    if change.status == "unmerged" {
        let text = format!("* Unmerged path {}\n", change.path);
        return done(summary, text);
    }
    let sensitive = reader.sensitive_rule(&change.path).or_else(|| {
        change
            .old_path
            .as_deref()
            .and_then(|old| reader.sensitive_rule(old))
    });
    if let Some(rule) = sensitive {
        // Neither side is read: not even line counts come from a file that may hold secrets.
        summary.insert("omitted".to_owned(), json!(rule));
        return done(summary, String::new());
    }

    let old_path = change.old_path.as_deref().unwrap_or(&change.path);
    let mut text = header(change, old_path);
    let (old, new) = match (
        reader.read(old_path, &change.old),
        reader.read(&change.path, &change.new),
    ) {
        (Ok(old), Ok(new)) => {
            let link_rule = reader
                .link_text_rule(old_path, &change.old, &old)
                .or_else(|| reader.link_text_rule(&change.path, &change.new, &new));
            if let Some(rule) = link_rule {
                summary.insert("omitted".to_owned(), json!(rule));
                return done(summary, String::new());
            }
            (old, new)
        }
        (Err(Unreadable::TooLarge), _) | (_, Err(Unreadable::TooLarge)) => {
            summary.insert("too_large".to_owned(), json!(true));
            text.push_str(&format!(
                "File over {MAX_DIFF_FILE_BYTES} bytes; not compared\n"
            ));
            return done(summary, text);
        }
        (Err(Unreadable::Failed(message)), _) | (_, Err(Unreadable::Failed(message))) => {
            summary.insert("error".to_owned(), json!(capped(message)));
            return done(summary, text);
        }
    };
    if old == new {
        // A mode change or an exact rename: the header says it all.
        summary.insert("added".to_owned(), json!(0));
        summary.insert("removed".to_owned(), json!(0));
        return done(summary, text);
    }
    let (old_text, new_text) = match (text_of(&old), text_of(&new)) {
        (Some(old_text), Some(new_text)) => (old_text, new_text),
        _ => {
            summary.insert("binary".to_owned(), json!(true));
            let (a, b) = file_labels(change, old_path);
            text.push_str(&format!("Binary files {a} and {b} differ\n"));
            return done(summary, text);
        }
    };
    // One file may take a quarter of the time left: a pathological file then ends in a
    // coarser (still correct) diff instead of a timeout for the whole call.
    let now = Instant::now();
    let deadline = now + cx.deadline().saturating_duration_since(now) / 4;
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .deadline(deadline)
        .diff_lines(old_text, new_text);
    let (mut added, mut removed) = (0usize, 0usize);
    for op in diff.ops() {
        for change in diff.iter_changes(op) {
            match change.tag() {
                ChangeTag::Insert => added += 1,
                ChangeTag::Delete => removed += 1,
                ChangeTag::Equal => {}
            }
        }
    }
    summary.insert("added".to_owned(), json!(added));
    summary.insert("removed".to_owned(), json!(removed));
    let (a, b) = file_labels(change, old_path);
    text.push_str(&format!("--- {a}\n+++ {b}\n"));
    let mut unified = diff.unified_diff();
    unified.context_radius(CONTEXT_LINES);
    for hunk in unified.iter_hunks() {
        text.push_str(&hunk.to_string());
    }
    done(summary, text)
}

/// The `diff --git` header and the lines git prints before the hunks.
pub(super) fn header(change: &FileChange, old_path: &str) -> String {
    let mut text = format!("diff --git a/{old_path} b/{}\n", change.path);
    match (change.old.mode(), change.new.mode()) {
        (None, Some(mode)) => text.push_str(&format!("new file mode {:o}\n", mode.bits())),
        (Some(mode), None) => text.push_str(&format!("deleted file mode {:o}\n", mode.bits())),
        (Some(old), Some(new)) if old != new => {
            text.push_str(&format!(
                "old mode {:o}\nnew mode {:o}\n",
                old.bits(),
                new.bits()
            ));
        }
        _ => {}
    }
    if let Some(source) = &change.old_path {
        let verb = if change.status == "copied" {
            "copy"
        } else {
            "rename"
        };
        text.push_str(&format!(
            "{verb} from {source}\n{verb} to {}\n",
            change.path
        ));
    }
    text
}

/// Where a link at `link` whose text is `text` leads, as a workspace-relative path worked out
/// from the text alone (the link may be gone); `None` when it leads out of `root` or is not
/// UTF-8.
pub(super) fn link_target(root: &Path, link: &str, text: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(text).ok()?;
    let (mut parts, rest): (Vec<&str>, &str) = if text.starts_with('/') {
        (
            Vec::new(),
            Path::new(text).strip_prefix(root).ok()?.to_str()?,
        )
    } else {
        let mut parent: Vec<&str> = link.split('/').collect();
        parent.pop();
        (parent, text)
    };
    for part in rest.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            name => parts.push(name),
        }
    }
    Some(parts.join("/"))
}

/// `message` cut to a length that keeps one file's entry small.
pub(super) fn capped(message: String) -> String {
    const MAX_CHARS: usize = 300;
    match message.char_indices().nth(MAX_CHARS) {
        Some((at, _)) => format!("{}…", message.get(..at).unwrap_or_default()),
        None => message,
    }
}

/// `a/…` and `b/…`, or `/dev/null` for a side that does not exist.
pub(super) fn file_labels(change: &FileChange, old_path: &str) -> (String, String) {
    let a = match change.old {
        Side::Absent => "/dev/null".to_owned(),
        _ => format!("a/{old_path}"),
    };
    let b = match change.new {
        Side::Absent => "/dev/null".to_owned(),
        _ => format!("b/{}", change.path),
    };
    (a, b)
}

/// `bytes` as text, or `None` when git would call it binary (a NUL early on) or it is not
/// UTF-8, which a model could not read either.
pub(super) fn text_of(bytes: &[u8]) -> Option<&str> {
    let probe = bytes.get(..BINARY_PROBE_BYTES).unwrap_or(bytes);
    if probe.contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

/// The diff text, cut on a line boundary once it reaches its budget (bytes as escaped JSON).
#[derive(Debug)]
pub(super) struct DiffText {
    pub(super) text: String,
    budget: usize,
    used: usize,
    pub(super) truncated: bool,
}

impl DiffText {
    pub(super) fn new(budget: usize) -> Self {
        DiffText {
            text: String::new(),
            budget,
            used: 2,
            truncated: false,
        }
    }

    pub(super) fn push(&mut self, text: &str) {
        if self.truncated {
            return;
        }
        for line in text.split_inclusive('\n') {
            let cost = json_len(line) - 2;
            if self.used + cost > self.budget {
                self.truncated = true;
                return;
            }
            self.used += cost;
            self.text.push_str(line);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binary_is_a_nul_early_on_or_not_utf8() {
        assert_eq!(text_of(b"plain\n"), Some("plain\n"));
        assert_eq!(text_of(b"a\0b"), None);
        assert_eq!(text_of(b"\xff\xfe"), None);
        let mut late = vec![b'a'; BINARY_PROBE_BYTES];
        late.push(0);
        assert!(text_of(&late).is_some());
    }

    #[test]
    fn diff_text_cuts_on_a_line_boundary() {
        // Each line costs five bytes once escaped: three letters and `\n`.
        let mut text = DiffText::new(2 + 10);
        text.push("abc\ndef\nghi\n");
        assert_eq!(text.text, "abc\ndef\n");
        assert!(text.truncated);
        text.push("x\n");
        assert_eq!(text.text, "abc\ndef\n");
    }

    #[test]
    fn a_links_text_is_followed_on_paper_only() {
        let root = Path::new("/home/me");
        let table = [
            (
                "tok",
                "state/toolgate/console.token",
                Some("state/toolgate/console.token"),
            ),
            ("a/b/tok", "../../state/x", Some("state/x")),
            ("a/tok", "./b/../c", Some("a/c")),
            ("tok", "../outside", None),
            (
                "tok",
                "/home/me/.local/state/toolgate/x",
                Some(".local/state/toolgate/x"),
            ),
            ("tok", "/etc/passwd", None),
        ];
        for (link, text, expected) in table {
            assert_eq!(
                link_target(root, link, text.as_bytes()).as_deref(),
                expected,
                "{link} -> {text}"
            );
        }
        assert_eq!(link_target(root, "tok", b"\xff"), None);
    }
}
