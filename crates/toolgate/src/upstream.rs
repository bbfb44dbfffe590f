//! `toolgate tools admit|diff|pin` and the upstream part of `tools list --candidates`.
//!
//! These commands start the upstreams they need, list their tools, and stop them. `admit` and
//! `pin` rewrite the configuration file with `toml_edit`, so the operator's comments, order and
//! formatting survive; the new text is parsed again before it replaces the old.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, anyhow, bail};
use serde_json::{Value, json};
use toolgate_core::{Descriptor, EffectClass};
use toolgate_sandbox::Limits;
use toolgate_upstream::config::check_tool_name;
use toolgate_upstream::{
    Admission, Endpoint, PinState, UpstreamConfinement, UpstreamSpec, UpstreamStatus, Upstreams,
    namespaced, pin_of, pin_state,
};

use crate::config::{Config, ConfigError};
use crate::gate::upstream_specs;

/// One line of the upstream listing.
struct Row {
    name: String,
    upstream: String,
    tool: String,
    state: &'static str,
    hints: Vec<String>,
    digest: String,
}

fn rows(upstreams: &Upstreams, specs: &[&UpstreamSpec]) -> Vec<Row> {
    let mut rows = Vec::new();
    for (spec, status) in specs.iter().zip(upstreams.statuses()) {
        for admission in &spec.admitted {
            let current = status
                .tools
                .as_ref()
                .map(|tools| tools.iter().find(|d| d.name == admission.tool));
            let state = match pin_state(admission, current) {
                PinState::Current if status.tools.is_none() => "admitted (upstream not reached)",
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
            });
        }
        for descriptor in status.tools.iter().flatten() {
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
            });
        }
    }
    rows
}

fn specs_of(upstreams: &Upstreams) -> Vec<UpstreamSpec> {
    upstreams.specs().cloned().collect()
}

/// The upstream tools and their states, for `tools list --candidates --json`.
pub fn listing_json(upstreams: &Upstreams) -> Value {
    let specs = specs_of(upstreams);
    let specs: Vec<&UpstreamSpec> = specs.iter().collect();
    let tools: Vec<Value> = rows(upstreams, &specs)
        .into_iter()
        .map(|r| {
            json!({
                "name": r.name, "upstream": r.upstream, "tool": r.tool, "state": r.state,
                "hints": r.hints, "digest": r.digest,
            })
        })
        .collect();
    let statuses: Vec<Value> = upstreams
        .statuses()
        .into_iter()
        .map(|s| status_json(&s))
        .collect();
    json!({"servers": statuses, "tools": tools})
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

/// The upstream tools and their states, as a table.
pub fn print_listing(upstreams: &Upstreams) {
    let specs = specs_of(upstreams);
    let specs: Vec<&UpstreamSpec> = specs.iter().collect();
    for status in upstreams.statuses() {
        let last = status.events.back().map_or("", String::as_str);
        println!(
            "upstream {}: {} ({last})",
            status.name,
            if status.connected {
                "running"
            } else {
                "not running"
            }
        );
    }
    for row in rows(upstreams, &specs) {
        println!(
            "{:<32} {:<10} upstream {} tool {} {} hints: {}",
            row.name,
            row.state,
            row.upstream,
            row.tool,
            row.digest,
            if row.hints.is_empty() {
                "none".to_owned()
            } else {
                row.hints.join(", ")
            }
        );
    }
}

/// How every upstream process is confined, from `[sandbox]`: its mode (`dangerous-unconfined`
/// leaves upstreams unconfined too), the deny list commands get (toolgate's own files, the
/// credential stores, the shared scratch places, the operator's `deny` and `allow`),
/// `dangerous_allow_unix_sockets`, `read`, the rlimits and the `resolve` pins of the proxies. Not
/// `write` nor `dangerous_unconfined_network`: those widen what commands reach, and an
/// upstream gets only what its own `[upstream.sandbox]` grants.
pub(crate) fn confinement(config: &Config) -> Result<UpstreamConfinement, ConfigError> {
    let commands = config.confinement()?;
    let Some(sandbox) = commands.sandbox() else {
        return Ok(UpstreamConfinement::dangerous_unconfined());
    };
    let mut confinement = UpstreamConfinement::new(*sandbox, commands.denied().clone());
    confinement.set_unix_sockets(commands.unix_sockets());
    for path in commands.read_paths() {
        confinement.add_readable(path.clone());
    }
    let limits = &config.file.sandbox.limits;
    confinement.set_limits(Limits {
        file_size: Some(
            limits
                .file_size_bytes
                .unwrap_or(crate::sandbox::DEFAULT_FILE_SIZE_BYTES),
        ),
        address_space: limits.address_space_bytes,
        processes: limits.processes,
        open_files: limits.open_files,
    });
    for (host, addresses) in &config.file.sandbox.resolve {
        confinement.pin(host, addresses.clone());
    }
    Ok(confinement)
}

/// Each upstream's sandbox in words, for `toolgate sandbox check`: its name and one line per
/// rule (a `url` upstream is not a process toolgate starts, and says so).
pub(crate) fn sandboxes(config: &Config) -> Result<Vec<(String, Vec<String>)>, ConfigError> {
    let specs = upstream_specs(config)?;
    let here = std::env::current_dir().unwrap_or_default();
    Ok(specs
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
        .collect())
}

/// [`sandboxes`] for `toolgate sandbox check --json`: `[{"name", "sandbox": [lines]}]`.
pub(crate) fn sandboxes_json(config: &Config) -> Result<Value, ConfigError> {
    Ok(Value::Array(
        sandboxes(config)?
            .into_iter()
            .map(|(name, lines)| json!({"name": name, "sandbox": lines}))
            .collect(),
    ))
}

/// [`sandboxes`] for `toolgate sandbox check`, as indented lines.
pub(crate) fn print_sandboxes(config: &Config) -> Result<(), ConfigError> {
    let sandboxes = sandboxes(config)?;
    if sandboxes.is_empty() {
        return Ok(());
    }
    println!("upstreams:");
    for (name, lines) in sandboxes {
        println!("  {name}:");
        for line in lines {
            println!("    {line}");
        }
    }
    Ok(())
}

/// The configuration file that admissions are written to.
fn config_file(explicit: Option<&Path>) -> anyhow::Result<(Config, PathBuf)> {
    let config = Config::load(explicit)?;
    let path = config
        .path
        .clone()
        .ok_or_else(|| anyhow!("no configuration file; pass `--config FILE`"))?;
    Ok((config, path))
}

/// Starts the upstreams `specs` describe, with the watchdog that kills their process groups
/// should toolgate be killed (see [`crate::serve::watchdog`]).
pub(crate) fn start_upstreams(specs: Vec<UpstreamSpec>) -> anyhow::Result<Upstreams> {
    Ok(Upstreams::start_watched(
        specs,
        Some(crate::serve::watchdog()?),
    )?)
}

/// Starts one upstream and waits for its tool list.
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
    let (config, path) = config_file(config)?;
    let specs = upstream_specs(&config)?;
    let Some(index) = specs.iter().position(|s| s.name == upstream) else {
        let known: Vec<String> = specs.iter().map(|s| format!("`{}`", s.name)).collect();
        bail!(
            "no upstream `{upstream}` in `{}`; upstreams: {}",
            path.display(),
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
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
        eprintln!(
            "toolgate: warning: the input schema of `{tool}` does not compile ({e}); `{name}` stays unavailable, since it is never called unvalidated"
        );
    }
    let hints = toolgate_upstream::hints(descriptor);
    println!(
        "admitted `{name}` (upstream `{upstream}`, tool `{tool}`), effect {}, pinned {digest}",
        effect.unwrap_or(EffectClass::Irreversible)
    );
    if !hints.is_empty() {
        println!(
            "upstream hints (not used by toolgate): {}",
            hints.join(", ")
        );
    }
    Ok(0)
}

/// The admission named `name`, with its upstream's index in the file and the descriptor the
/// upstream serves now.
fn admitted(
    config: &Config,
    name: &str,
) -> anyhow::Result<(usize, Admission, Option<Descriptor>, Upstreams)> {
    let specs = upstream_specs(config)?;
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
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
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
    let config = Config::load(config)?;
    let (_, admission, current, _running) = admitted(&config, name)?;
    let Some(current) = current else {
        println!(
            "upstream `{}` no longer lists `{}`; `{name}` is unavailable",
            admission.upstream, admission.tool
        );
        return Ok(0);
    };
    let text = toolgate_upstream::diff(&admission.pinned, &current);
    if text.is_empty() {
        println!("`{name}` matches its pin {}", admission.digest);
    } else {
        println!("pinned  {}\ncurrent {}", admission.digest, current.digest());
        print!("{text}");
    }
    Ok(0)
}

pub fn pin(config: Option<&Path>, name: &str, reviewed: Option<&str>) -> anyhow::Result<u8> {
    let (config, path) = config_file(config)?;
    let (index, admission, current, _running) = admitted(&config, name)?;
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
        println!("`{name}` already matches its pin {}", admission.digest);
        return Ok(0);
    }
    // What is pinned is what the upstream serves at this moment, which may differ from what an
    // earlier `tools diff` showed; the change being accepted is printed so that the operator
    // sees exactly what was pinned.
    println!("pinned  {}\ncurrent {}", admission.digest, current.digest());
    print!("{}", toolgate_upstream::diff(&admission.pinned, &current));
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
    println!("re-pinned `{name}`: {} → {digest}", admission.digest);
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
    Config::parse(path, text.clone())
        .and_then(|config| upstream_specs(&config))
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

    fn config(text: &str) -> Config {
        Config::parse(Path::new("/etc/toolgate/toolgate.toml"), text.to_owned()).unwrap()
    }

    #[test]
    fn each_upstream_sandbox_is_described_for_sandbox_check() {
        let config = config(
            "[[upstream]]\nname = \"fs\"\ncommand = [\"node\", \"fs.js\"]\ncwd = \"/srv\"\n\
             [upstream.sandbox]\nread = [\"docs\"]\nwrite = [\"/srv/out\"]\nnetwork = [\"api.example.com\"]\n\n\
             [[upstream]]\nname = \"plain\"\ncommand = [\"server\"]\ncwd = \"/srv/plain\"\n\n\
             [[upstream]]\nname = \"remote\"\nurl = \"https://mcp.example.com/mcp\"\n",
        );
        let sandboxes = sandboxes(&config).unwrap();
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
        let json = sandboxes_json(&config).unwrap();
        assert_eq!(json[1]["name"], "plain");
    }

    #[test]
    fn dangerous_unconfined_leaves_upstreams_unconfined_too() {
        let config = config(
            "[sandbox]\nmode = \"dangerous-unconfined\"\n\n\
             [[upstream]]\nname = \"fs\"\ncommand = [\"server\"]\n",
        );
        let specs = upstream_specs(&config).unwrap();
        assert!(specs[0].confinement.sandbox().is_none());
        let lines = sandboxes(&config).unwrap();
        assert!(lines[0].1[0].contains("NONE"), "{lines:?}");
    }
}
