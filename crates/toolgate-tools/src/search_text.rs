//! `search_text`: ripgrep's walker, matcher and searcher over the workspace.
//!
//! The walker lists candidate files; each is then opened through the workspace's capability,
//! not by the path the walker saw, so a file swapped for a link mid-search cannot be read from
//! outside. Binary files (a NUL byte) are skipped whole, even where a match came before the NUL.

use std::io::{self, Seek as _};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkMatch};
use ignore::overrides::{Override, OverrideBuilder};
use serde::Deserialize;
use serde_json::{Value, json};
use toolgate_core::{
    Call, Classification, ExecContext, FieldError, RejectCode, ToolError, ToolErrorCode,
    ToolOutput, TypedExecutor,
};
use toolgate_workspace::{PathKind, RelPath, Workspace};

use crate::descriptor::{closed_schema, titled};
use crate::walk::{Found, Stretch, WalkOptions, WalkSummary, stretches, walk_stretch};
use crate::{Builtin, ENVELOPE_BYTES, json_len, path_argument, read_only_entry, stopped, to_usize};

pub(crate) const NAME: &str = "search_text";

pub const DEFAULT_MAX_RESULTS: u64 = 100;
/// Characters of a matching line returned.
pub const MAX_LINE_CHARS: usize = 500;
/// Files larger than this are skipped (and counted in the outcome's unknowns).
pub const MAX_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// Bounds on the compiled regex, so a pattern cannot take unbounded memory.
const REGEX_SIZE_LIMIT: usize = 10 * 1024 * 1024;
/// The longest line the searcher buffers; a longer one is skipped as unreadable.
const HEAP_LIMIT: usize = 16 * 1024 * 1024;

const DESCRIPTION: &str = "Search the contents of the workspace's files for a string or a \
regular expression, like ripgrep: files ignored by `.gitignore`, the `.git` directory, binary \
files, and files and directories that commonly hold secrets (`.env*`, `*.pem`, `*.key`, SSH \
keys, `.ssh`) or toolgate's own configuration and state are skipped. \
Use it to find where something is defined or used; then use `read_file` with an `offset` near \
the match to see the code around it. To find files by name, use `list_dir`. \
`pattern` is a literal string unless `regex` is true (Rust regex syntax; a match never spans \
lines). Matching ignores case unless `case_sensitive` is true. `path` narrows the search to a \
file or directory relative to the workspace root; `glob` to file names matching it (`*.rs`, \
`src/**/*.toml`, or `!*.md` to exclude). Each match has the file's `path`, the 1-based `line` \
number and the line's `text` (cut at 500 characters). `files_searched` counts the files looked \
at. `truncated: true` means there were more matches than returned: narrow `path`, `glob` or \
`pattern`.";

pub(crate) fn builtin(workspace: Arc<Workspace>) -> Builtin {
    let properties = json!({
        "pattern": {
            "type": "string",
            "minLength": 1,
            "maxLength": 1000,
            "description": "The text to find: a literal string, or a regular expression when `regex` is true."
        },
        "path": {
            "type": "string",
            "maxLength": 4096,
            "description": "A file or directory to search, relative to the workspace root. Default: the whole workspace."
        },
        "regex": {
            "type": "boolean",
            "description": "Treat `pattern` as a regular expression (Rust syntax). Default false: a literal string."
        },
        "case_sensitive": {
            "type": "boolean",
            "description": "Match case exactly. Default false: `Foo` also finds `foo` and `FOO`."
        },
        "glob": {
            "type": "string",
            "minLength": 1,
            "maxLength": 256,
            "description": "Only search files whose path matches this glob (`*.rs`, `src/**/*.toml`); a leading `!` excludes instead. Default: every file."
        },
        "max_results": {
            "type": "integer",
            "minimum": 1,
            "maximum": 1000,
            "description": "The most matching lines to return. Default 100, at most 1000."
        }
    });
    let schema = closed_schema(properties, &["pattern"]);
    Builtin {
        descriptor: titled(NAME, "Search file contents", DESCRIPTION, schema),
        entry: read_only_entry(NAME, "workspace_search", 512 * 1024),
        executor: Arc::new(SearchText { workspace }),
    }
}

/// The executor for `search_text`.
#[derive(Debug)]
pub struct SearchText {
    workspace: Arc<Workspace>,
}

/// `search_text`'s arguments, as its closed schema accepts them.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    pattern: String,
    path: Option<String>,
    #[serde(default)]
    regex: bool,
    #[serde(default)]
    case_sensitive: bool,
    glob: Option<String>,
    max_results: Option<u64>,
    #[serde(skip)]
    looked: path_argument::Looked,
}

/// What a `search_text` call will search: where stage 4 named, for what.
#[derive(Debug)]
pub struct SearchPlan {
    rel: Result<RelPath, ToolError>,
    arguments: SearchArgs,
}

impl SearchText {
    fn matcher(arguments: &SearchArgs) -> Result<RegexMatcher, UnusableArgument> {
        RegexMatcherBuilder::new()
            .fixed_strings(!arguments.regex)
            .case_insensitive(!arguments.case_sensitive)
            .line_terminator(Some(b'\n'))
            .size_limit(REGEX_SIZE_LIMIT)
            .dfa_size_limit(REGEX_SIZE_LIMIT)
            .build(&arguments.pattern)
            .map_err(UnusableArgument::Pattern)
    }

    fn overrides(&self, arguments: &SearchArgs) -> Result<Option<Override>, UnusableArgument> {
        let Some(glob) = &arguments.glob else {
            return Ok(None);
        };
        let mut builder = OverrideBuilder::new(self.workspace.root());
        builder.add(glob).map_err(UnusableArgument::Glob)?;
        builder.build().map(Some).map_err(UnusableArgument::Glob)
    }
}

/// Why a call's pattern or glob cannot be searched with, in one line.
#[derive(Debug, thiserror::Error)]
enum UnusableArgument {
    #[error("{}", one_line(&.0.to_string()))]
    Pattern(grep_regex::Error),
    #[error("{}", one_line(&.0.to_string()))]
    Glob(ignore::Error),
}

/// The gist of a multi-line error (regex-syntax draws a caret diagram): its last line.
fn one_line(message: &str) -> String {
    let line = message
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty())
        .unwrap_or(message);
    line.strip_prefix("error: ").unwrap_or(line).to_owned()
}

impl TypedExecutor for SearchText {
    type Args = SearchArgs;
    type Plan = SearchPlan;

    fn check(&self, arguments: &SearchArgs) -> Vec<FieldError> {
        let mut errors = path_argument::check(
            &self.workspace,
            arguments.path.as_deref(),
            "path",
            &arguments.looked,
        );
        if let Err(reason) = Self::matcher(arguments) {
            let message = if arguments.regex {
                format!("not a valid regular expression: {reason}")
            } else {
                format!("cannot be searched for: {reason}")
            };
            errors.push(FieldError::new(
                "/pattern",
                RejectCode::ConstraintViolation,
                message,
            ));
        }
        if let Err(reason) = self.overrides(arguments) {
            errors.push(FieldError::new(
                "/glob",
                RejectCode::ConstraintViolation,
                format!("not a valid glob: {reason}"),
            ));
        }
        errors
    }

    fn plan(&self, mut arguments: SearchArgs) -> (SearchPlan, Classification) {
        let looked = std::mem::take(&mut arguments.looked);
        let (rel, classification) =
            path_argument::plan(&self.workspace, arguments.path.as_deref(), looked);
        (SearchPlan { rel, arguments }, classification)
    }

    fn execute(
        &self,
        plan: &SearchPlan,
        call: &Call<'_, Self>,
        cx: &ExecContext,
    ) -> Result<ToolOutput, ToolError> {
        let arguments = &plan.arguments;
        let matcher = Self::matcher(arguments)
            .map_err(|e| ToolError::new(ToolErrorCode::InvalidPattern, e.to_string()))?;
        let overrides = self
            .overrides(arguments)
            .map_err(|e| ToolError::new(ToolErrorCode::InvalidGlob, e.to_string()))?;
        let resolved = path_argument::resolve(&self.workspace, &plan.rel)?;
        let max_results = to_usize(arguments.max_results.unwrap_or(DEFAULT_MAX_RESULTS))
            .min(call.limits().max_results)
            .max(1);
        let looker = Looker {
            workspace: &self.workspace,
            matcher,
            max_results,
            cx,
        };
        let mut search = Search {
            max_results,
            budget: call
                .limits()
                .max_output_bytes
                .saturating_sub(ENVELOPE_BYTES),
            used: 0,
            matches: Vec::new(),
            files_searched: 0,
            skipped_large: 0,
            skipped_unreadable: 0,
            skipped_sensitive: 0,
            lines_cut: false,
            truncated: false,
            cx,
        };
        match resolved.kind {
            PathKind::File => {
                // One file: whether it filled the results is already in `search.truncated`.
                let looked = looker.look(&mut looker.searcher(), &resolved.rel, 0);
                let _ = search.take(&resolved.rel, looked)?;
            }
            PathKind::Dir => {
                let options = WalkOptions {
                    depth: None,
                    overrides,
                };
                search_tree(&looker, &mut search, &resolved.target, &options)?;
            }
            PathKind::Symlink | PathKind::Other => {
                return Err(ToolError::new(
                    ToolErrorCode::NotAFile,
                    format!(
                        "`{}` is a {}; it cannot be searched",
                        resolved.rel, resolved.kind
                    ),
                ));
            }
        }
        Ok(search.finish(arguments))
    }
}

/// Files are dealt, and their findings passed on, this many at a time at first: handing each
/// file from thread to thread on its own would wake a thread per file.
const BATCH: usize = 16;

/// How often a walk's batches double: every [`BATCH`] batches, from [`BATCH`] files up to
/// `BATCH << BATCH_DOUBLINGS` (256). A search that fills up soon stops within small batches;
/// a long one wakes its threads far less often (a search through 25,000 files switched threads
/// about 5,000 times with batches of 16 throughout, about 1,500 with batches growing to 128).
const BATCH_DOUBLINGS: usize = 4;

/// How many batches the walk may deal ahead of each searching thread, and how many batches'
/// findings each may hold before they join the results.
const LOOK_AHEAD: usize = 4;

/// How many batches the walk of a stretch may yield before the dealer gets to it: enough for
/// a walker to walk a stretch of some thousands of files while another walks the stretch
/// before, and at most some 16,000 paths (a megabyte or two) a walker.
const WALK_AHEAD: usize = 64;

/// The most threads that search files at once.
const MAX_SEARCHERS: usize = 4;

/// Searches every file below `target`, giving the results exactly as one thread searching in
/// path order finds them.
///
/// The walk (directory reads, ignore rules) is cut into stretches of its order (see
/// [`stretches`]), which walking threads, one per core, take in turn; a dealing thread takes
/// the files each stretch yields, stretch after stretch, so in path order, and deals them in
/// batches (of [`BATCH`] files at first, growing as the walk goes on) to one searching thread
/// per core in turn: the `i`th batch to thread `i mod n`. Each searching thread passes what it
/// found in each batch on, in its order, and this thread takes them round the threads in the
/// same turn, so it sees every file's findings in path order, and adds them up as one thread
/// would. Every channel is bounded: a walk gets at most [`WALK_AHEAD`] batches ahead of the
/// dealer, and the dealer and each searcher at most [`LOOK_AHEAD`] ahead of the thread after
/// them. When the results are full this thread drops its ends: the searchers, the dealer and
/// the walks stop at their next file.
fn search_tree(
    looker: &Looker<'_>,
    search: &mut Search<'_>,
    target: &RelPath,
    options: &WalkOptions,
) -> Result<(), ToolError> {
    let searchers = std::thread::available_parallelism()
        .map_or(1, std::num::NonZeroUsize::get)
        .clamp(1, MAX_SEARCHERS);
    type Batch = Vec<RelPath>;
    type Findings = Vec<(RelPath, Looked)>;
    let (to_look, to_take): (Vec<SyncSender<Batch>>, Vec<Receiver<Batch>>) =
        (0..searchers).map(|_| sync_channel(LOOK_AHEAD)).unzip();
    let (found, finding): (Vec<SyncSender<Findings>>, Vec<Receiver<Findings>>) =
        (0..searchers).map(|_| sync_channel(LOOK_AHEAD)).unzip();
    let taken = &AtomicUsize::new(0);
    let (workspace, cx) = (looker.workspace, looker.cx);
    // As many walkers as searchers, and more stretches than walkers, so that an uneven cut
    // still leaves each walker work.
    let stretches = if searchers > 1 {
        stretches(workspace, cx.sensitivity(), target, searchers * 4)
    } else {
        vec![Stretch::default()]
    };
    let walkers = searchers.min(stretches.len());
    let (walked_into, walked): (Vec<SyncSender<Walked>>, Vec<Receiver<Walked>>) =
        stretches.iter().map(|_| sync_channel(WALK_AHEAD)).unzip();
    let walked_into: Vec<_> = walked_into
        .into_iter()
        .map(|sender| Mutex::new(Some(sender)))
        .collect();
    let (stretches, walked_into) = (&stretches, &walked_into);
    let next_stretch = &AtomicUsize::new(0);
    // Set once nobody takes what the walks yield: they stop taking stretches.
    let abandoned = &AtomicBool::new(false);
    let (dealt, searched, took) = std::thread::scope(|scope| {
        let walking: Vec<_> = (0..walkers)
            .map(|_| {
                scope.spawn(move || {
                    let turns = Turns {
                        stretches,
                        outlets: walked_into,
                        next: next_stretch,
                        abandoned,
                    };
                    walk_in_turn(workspace, target, options, cx, &turns);
                })
            })
            .collect();
        let dealer = scope.spawn(move || {
            let mut turn = (0..to_look.len()).cycle();
            let mut deal = |batch: Batch| {
                let to = turn.next().and_then(|i| to_look.get(i));
                to.is_some_and(|to| to.send(batch).is_ok())
            };
            let mut summary = WalkSummary::default();
            let mut skipped = Skipped::default();
            // The stretches in order, each to its end: the files in path order.
            let take = || {
                for stretch in walked {
                    loop {
                        match stretch.recv() {
                            Ok(Walked::Files(batch)) => {
                                if !deal(batch) {
                                    // The search has enough.
                                    return Ok(());
                                }
                            }
                            Ok(Walked::Done(walked, passed)) => {
                                let walked = walked?;
                                summary.unreadable += walked.unreadable;
                                summary.unnamed += walked.unnamed;
                                skipped.sensitive += passed.sensitive;
                                break;
                            }
                            // Its walker stopped without saying why: it panicked.
                            Err(_) => {
                                return Err(ToolError::new(
                                    ToolErrorCode::ToolPanicked,
                                    "the directory walk stopped unexpectedly",
                                ));
                            }
                        }
                    }
                }
                Ok(())
            };
            let ended = take();
            // Whatever ended the dealing, the walks have nobody to yield to any more.
            abandoned.store(true, Ordering::Relaxed);
            ended.map(|()| (summary, skipped))
        });
        let lookers: Vec<_> = to_take
            .into_iter()
            .zip(found)
            .map(|(files, found)| {
                scope.spawn(move || {
                    yield_to_the_walk();
                    let mut searchers = looker.searcher();
                    for batch in files {
                        // The matches before each file: at least those taken, and those of the
                        // batch's files before it. Each file is searched for no more than
                        // could still fit, so that a batch holds at most one result's worth.
                        let mut before = taken.load(std::sync::atomic::Ordering::Relaxed);
                        let findings = batch
                            .into_iter()
                            .map(|rel| {
                                let looked = looker.look(&mut searchers, &rel, before);
                                if let Looked::Lines(lines) = &looked {
                                    before += lines.len();
                                }
                                (rel, looked)
                            })
                            .collect();
                        if found.send(findings).is_err() {
                            return;
                        }
                    }
                })
            })
            .collect();
        let mut took = Ok(());
        'taking: loop {
            for finding in &finding {
                // A closed channel: that searcher has searched every file dealt to it, so
                // the walk dealt no file after the last one taken.
                let Ok(findings) = finding.recv() else {
                    break 'taking;
                };
                for (rel, looked) in findings {
                    match search.take(&rel, looked) {
                        Ok(ControlFlow::Continue(())) => {}
                        Ok(ControlFlow::Break(())) => break 'taking,
                        Err(error) => {
                            took = Err(error);
                            break 'taking;
                        }
                    }
                }
                taken.store(search.matches.len(), std::sync::atomic::Ordering::Relaxed);
            }
        }
        drop(finding);
        let searched = lookers.into_iter().all(|looker| looker.join().is_ok());
        let dealt = dealer.join();
        // A walk that panicked is reported by the dealer, which heard it stop.
        for walker in walking {
            let _ = walker.join();
        }
        (dealt, searched, took)
    });
    took?;
    let (Ok(dealt), true) = (dealt, searched) else {
        return Err(ToolError::new(
            ToolErrorCode::ToolPanicked,
            "the directory walk or a search stopped unexpectedly",
        ));
    };
    let (summary, skipped) = dealt?;
    search.skipped_sensitive += skipped.sensitive;
    search.skipped_unreadable += summary.unreadable + summary.unnamed;
    Ok(())
}

/// Lowers the calling searching thread's priority a little (its nice value by 5), so that the
/// walk that feeds every searcher gets a core when they compete for one: a searcher without
/// files is idle, but a walk without a core holds up every searcher. A hint to the scheduler
/// only; where it cannot be given, the search finds the same.
fn yield_to_the_walk() {
    use rustix::process::{getpriority_process, setpriority_process};
    let thread = Some(rustix::thread::gettid());
    if let Ok(nice) = getpriority_process(thread) {
        let _ = setpriority_process(thread, (nice + 5).min(19));
    }
}

/// The stretches of one search, as its walking threads share them.
struct Turns<'a> {
    stretches: &'a [Stretch],
    /// Where each stretch's files go, taken by the walker that takes the stretch.
    outlets: &'a [Mutex<Option<SyncSender<Walked>>>],
    /// The next stretch nobody has taken.
    next: &'a AtomicUsize,
    /// Set once nobody takes what the walks yield.
    abandoned: &'a AtomicBool,
}

/// Walks the stretches of `turns` that nobody has taken, one after another, each into its
/// outlet, in batches that grow as the walk goes on; stops once nobody listens.
fn walk_in_turn(
    workspace: &Workspace,
    target: &RelPath,
    options: &WalkOptions,
    cx: &ExecContext,
    turns: &Turns<'_>,
) {
    while !turns.abandoned.load(Ordering::Relaxed) {
        let i = turns.next.fetch_add(1, Ordering::Relaxed);
        let (Some(stretch), Some(outlet)) = (turns.stretches.get(i), turns.outlets.get(i)) else {
            return;
        };
        let Some(into) = outlet.lock().ok().and_then(|mut outlet| outlet.take()) else {
            return;
        };
        let send = |walked: Walked| {
            let sent = into.send(walked).is_ok();
            if !sent {
                turns.abandoned.store(true, Ordering::Relaxed);
            }
            sent
        };
        let mut skipped = Skipped::default();
        let mut batch = Vec::with_capacity(BATCH);
        let mut batches = 0;
        let summary = walk_stretch(workspace, target, options, stretch, cx, |entry| {
            if let Some(rel) = skipped.file(entry) {
                batch.push(rel);
            }
            if batch.len() < BATCH << (batches / BATCH).min(BATCH_DOUBLINGS) {
                return ControlFlow::Continue(());
            }
            batches += 1;
            if send(Walked::Files(std::mem::take(&mut batch))) {
                ControlFlow::Continue(())
            } else {
                ControlFlow::Break(())
            }
        });
        if !batch.is_empty() && !send(Walked::Files(batch)) {
            return;
        }
        if !send(Walked::Done(summary, skipped)) {
            return;
        }
    }
}

/// What the walk of one stretch passes on to the dealer.
enum Walked {
    /// Files to search, in path order.
    Files(Vec<RelPath>),
    /// The stretch is walked: what the walk passed over, or why it stopped.
    Done(Result<WalkSummary, ToolError>, Skipped),
}

/// What the walk passes over instead of handing it to the search.
#[derive(Debug, Default)]
struct Skipped {
    sensitive: usize,
}

impl Skipped {
    /// The file to search at `found`, if it is one to search.
    fn file(&mut self, found: Found<'_>) -> Option<RelPath> {
        let Found {
            entry,
            rel,
            sensitive,
        } = found;
        if !entry.file_type().is_file() {
            return None;
        }
        // Sensitive files (`.env`, keys, toolgate's configuration) are not searched: a search
        // must not read what a read may not. The walk never even yields what a sensitive
        // directory holds.
        if sensitive.is_some() {
            self.sensitive += 1;
            return None;
        }
        // Its size is looked at once it is open: one status per file, not two.
        Some(rel)
    }
}

/// What searching one file found, before it joins the results.
enum Looked {
    /// Gone, unreadable, or swapped for something that leads out since the walk saw it.
    Unreadable,
    Large,
    /// Opened, but could not be searched to its end (a read failed, a line was too long).
    Failed,
    Binary,
    /// The call was cancelled or timed out meanwhile.
    Stopped,
    /// Line number, text, whether the text was cut: at most one more than the results had
    /// room for when the search began.
    Lines(Vec<(u64, String, bool)>),
}

/// Searches files, on any thread.
struct Looker<'a> {
    workspace: &'a Workspace,
    matcher: RegexMatcher,
    max_results: usize,
    cx: &'a ExecContext,
}

/// A searching thread's two searchers: one that only tells whether a file matches, and one
/// that counts lines, for the files that do. Counting the lines of every file costs more
/// than searching most of them twice would: most files of a search do not match.
struct Searchers {
    first: Searcher,
    counting: Searcher,
}

impl Looker<'_> {
    fn searcher(&self) -> Searchers {
        let build = |line_number| {
            SearcherBuilder::new()
                .binary_detection(BinaryDetection::quit(0))
                .line_number(line_number)
                .heap_limit(Some(HEAP_LIMIT))
                .build()
        };
        Searchers {
            first: build(false),
            counting: build(true),
        }
    }

    /// Searches the file at `rel`, for the results after `taken` matches.
    fn look(&self, searchers: &mut Searchers, rel: &RelPath, taken: usize) -> Looked {
        if self.cx.should_stop() {
            return Looked::Stopped;
        }
        // Opened through the workspace, not by the path the walk saw.
        let Ok(file) = self.workspace.open_file(rel) else {
            return Looked::Unreadable;
        };
        if file.len > MAX_FILE_BYTES {
            return Looked::Large;
        }
        // The first search stops at the first matching line; a file without one is done.
        match self.search(&mut searchers.first, &file.file, 1) {
            Looked::Lines(lines) if !lines.is_empty() => {}
            other => return other,
        }
        // The same open file, read again from its start: what was found there is what the
        // lines are counted in, whatever became of the path since.
        if (&file.file).seek(io::SeekFrom::Start(0)).is_err() {
            return Looked::Failed;
        }
        // One more than fits, to know whether anything was left out.
        let room = self.max_results.saturating_sub(taken) + 1;
        self.search(&mut searchers.counting, &file.file, room)
    }

    /// Searches `file` from where it is read to its end, for at most `room` matching lines.
    fn search(&self, searcher: &mut Searcher, file: &std::fs::File, room: usize) -> Looked {
        let mut sink = FileSink {
            room,
            lines: Vec::new(),
            binary: false,
            stopped: false,
            cx: self.cx,
        };
        if searcher
            .search_file(&self.matcher, file, &mut sink)
            .is_err()
        {
            return Looked::Failed;
        }
        if sink.stopped {
            Looked::Stopped
        } else if sink.binary {
            Looked::Binary
        } else {
            Looked::Lines(sink.lines)
        }
    }
}

/// The results of one search, as they add up.
struct Search<'a> {
    max_results: usize,
    /// Escaped bytes the matches may take, and have taken.
    budget: usize,
    used: usize,
    matches: Vec<Value>,
    files_searched: usize,
    skipped_large: usize,
    skipped_unreadable: usize,
    skipped_sensitive: usize,
    lines_cut: bool,
    truncated: bool,
    cx: &'a ExecContext,
}

impl Search<'_> {
    /// Adds what was found in the file at `rel`; breaks when no more matches fit.
    fn take(&mut self, rel: &RelPath, looked: Looked) -> Result<ControlFlow<()>, ToolError> {
        let lines = match looked {
            Looked::Stopped => return Err(stopped(self.cx)),
            Looked::Unreadable => {
                // Not this search's business, but not silently either.
                self.skipped_unreadable += 1;
                return Ok(ControlFlow::Continue(()));
            }
            Looked::Large => {
                self.skipped_large += 1;
                return Ok(ControlFlow::Continue(()));
            }
            Looked::Failed => {
                self.files_searched += 1;
                self.skipped_unreadable += 1;
                return Ok(ControlFlow::Continue(()));
            }
            Looked::Binary => {
                self.files_searched += 1;
                return Ok(ControlFlow::Continue(()));
            }
            Looked::Lines(lines) => lines,
        };
        self.files_searched += 1;
        for (line, text, cut) in lines {
            let cost = json_len(rel.as_str()) + json_len(&text) + 40;
            if self.matches.len() == self.max_results || self.used + cost > self.budget {
                self.truncated = true;
                return Ok(ControlFlow::Break(()));
            }
            self.used += cost;
            self.lines_cut |= cut;
            self.matches
                .push(json!({ "path": rel.as_str(), "line": line, "text": text }));
        }
        Ok(ControlFlow::Continue(()))
    }

    fn finish(self, arguments: &SearchArgs) -> ToolOutput {
        let output = json!({
            "pattern": arguments.pattern,
            "matches": self.matches,
            "files_searched": self.files_searched,
            "sensitive_files_skipped": self.skipped_sensitive,
            "truncated": self.truncated,
        });
        let mut output = ToolOutput::new(output).truncated(self.truncated);
        if self.skipped_large > 0 {
            output.unknowns.push(format!(
                "{} file(s) larger than {MAX_FILE_BYTES} bytes were not searched",
                self.skipped_large
            ));
        }
        if self.skipped_unreadable > 0 {
            output.unknowns.push(format!(
                "{} file(s) or entries could not be read and were not searched",
                self.skipped_unreadable
            ));
        }
        if self.lines_cut {
            output.unknowns.push(format!(
                "some matching lines were cut to {MAX_LINE_CHARS} characters"
            ));
        }
        output
    }
}

/// Collects one file's matching lines, so that a file found to be binary can be dropped whole.
struct FileSink<'a> {
    room: usize,
    /// Line number, text, whether the text was cut.
    lines: Vec<(u64, String, bool)>,
    binary: bool,
    stopped: bool,
    cx: &'a ExecContext,
}

impl Sink for FileSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, found: &SinkMatch<'_>) -> Result<bool, io::Error> {
        if self.cx.should_stop() {
            self.stopped = true;
            return Ok(false);
        }
        let first = found.line_number().unwrap_or(0);
        for (i, line) in found.lines().enumerate() {
            if self.lines.len() >= self.room {
                return Ok(false);
            }
            let text = String::from_utf8_lossy(line);
            let text = text.trim_end_matches(['\n', '\r']);
            let cut = text.chars().count() > MAX_LINE_CHARS;
            let text: String = text.chars().take(MAX_LINE_CHARS).collect();
            self.lines
                .push((first + u64::try_from(i).unwrap_or(0), text, cut));
        }
        Ok(self.lines.len() < self.room)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regex_errors_fit_on_one_line() {
        let arguments: SearchArgs =
            serde_json::from_str(r#"{"pattern": "(unclosed", "regex": true}"#).unwrap();
        let error = SearchText::matcher(&arguments).unwrap_err().to_string();
        assert!(!error.contains('\n'), "{error}");
        assert!(error.contains("unclosed"), "{error}");
        let literal: SearchArgs = serde_json::from_str(r#"{"pattern": "(unclosed"}"#).unwrap();
        assert!(SearchText::matcher(&literal).is_ok());
    }
}
