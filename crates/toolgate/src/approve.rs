//! Approval at the command line: a person at their own terminal who asked to be asked, or
//! nobody.
//!
//! The prompt is off unless `toolgate call --ask` turns it on. It cannot tell a person from a
//! program: anything that drives a terminal — `script`, `expect`, `tmux send-keys`, an agent
//! given a pseudo-terminal — can type `y` into it. So without `--ask` a call that needs
//! approval is refused with `approval_required` and pointed at the approval console of
//! `toolgate serve`, the channel a model's calls cannot reach; and with `--ask`, standard
//! input and standard error must both be terminals, or nobody is asked either.
//!
//! What the prompt shows goes through [`toolgate_core::visible::mark_invisible`], so a
//! bidirectional control, a zero-width character or an escape sequence in the arguments or
//! the preview is printed as its `<U+XXXX>` mark and cannot hide or rewrite what is shown.

use std::io::{BufRead, IsTerminal, Write};

use toolgate_core::visible::mark_invisible;
use toolgate_core::{ApprovalBroker, ApprovalDecision, ApprovalRequest};

use crate::terminal::{listed_or, visible};

/// Why nobody was asked when the prompt is off; the rejection's message carries it, and its
/// hint says what else would allow the call.
pub const PROMPT_OFF: &str = "`toolgate call` asks nobody unless `--ask` is given at a terminal";

/// Whether the person running `toolgate call` asked to be asked at the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prompt {
    /// `--ask`: ask on the terminal, when standard input and standard error are one.
    Ask,
    /// Ask nobody: every call that needs approval is refused.
    Off,
}

/// Asks on the controlling terminal when the prompt is on and there is one.
#[derive(Debug)]
pub struct TerminalBroker {
    prompt: Prompt,
    interactive: bool,
}

impl TerminalBroker {
    pub fn new(prompt: Prompt) -> Self {
        TerminalBroker {
            prompt,
            interactive: std::io::stdin().is_terminal() && std::io::stderr().is_terminal(),
        }
    }
}

impl ApprovalBroker for TerminalBroker {
    fn ask(&self, request: &ApprovalRequest) -> ApprovalDecision {
        if self.prompt == Prompt::Off {
            return ApprovalDecision::Unanswered {
                reason: PROMPT_OFF.to_owned(),
            };
        }
        if !self.interactive {
            return ApprovalDecision::Unanswered {
                reason: "standard input or standard error is not a terminal".to_owned(),
            };
        }
        let arguments = serde_json::to_string_pretty(&request.arguments).unwrap_or_default();
        let resources: Vec<String> = request.resources.iter().map(ToString::to_string).collect();
        let mut shown = format!(
            "\ntoolgate: approval needed\n  tool:      {} {}\n  effect:    {}\n  actor:     {} ({})\n  resources: {}\n  arguments: {}\n",
            request.tool,
            request.version,
            request.effect,
            request.actor,
            request.surface,
            listed_or(&resources, "none"),
            arguments.replace('\n', "\n             "),
        );
        if let Some(preview) = &request.preview {
            shown.push_str(preview);
            shown.push('\n');
        }
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{}", visible(&mark_invisible(&shown)));
        let _ = write!(err, "Allow this call once? [y/N] ");
        let _ = err.flush();
        let mut answer = String::new();
        if std::io::stdin().lock().read_line(&mut answer).is_err() {
            return ApprovalDecision::Unanswered {
                reason: "could not read the answer".to_owned(),
            };
        }
        if matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
            ApprovalDecision::AllowOnce
        } else {
            ApprovalDecision::Reject {
                reason: "refused at the terminal".to_owned(),
            }
        }
    }

    /// False when nobody will be asked, so that the pipeline refuses the call as one no one
    /// can approve here rather than as one that waited for a person.
    fn can_allow(&self) -> bool {
        self.prompt == Prompt::Ask && self.interactive
    }
}
