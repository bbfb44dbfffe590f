//! `toolgate tools admit|diff|pin|discover`, and the upstream part of `tools list
//! --candidates`.
//!
//! `admit`, `diff`, `pin` and `discover` start the upstreams they need, list their tools, and
//! stop them. `tools list` and `check` start nothing: they know an upstream's admitted tools
//! from their pins, and say that its own list is not known. `admit` and `pin` rewrite the
//! configuration file with `toml_edit`, so the operator's comments, order and formatting
//! survive; the new text is loaded again, with every check, before it replaces the old.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{Context as _, anyhow, bail};
use serde_json::{Value, json};
use toolgate_core::descriptor_lint::{self, Flag};
use toolgate_core::{Descriptor, EffectClass};
use toolgate_upstream::config::check_tool_name;
use toolgate_upstream::{
    Admission, Endpoint, PinState, UpstreamSpec, UpstreamStatus, Upstreams, namespaced, pin_of,
    pin_state,
};

use crate::settings::Settings;
use crate::terminal::{errln, listed_or, out, outln};

/// One line of the upstream listing.
struct Row {
    name: String,
    upstream: String,
    tool: String,
    state: &'static str,
    hints: Vec<String>,
    digest: String,
    /// What the admission lint found in the descriptor shown (informative only).
    flags: Vec<Flag>,
}

/// The names a descriptor of upstream `own` might aim at besides its own upstream's: the
/// other upstreams, the tools they admit (as listed and as admitted), the tools they list
/// (`statuses`, when they were started), and `also` (the gate's own tools, when it has them).
fn others(
    own: &str,
    specs: &[UpstreamSpec],
    statuses: Option<&[UpstreamStatus]>,
    also: &[String],
) -> Vec<String> {
    let mut names = also.to_vec();
    for (index, spec) in specs.iter().enumerate() {
        if spec.name == own {
            continue;
        }
        names.push(spec.name.clone());
        for admission in &spec.admitted {
            names.push(admission.tool.clone());
            names.push(admission.entry.name.clone());
        }
        let listed = statuses
            .and_then(|s| s.get(index))
            .and_then(|s| s.tools.as_ref());
        names.extend(listed.into_iter().flatten().map(|d| d.name.clone()));
    }
    // The gate's tools include this upstream's own admissions.
    let prefix = format!("{own}__");
    let own_names: Vec<&str> = specs
        .iter()
        .filter(|spec| spec.name == own)
        .flat_map(|spec| spec.admitted.iter())
        .map(|admission| admission.entry.name.as_str())
        .collect();
    names.retain(|name| !name.starts_with(&prefix) && !own_names.contains(&name.as_str()));
    names.sort();
    names.dedup();
    names
}

/// The admission lint's flags of every admitted upstream tool's pinned descriptor — what a
/// call to it is checked against — by its admitted name, for the approval console's cards.
pub(crate) fn pinned_flags(gate: &crate::gate::Gate) -> BTreeMap<String, Vec<Flag>> {
    let own: Vec<String> = gate
        .registry
        .tools()
        .map(|tool| tool.descriptor().name.clone())
        .collect();
    let specs = &gate.settings.upstreams;
    let mut flags = BTreeMap::new();
    for spec in specs {
        let others = others(&spec.name, specs, None, &own);
        for admission in &spec.admitted {
            flags.insert(
                admission.entry.name.clone(),
                descriptor_lint::lint(&admission.pinned, &others),
            );
        }
    }
    flags
}

/// The admission lint's flags as JSON: `[{"rule", "kind", "at", "excerpt", "explanation"}]`.
fn flags_json(flags: &[Flag]) -> Value {
    serde_json::to_value(flags).unwrap_or_else(|_| json!([]))
}

/// The admission lint's flags, one indented line each, after what they are about. `pinned`
/// are the flags the pinned descriptor had: a flag it did not have is marked new.
fn print_flags(flags: &[Flag], pinned: Option<&[Flag]>) {
    if flags.is_empty() {
        return;
    }
    outln!(
        "  descriptor flags ({}; they inform, nothing is refused for them):",
        flags.len()
    );
    for flag in flags {
        let new = pinned.is_some_and(|pinned| {
            !pinned
                .iter()
                .any(|p| p.rule == flag.rule && p.at == flag.at)
        });
        outln!("    {}{}", if new { "new: " } else { "" }, flag.line());
    }
}

/// The rows of `specs`; `statuses` is what each running upstream reported, `None` when the
/// upstreams were not started (then only the admissions are known, from their pins).
fn rows(specs: &[UpstreamSpec], statuses: Option<&[UpstreamStatus]>, also: &[String]) -> Vec<Row> {
    let mut rows = Vec::new();
    for (index, spec) in specs.iter().enumerate() {
        let others = others(&spec.name, specs, statuses, also);
        // Linted when discovered; `tools list` shows the pins as they are.
        let lint = |descriptor: &Descriptor| match statuses {
            Some(_) => descriptor_lint::lint(descriptor, &others),
            None => Vec::new(),
        };
        let status = statuses.and_then(|s| s.get(index));
        let listed = status.and_then(|s| s.tools.as_ref());
        for admission in &spec.admitted {
            let current = listed.map(|tools| tools.iter().find(|d| d.name == admission.tool));
            let state = match pin_state(admission, current) {
                PinState::Current if status.is_none() => "admitted (upstream not started)",
                PinState::Current if listed.is_none() => "admitted (upstream not reached)",
                PinState::Current => "admitted",
                PinState::Stale => "stale",
                PinState::Missing => "missing",
            };
            let shown = current.flatten().unwrap_or(&admission.pinned);
            rows.push(Row {
                name: admission.entry.name.clone(),
                upstream: spec.name.clone(),
                tool: admission.tool.clone(),
                state,
                hints: toolgate_upstream::hints(shown),
                digest: shown.digest().to_string(),
                flags: lint(shown),
            });
        }
        for descriptor in listed.into_iter().flatten() {
            if spec.admitted.iter().any(|a| a.tool == descriptor.name) {
                continue;
            }
            rows.push(Row {
                name: namespaced(&spec.name, &descriptor.name),
                upstream: spec.name.clone(),
                tool: descriptor.name.clone(),
                state: "candidate",
                hints: toolgate_upstream::hints(descriptor),
                digest: descriptor.digest().to_string(),
                flags: lint(descriptor),
            });
        }
    }
    rows
}

/// The rows as JSON; `discovered` adds each one's `flags`, which only a listing of the
/// running upstreams has.
fn rows_json(rows: Vec<Row>, discovered: bool) -> Vec<Value> {
    rows.into_iter()
        .map(|r| {
            let mut row = json!({
                "name": r.name, "upstream": r.upstream, "tool": r.tool, "state": r.state,
                "hints": r.hints, "digest": r.digest,
            });
            if discovered && let Some(fields) = row.as_object_mut() {
                fields.insert("flags".to_owned(), flags_json(&r.flags));
            }
            row
        })
        .collect()
}

fn print_rows(rows: Vec<Row>) {
    for row in rows {
        outln!(
            "{:<32} {:<10} upstream {} tool {} {} hints: {}",
            row.name,
            row.state,
            row.upstream,
            row.tool,
            row.digest,
            listed_or(&row.hints, "none")
        );
        print_flags(&row.flags, None);
    }
}

/// Why `tools list` shows no upstream's own list.
const NOT_STARTED: &str =
    "not started: `toolgate tools list` starts nothing; `toolgate tools discover` lists its tools";

/// The upstreams as configured, started by nobody, for `tools list --candidates --json`: each
/// server, and the admitted tools as their pins say.
pub fn configured_json(specs: &[UpstreamSpec]) -> Value {
    let servers: Vec<Value> = specs
        .iter()
        .map(|spec| json!({"name": spec.name, "started": false, "reason": NOT_STARTED}))
        .collect();
    json!({"servers": servers, "tools": rows_json(rows(specs, None, &[]), false)})
}

/// [`configured_json`] as a table.
pub fn print_configured(specs: &[UpstreamSpec]) {
    for spec in specs {
        outln!("upstream {}: {NOT_STARTED}", spec.name);
    }
    print_rows(rows(specs, None, &[]));
}

/// The running upstreams' tools and their states, for `tools discover --json`.
pub fn listing_json(upstreams: &Upstreams, also: &[String]) -> Value {
    let specs: Vec<UpstreamSpec> = upstreams.specs().cloned().collect();
    let statuses = upstreams.statuses();
    let servers: Vec<Value> = statuses.iter().map(status_json).collect();
    json!({"servers": servers, "tools": rows_json(rows(&specs, Some(&statuses), also), true)})
}

fn status_json(status: &UpstreamStatus) -> Value {
    json!({
        "name": status.name,
        "connected": status.connected,
        "restarts": status.restarts,
        "malformed": status.malformed,
        "events": status.events,
    })
}

/// The running upstreams' tools and their states, as a table.
pub fn print_listing(upstreams: &Upstreams, also: &[String]) {
    let specs: Vec<UpstreamSpec> = upstreams.specs().cloned().collect();
    let statuses = upstreams.statuses();
    for status in &statuses {
        let last = status.events.back().map_or("", String::as_str);
        outln!(
            "upstream {}: {} ({last})",
            status.name,
            if status.connected {
                "running"
            } else {
                "not running"
            }
        );
    }
    print_rows(rows(&specs, Some(&statuses), also));
}

/// `toolgate tools discover`: starts every upstream, waits for its first tool list, prints
/// what each serves against the admissions, and stops them.
pub fn discover(config: Option<&Path>, as_json: bool) -> anyhow::Result<u8> {
    let settings = Arc::new(Settings::load(config)?);
    // No workspace is served: the current directory (often `$HOME`, which holds the
    // programs of nvm, pipx or cargo) is not taken for one a hook or upstream runs in.
    // `serve`, `call` and `check` judge the files an upstream runs against theirs.
    let workspace = crate::gate::open_workspace(Path::new("."))?;
    let gate = crate::gate::Gate::listed(settings, workspace)?.start()?;
    let Some(upstreams) = &gate.upstreams else {
        if as_json {
            crate::terminal::write_out(
                &crate::terminal::json_line(&json!({"servers": [], "tools": []}))?,
                true,
            );
        } else {
            outln!("no upstream is configured");
        }
        return Ok(0);
    };
    // A descriptor that names one of toolgate's own tools is flagged too.
    let own: Vec<String> = gate
        .registry
        .tools()
        .map(|tool| tool.descriptor().name.clone())
        .collect();
    if as_json {
        crate::terminal::write_out(
            &crate::terminal::json(&listing_json(upstreams, &own))?,
            true,
        );
    } else {
        print_listing(upstreams, &own);
    }
    Ok(0)
}

/// Each upstream's sandbox in words, for `toolgate sandbox check`: its name and one line per
/// rule (a `url` upstream is not a process toolgate starts, and says so).
pub(crate) fn sandboxes(settings: &Settings) -> Vec<(String, Vec<String>)> {
    let here = std::env::current_dir().unwrap_or_default();
    settings
        .upstreams
        .iter()
        .map(|spec| {
            let lines = match &spec.endpoint {
                Endpoint::Http { url } => vec![format!(
                    "not a process toolgate starts: reached at {url}, unconfined by toolgate"
                )],
                Endpoint::Command { .. } => spec
                    .confinement
                    .describe(&spec.sandbox, spec.cwd.as_deref().unwrap_or(&here)),
            };
            (spec.name.clone(), lines)
        })
        .collect()
}

/// [`sandboxes`] for `toolgate sandbox check --json`: `[{"name", "sandbox": [lines]}]`.
pub(crate) fn sandboxes_json(settings: &Settings) -> Value {
    Value::Array(
        sandboxes(settings)
            .into_iter()
            .map(|(name, lines)| json!({"name": name, "sandbox": lines}))
            .collect(),
    )
}

/// [`sandboxes`] for `toolgate sandbox check`, as indented lines.
pub(crate) fn print_sandboxes(settings: &Settings) {
    let sandboxes = sandboxes(settings);
    if sandboxes.is_empty() {
        return;
    }
    outln!("upstreams:");
    for (name, lines) in sandboxes {
        outln!("  {name}:");
        for line in lines {
            outln!("    {line}");
        }
    }
}

/// The configuration file that admissions are written to.
fn config_file(explicit: Option<&Path>) -> anyhow::Result<(Settings, PathBuf)> {
    let settings = Settings::load(explicit)?;
    let path = settings
        .path()
        .map(Path::to_path_buf)
        .ok_or_else(|| anyhow!("no configuration file; pass `--config FILE`"))?;
    Ok((settings, path))
}

/// Starts the upstreams `specs` describe, with the watchdog that ends their process trees
/// should toolgate be killed (see [`crate::serve::watchdog`]). An upstream stopped without
/// everything it started known to be gone is said on standard error, whatever the command.
pub(crate) fn start_upstreams(specs: Vec<UpstreamSpec>) -> anyhow::Result<Upstreams> {
    let upstreams = Upstreams::start_watched(specs, Some(crate::serve::watchdog()?))?;
    upstreams.on_unended(Arc::new(|unended: &str| errln!("toolgate: {unended}")));
    Ok(upstreams)
}

/// Starts one upstream and waits for its tool list. No workspace is served here, so the
/// current directory is not taken for one (see [`discover`]).
fn listed(spec: UpstreamSpec) -> anyhow::Result<(Upstreams, Vec<Descriptor>)> {
    let name = spec.name.clone();
    let upstreams = start_upstreams(vec![spec])?;
    upstreams.wait_started();
    let status = upstreams.statuses().into_iter().next().unwrap_or_default();
    let Some(tools) = status.tools else {
        let last = status.events.back().cloned().unwrap_or_default();
        bail!("upstream `{name}` did not list its tools: {last}");
    };
    Ok((upstreams, tools))
}

pub fn admit(
    config: Option<&Path>,
    upstream: &str,
    tool: &str,
    effect: Option<EffectClass>,
    name: Option<String>,
) -> anyhow::Result<u8> {
    let (settings, path) = config_file(config)?;
    let settings = Arc::new(settings);
    let specs = settings.upstreams.clone();
    let others = others(upstream, &specs, None, &gate_tool_names(&settings));
    let Some(index) = specs.iter().position(|s| s.name == upstream) else {
        let known: Vec<String> = specs.iter().map(|s| format!("`{}`", s.name)).collect();
        bail!(
            "no upstream `{upstream}` in `{}`; upstreams: {}",
            path.display(),
            listed_or(&known, "none")
        );
    };
    let spec = specs
        .into_iter()
        .nth(index)
        .ok_or_else(|| anyhow!("upstream `{upstream}` vanished"))?;
    let name = name.unwrap_or_else(|| namespaced(upstream, tool));
    check_tool_name(&name)?;
    if let Some(existing) = spec
        .admitted
        .iter()
        .find(|a| a.tool == tool || a.entry.name == name)
    {
        bail!(
            "`{}` is already admitted as `{}`; review changes with `toolgate tools diff {}`",
            existing.tool,
            existing.entry.name,
            existing.entry.name
        );
    }
    let (_running, tools) = listed(spec)?;
    let Some(descriptor) = tools.iter().find(|d| d.name == tool) else {
        let known: Vec<String> = tools.iter().map(|d| format!("`{}`", d.name)).collect();
        bail!(
            "upstream `{upstream}` has no tool `{tool}`; it lists: {}",
            known.join(", ")
        );
    };
    let (digest, pinned) = pin_of(descriptor);
    let mut document = read_document(&path)?;
    let table = upstream_table(&mut document, index)?;
    let tools_item = table
        .entry("tool")
        .or_insert(toml_edit::Item::ArrayOfTables(
            toml_edit::ArrayOfTables::new(),
        ));
    let admitted = tools_item
        .as_array_of_tables_mut()
        .ok_or_else(|| anyhow!("`tool` of upstream `{upstream}` is not an array of tables"))?;
    let mut entry = toml_edit::Table::new();
    entry.insert("tool", toml_edit::value(tool));
    if name != namespaced(upstream, tool) {
        entry.insert("name", toml_edit::value(name.as_str()));
    }
    if let Some(effect) = effect {
        entry.insert("effect", toml_edit::value(effect.as_str()));
    }
    entry.insert("digest", toml_edit::value(digest.as_str()));
    entry.insert("pinned", toml_edit::value(pinned));
    admitted.push(entry);
    write_document(&path, &document)?;
    if let Err(e) = toolgate_core::ToolSchema::compile(
        &descriptor.input_schema,
        &toolgate_core::SchemaBounds::default(),
    ) {
        errln!(
            "toolgate: warning: the input schema of `{tool}` does not compile ({e}); `{name}` stays unavailable, since it is never called unvalidated"
        );
    }
    let hints = toolgate_upstream::hints(descriptor);
    outln!(
        "admitted `{name}` (upstream `{upstream}`, tool `{tool}`), effect {}, pinned {digest}",
        effect.unwrap_or(EffectClass::Irreversible)
    );
    if !hints.is_empty() {
        outln!(
            "upstream hints (not used by toolgate): {}",
            hints.join(", ")
        );
    }
    print_flags(&descriptor_lint::lint(descriptor, &others), None);
    Ok(0)
}

/// The names of the tools the gate of `settings` registers without starting anything (the
/// builtins, the admitted upstream tools), for the lint's `names-other-tool`; none when no
/// gate can be built here.
fn gate_tool_names(settings: &Arc<Settings>) -> Vec<String> {
    let Ok(workspace) = crate::gate::open_workspace(Path::new(".")) else {
        return Vec::new();
    };
    match crate::gate::Gate::listed(Arc::clone(settings), workspace) {
        Ok(gate) => gate
            .registry
            .tools()
            .map(|tool| tool.descriptor().name.clone())
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// The admission lint's flags of `current` against those of `admission`'s pin.
fn print_flags_since_pin(settings: &Arc<Settings>, admission: &Admission, current: &Descriptor) {
    let own = gate_tool_names(settings);
    let others = others(&admission.upstream, &settings.upstreams, None, &own);
    let pinned = descriptor_lint::lint(&admission.pinned, &others);
    print_flags(&descriptor_lint::lint(current, &others), Some(&pinned));
}

/// The admission named `name`, with its upstream's index in the file and the descriptor the
/// upstream serves now.
fn admitted(
    settings: &Settings,
    name: &str,
) -> anyhow::Result<(usize, Admission, Option<Descriptor>, Upstreams)> {
    let specs = settings.upstreams.clone();
    let found = specs.iter().enumerate().find_map(|(index, spec)| {
        spec.admitted
            .iter()
            .find(|a| a.entry.name == name)
            .map(|a| (index, a.clone()))
    });
    let Some((index, admission)) = found else {
        let known: Vec<String> = specs
            .iter()
            .flat_map(|s| s.admitted.iter().map(|a| format!("`{}`", a.entry.name)))
            .collect();
        bail!(
            "no admitted upstream tool `{name}`; admitted: {}",
            listed_or(&known, "none")
        );
    };
    let spec = specs
        .into_iter()
        .nth(index)
        .ok_or_else(|| anyhow!("upstream of `{name}` vanished"))?;
    let (running, tools) = listed(spec)?;
    let current = tools.into_iter().find(|d| d.name == admission.tool);
    Ok((index, admission, current, running))
}

pub fn diff(config: Option<&Path>, name: &str) -> anyhow::Result<u8> {
    let settings = Arc::new(Settings::load(config)?);
    let (_, admission, current, _running) = admitted(&settings, name)?;
    let Some(current) = current else {
        outln!(
            "upstream `{}` no longer lists `{}`; `{name}` is unavailable",
            admission.upstream,
            admission.tool
        );
        return Ok(0);
    };
    let text = toolgate_upstream::diff(&admission.pinned, &current);
    if text.is_empty() {
        outln!("`{name}` matches its pin {}", admission.digest);
    } else {
        outln!("pinned  {}\ncurrent {}", admission.digest, current.digest());
        out!("{text}");
    }
    print_flags_since_pin(&settings, &admission, &current);
    Ok(0)
}

pub fn pin(config: Option<&Path>, name: &str, reviewed: Option<&str>) -> anyhow::Result<u8> {
    let (settings, path) = config_file(config)?;
    let settings = Arc::new(settings);
    let (index, admission, current, _running) = admitted(&settings, name)?;
    let Some(current) = current else {
        bail!(
            "upstream `{}` no longer lists `{}`; there is nothing to pin",
            admission.upstream,
            admission.tool
        );
    };
    if let Some(reviewed) = reviewed
        && current.digest().to_string() != reviewed
    {
        bail!(
            "upstream `{}` now serves `{}` with digest {}, not the reviewed {reviewed}; run `toolgate tools diff {name}` again",
            admission.upstream,
            admission.tool,
            current.digest()
        );
    }
    if current.digest() == admission.digest {
        outln!("`{name}` already matches its pin {}", admission.digest);
        return Ok(0);
    }
    // What is pinned is what the upstream serves at this moment, which may differ from what an
    // earlier `tools diff` showed; the change being accepted is printed so that the operator
    // sees exactly what was pinned.
    outln!("pinned  {}\ncurrent {}", admission.digest, current.digest());
    out!("{}", toolgate_upstream::diff(&admission.pinned, &current));
    print_flags_since_pin(&settings, &admission, &current);
    let (digest, pinned) = pin_of(&current);
    let mut document = read_document(&path)?;
    let table = upstream_table(&mut document, index)?;
    let entry = table
        .get_mut("tool")
        .and_then(toml_edit::Item::as_array_of_tables_mut)
        .and_then(|tools| {
            tools.iter_mut().find(|t| {
                let tool = t.get("tool").and_then(toml_edit::Item::as_str);
                let named = t.get("name").and_then(toml_edit::Item::as_str);
                named == Some(name)
                    || (named.is_none()
                        && tool.is_some_and(|tool| namespaced(&admission.upstream, tool) == name))
            })
        })
        .ok_or_else(|| anyhow!("cannot find the entry of `{name}` in `{}`", path.display()))?;
    entry.insert("digest", toml_edit::value(digest.as_str()));
    entry.insert("pinned", toml_edit::value(pinned));
    write_document(&path, &document)?;
    outln!("re-pinned `{name}`: {} → {digest}", admission.digest);
    Ok(0)
}

fn read_document(path: &Path) -> anyhow::Result<toml_edit::DocumentMut> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read `{}`", path.display()))?;
    text.parse()
        .with_context(|| format!("cannot edit `{}`", path.display()))
}

/// The `index`-th `[[upstream]]` table.
fn upstream_table(
    document: &mut toml_edit::DocumentMut,
    index: usize,
) -> anyhow::Result<&mut toml_edit::Table> {
    document
        .get_mut("upstream")
        .and_then(toml_edit::Item::as_array_of_tables_mut)
        .and_then(|upstreams| upstreams.get_mut(index))
        .ok_or_else(|| anyhow!("`[[upstream]]` number {} is not a table", index + 1))
}

/// Writes `document` to `path` if it still parses as a configuration, through a temporary
/// file renamed over the old one, so that a crash leaves one or the other.
fn write_document(path: &Path, document: &toml_edit::DocumentMut) -> anyhow::Result<()> {
    let text = document.to_string();
    Settings::parse(path, text.clone())
        .context("the edited configuration would not load; nothing was written")?;
    let temporary = path.with_extension("toml.toolgate-tmp");
    std::fs::write(&temporary, text)
        .with_context(|| format!("cannot write `{}`", temporary.display()))?;
    std::fs::rename(&temporary, path)
        .with_context(|| format!("cannot replace `{}`", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]

    use super::*;

    fn config(text: &str) -> Settings {
        Settings::parse(Path::new("/etc/toolgate/toolgate.toml"), text.to_owned()).unwrap()
    }

    #[test]
    fn each_upstream_sandbox_is_described_for_sandbox_check() {
        let config = config(
            "[[upstream]]\nname = \"fs\"\ncommand = [\"node\", \"fs.js\"]\ncwd = \"/srv\"\n\
             [upstream.sandbox]\nread = [\"docs\"]\nwrite = [\"/srv/out\"]\nnetwork = [\"api.example.com\"]\n\n\
             [[upstream]]\nname = \"plain\"\ncommand = [\"server\"]\ncwd = \"/srv/plain\"\n\n\
             [[upstream]]\nname = \"remote\"\nurl = \"https://mcp.example.com/mcp\"\n",
        );
        let sandboxes = sandboxes(&config);
        let names: Vec<&str> = sandboxes.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["fs", "plain", "remote"]);
        let fs = sandboxes[0].1.join("\n");
        if toolgate_sandbox::Sandbox::detect().check().is_ok() {
            assert!(
                fs.contains("read: the system but the deny list, and `/srv`, `/etc/toolgate/docs`"),
                "{fs}"
            );
            assert!(fs.contains("write: its private TMPDIR, `/srv/out`"), "{fs}");
            assert!(
                fs.contains("network: only through toolgate's proxy, to api.example.com"),
                "{fs}"
            );
            let plain = sandboxes[1].1.join("\n");
            assert!(plain.contains("write: its private TMPDIR\n"), "{plain}");
            assert!(plain.contains("network: none"), "{plain}");
        } else {
            assert!(fs.contains("sandbox_unavailable"), "{fs}");
        }
        assert!(sandboxes[2].1[0].contains("not a process toolgate starts"));
        let json = sandboxes_json(&config);
        assert_eq!(json[1]["name"], "plain");
    }

    #[test]
    fn dangerous_unconfined_leaves_upstreams_unconfined_too() {
        let config = config(
            "[sandbox]\nmode = \"dangerous-unconfined\"\n\n\
             [[upstream]]\nname = \"fs\"\ncommand = [\"server\"]\n",
        );
        let specs = &config.upstreams;
        assert!(specs[0].confinement.sandbox().is_none());
        let lines = sandboxes(&config);
        assert!(lines[0].1[0].contains("NONE"), "{lines:?}");
    }
}
