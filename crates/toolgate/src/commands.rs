//! The commands of `toolgate` other than `serve`, `audit`, `sandbox` and the upstream
//! admissions: `call`, `explain`, `tools list` and `check`, and the dispatch of every command.

use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use serde_json::json;
use toolgate_core::{NormalizeBounds, RawArguments, RawCall, Status};
use toolgate_workspace::Workspace;

use crate::cli::{self, CallArgs, Cli, Command, ProposedCall, ToolsCommand};
use crate::gate::{Gate, open_workspace};
use crate::settings::{ConfigError, Settings};
use crate::terminal::{self, errln, outln};
use crate::{approve, audit, console, sandbox, serve, upstream};

/// The call completed.
pub const EXIT_COMPLETED: u8 = 0;
/// The tool failed.
pub const EXIT_FAILED: u8 = 1;
/// The call was rejected or denied.
pub const EXIT_REJECTED: u8 = 2;
/// Bad usage or configuration.
pub const EXIT_USAGE: u8 = 3;

/// Runs one parsed command line: its exit code, or the error that makes it exit 3.
pub fn run(cli: Cli) -> anyhow::Result<u8> {
    match cli.command {
        Command::Call(args) => call(&args),
        Command::Explain(args) => explain(&args),
        Command::Tools {
            command:
                ToolsCommand::List {
                    profile,
                    candidates,
                    json,
                    config,
                },
        } => tools_list(config.config.as_deref(), &profile, candidates, json),
        Command::Tools {
            command:
                ToolsCommand::Admit {
                    upstream,
                    tool,
                    effect,
                    name,
                    config,
                },
        } => upstream::admit(config.config.as_deref(), &upstream, &tool, effect, name),
        Command::Tools {
            command: ToolsCommand::Diff { name, config },
        } => upstream::diff(config.config.as_deref(), &name),
        Command::Tools {
            command: ToolsCommand::Discover { json, config },
        } => upstream::discover(config.config.as_deref(), json),
        Command::Tools {
            command:
                ToolsCommand::Pin {
                    name,
                    digest,
                    config,
                },
        } => upstream::pin(config.config.as_deref(), &name, digest.as_deref()),
        Command::Serve(args) => serve::serve(&args),
        Command::Console(args) => console::open(&args),
        Command::Check { config, workspace } => check(config.config.as_deref(), &workspace),
        Command::Trust(args) => crate::trust::command(&args),
        Command::Audit { command } => audit::run(&command),
        Command::Sandbox {
            command: cli::SandboxCommand::Check { json, config },
        } => sandbox::check(config.config.as_deref(), json),
        Command::UpstreamWatchdog => {
            toolgate_upstream::run_watchdog(std::io::stdin().lock());
            Ok(0)
        }
    }
}

fn raw_call(args: &ProposedCall, bounds: &NormalizeBounds) -> anyhow::Result<RawCall> {
    let arguments = if args.args == "-" {
        // Read one byte more than the bound, so that stage 1 sees the excess and rejects it
        // without toolgate holding an unbounded input in memory.
        let limit = u64::try_from(bounds.max_argument_bytes)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let mut text = String::new();
        std::io::stdin()
            .lock()
            .take(limit)
            .read_to_string(&mut text)
            .map_err(|e| anyhow::anyhow!("cannot read arguments from standard input: {e}"))?;
        text
    } else {
        args.args.clone()
    };
    Ok(RawCall {
        tool: args.tool.clone(),
        arguments: RawArguments::Text(arguments),
        surface: args.surface,
        actor: args.actor.clone(),
        profile: args.profile.clone(),
        request_id: None,
        client: None,
    })
}

fn call(CallArgs { call: args, ask }: &CallArgs) -> anyhow::Result<u8> {
    serve::watch_commands();
    // The outcome is redacted: the rules load while the call is set up and runs.
    std::thread::spawn(toolgate_core::redact::prepare);
    let workspace = open_workspace(&args.workspace)?;
    let settings = Arc::new(Settings::load_for(
        args.config.config.as_deref(),
        workspace.root(),
    )?);
    let gate =
        Gate::running(settings, Arc::clone(&workspace))?.with_audit_log(audit::Appending::Once)?;
    let prompt = if *ask {
        approve::Prompt::Ask
    } else {
        approve::Prompt::Off
    };
    let pipeline = gate.pipeline(&workspace, Arc::new(approve::TerminalBroker::new(prompt)));
    let outcome = pipeline.run(raw_call(args, &gate.settings.bounds)?);
    cli::print_call(&outcome, args.json)?;
    Ok(match outcome.status() {
        Status::Completed => EXIT_COMPLETED,
        Status::Failed => EXIT_FAILED,
        Status::Rejected => EXIT_REJECTED,
    })
}

fn explain(args: &ProposedCall) -> anyhow::Result<u8> {
    let workspace = open_workspace(&args.workspace)?;
    let settings = Arc::new(Settings::load_for(
        args.config.config.as_deref(),
        workspace.root(),
    )?);
    let gate = Gate::running(settings, Arc::clone(&workspace))?;
    // Explaining never asks anyone: the headless broker is never consulted by `explain`.
    let pipeline = gate.pipeline(&workspace, Arc::new(toolgate_core::HeadlessBroker));
    let reports = pipeline.explain(raw_call(args, &gate.settings.bounds)?);
    let rejected = reports.iter().any(|r| r.decision == "reject");
    if args.json {
        outln!("{}", terminal::json(&reports)?);
    } else {
        for report in &reports {
            outln!(
                "{:<10} {:<7} {}",
                report.stage.as_str(),
                report.decision,
                report.detail
            );
        }
    }
    Ok(if rejected {
        EXIT_REJECTED
    } else {
        EXIT_COMPLETED
    })
}

/// The registry as configured, over the current directory. Listing starts nothing: no
/// upstream, no command.
fn registry_for_listing(config: Option<&Path>) -> anyhow::Result<Gate> {
    registry_of(config, Path::new("."), Gate::listed)
}

/// The registry as configured over `workspace` by `gate` ([`Gate::configured`] or
/// [`Gate::listed`]), its project configuration applied as far as it is trusted. Starts
/// nothing.
fn registry_of(
    config: Option<&Path>,
    workspace: &Path,
    gate: fn(Arc<Settings>, Arc<Workspace>) -> Result<Gate, ConfigError>,
) -> anyhow::Result<Gate> {
    let workspace = open_workspace(workspace)?;
    let settings = Arc::new(Settings::load_for(config, workspace.root())?);
    Ok(gate(settings, workspace)?)
}

fn tools_list(
    config: Option<&Path>,
    profile: &str,
    candidates: bool,
    as_json: bool,
) -> anyhow::Result<u8> {
    let gate = registry_for_listing(config)?;
    let registry = &gate.registry;
    if !registry.profiles().contains(profile) {
        errln!(
            "toolgate: unknown profile `{profile}`; profiles: {}",
            registry
                .profiles()
                .into_iter()
                .collect::<Vec<_>>()
                .join(", ")
        );
        return Ok(EXIT_USAGE);
    }
    let visible: Vec<_> = registry.visible(profile).collect();
    let hidden: Vec<_> = registry
        .tools()
        .filter(|t| !visible.iter().any(|v| Arc::ptr_eq(v, t)))
        .collect();
    if as_json {
        let tool_json = |t: &toolgate_core::Tool, state: &str| {
            json!({
                "name": t.entry().name,
                "version": t.entry().version.to_string(),
                "state": state,
                "effect": t.entry().effect(),
                "description": t.description(),
                "inputSchema": t.descriptor().input_schema,
                "digest": t.digest(),
            })
        };
        let mut tools: Vec<_> = visible.iter().map(|t| tool_json(t, "visible")).collect();
        if candidates {
            tools.extend(
                hidden
                    .iter()
                    .map(|t| tool_json(t, hidden_state(t, profile))),
            );
            tools.extend(registry.candidates().iter().map(|d| {
                json!({"name": d.name, "state": "candidate", "description": d.description, "digest": d.digest()})
            }));
        }
        let mut listing = json!({ "profile": profile, "tools": tools });
        if candidates
            && !gate.settings.upstreams.is_empty()
            && let Some(listing) = listing.as_object_mut()
        {
            listing.insert(
                "upstreams".into(),
                upstream::configured_json(&gate.settings.upstreams),
            );
        }
        outln!("{}", terminal::json(&listing)?);
        return Ok(EXIT_COMPLETED);
    }
    let width = listing_width();
    for tool in &visible {
        let head = format!(
            "{:<14} {:<5} {:<13} ",
            tool.entry().name,
            tool.entry().version.to_string(),
            tool.entry().effect().as_str(),
        );
        outln!("{}", summary_lines(&head, tool.description(), width));
    }
    if candidates {
        for tool in &hidden {
            outln!(
                "{:<14} {:<5} {:<13} [{}]",
                tool.entry().name,
                tool.entry().version.to_string(),
                tool.entry().effect().as_str(),
                hidden_state(tool, profile)
            );
        }
        for descriptor in registry.candidates() {
            outln!(
                "{:<14} {:<5} {:<13} [candidate: no registry entry]",
                descriptor.name,
                "-",
                "-"
            );
        }
        upstream::print_configured(&gate.settings.upstreams);
    }
    Ok(EXIT_COMPLETED)
}

fn hidden_state(tool: &toolgate_core::Tool, profile: &str) -> &'static str {
    if !tool.entry().enabled {
        "disabled"
    } else if tool.is_stale() {
        "stale"
    } else if !tool.entry().profiles.contains(profile) {
        "not in profile"
    } else {
        "unavailable"
    }
}

/// The width `tools list` wraps its descriptions to: `COLUMNS` when set, else the width of the
/// terminal standard output is (100 columns if it does not say), else none, so that a pipe
/// gets one line a tool.
fn listing_width() -> Option<usize> {
    use std::io::IsTerminal as _;
    if let Some(columns) = std::env::var("COLUMNS")
        .ok()
        .and_then(|columns| columns.trim().parse().ok())
    {
        return Some(columns);
    }
    let stdout = std::io::stdout();
    if !stdout.is_terminal() {
        return None;
    }
    Some(
        rustix::termios::tcgetwinsize(&stdout)
            .ok()
            .map(|size| usize::from(size.ws_col))
            .filter(|columns| *columns > 0)
            .unwrap_or(100),
    )
}

/// `head` and the first sentence of `description` (its `tools list --json` has the whole
/// text), wrapped at spaces to `width` with the lines after the first indented under it.
fn summary_lines(head: &str, description: &str, width: Option<usize>) -> String {
    let line = description.lines().next().unwrap_or_default();
    let sentence = line
        .match_indices(". ")
        .next()
        .map_or(line, |(at, _)| line.get(..=at).unwrap_or(line));
    let Some(width) = width else {
        return format!("{head}{sentence}");
    };
    let indent = head.chars().count();
    // Too narrow a terminal to indent under: every line starts at the left edge.
    let (indent, room) = match width.checked_sub(indent) {
        Some(room) if room >= 20 => (indent, room),
        _ => (0, width.max(20)),
    };
    let mut text = head.to_owned();
    let mut used = 0;
    for word in sentence.split(' ') {
        let length = word.chars().count();
        if used > 0 && used + 1 + length > room {
            text.push('\n');
            text.push_str(&" ".repeat(indent));
            used = 0;
        } else if used > 0 {
            text.push(' ');
            used += 1;
        }
        text.push_str(word);
        used += length;
    }
    text
}

fn check(config: Option<&Path>, workspace: &Path) -> anyhow::Result<u8> {
    let gate = registry_of(config, workspace, Gate::configured)?;
    outln!("configuration: {}", gate.settings.display_path());
    if let Some(project) = &gate.settings.project {
        crate::trust::print_project(&crate::trust::view(project));
    }
    outln!("policies: {} loaded", gate.policy.len());
    for profile in gate.registry.profiles() {
        let names: Vec<&str> = gate
            .registry
            .visible(profile)
            .map(|t| t.entry().name.as_str())
            .collect();
        outln!(
            "profile {profile}: {}",
            terminal::listed_or(&names, "no tools")
        );
    }
    for upstream in &gate.settings.upstreams {
        outln!(
            "upstream {}: not started; its admitted tools count as their pins say (`toolgate tools discover` starts it)",
            upstream.name
        );
    }
    outln!("ok");
    Ok(EXIT_COMPLETED)
}

#[cfg(test)]
mod tests {
    use super::summary_lines;

    #[test]
    fn a_description_is_its_first_sentence_wrapped_under_its_head() {
        let description = "Show the state of the repository, like `git status`: the branch and \
                           every path that differs. Read-only: it changes nothing.\nMore.";
        assert_eq!(
            summary_lines("git_status  ", description, None),
            "git_status  Show the state of the repository, like `git status`: the branch and \
             every path that differs."
        );
        assert_eq!(
            summary_lines("git_status  ", description, Some(40)),
            "git_status  Show the state of the\n            repository, like `git\n            \
             status`: the branch and\n            every path that differs."
        );
        for line in summary_lines("git_status  ", description, Some(40)).lines() {
            assert!(line.chars().count() <= 40, "{line:?}");
        }
    }
}
