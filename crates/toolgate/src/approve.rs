//! Approval at the command line: a person at an interactive terminal, or nobody.
//!
//! When standard input is not a terminal — a script, a pipe, an agent running `toolgate`
//! through some shell — every approval is refused with `approval_required`. So an agent that
//! can run the binary still cannot approve its own calls.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use toolgate_core::{
    ApprovalBroker, ApprovalRequest, ApprovalResponse, GrantLedger, GrantScope, SystemClock,
};

/// How long an approval given at the prompt stays redeemable.
const GRANT_TTL: Duration = Duration::from_secs(60);

/// Asks on the controlling terminal when there is one.
#[derive(Debug)]
pub struct TerminalBroker {
    ledger: GrantLedger,
    interactive: bool,
}

impl TerminalBroker {
    pub fn new() -> Self {
        TerminalBroker {
            ledger: GrantLedger::new(Arc::new(SystemClock)),
            interactive: std::io::stdin().is_terminal() && std::io::stderr().is_terminal(),
        }
    }
}

impl ApprovalBroker for TerminalBroker {
    fn request(&self, request: &ApprovalRequest) -> ApprovalResponse {
        if !self.interactive {
            return ApprovalResponse::Unanswered {
                reason: "standard input is not a terminal, so nobody can be asked".to_owned(),
            };
        }
        let mut err = std::io::stderr().lock();
        let arguments = serde_json::to_string_pretty(&request.arguments).unwrap_or_default();
        let _ = writeln!(
            err,
            "\ntoolgate: approval needed\n  tool:      {} {}\n  effect:    {}\n  actor:     {} ({})\n  resources: {}\n  arguments: {}",
            request.tool,
            request.version,
            request.effect,
            request.actor,
            request.surface,
            if request.resources.is_empty() {
                "none".to_owned()
            } else {
                request.resources.join(", ")
            },
            arguments.replace('\n', "\n             "),
        );
        if let Some(preview) = &request.preview {
            let _ = writeln!(err, "{preview}");
        }
        let _ = write!(err, "Allow this call once? [y/N] ");
        let _ = err.flush();
        let mut answer = String::new();
        if std::io::stdin().lock().read_line(&mut answer).is_err() {
            return ApprovalResponse::Unanswered {
                reason: "could not read the answer".to_owned(),
            };
        }
        if matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes") {
            ApprovalResponse::Grant(self.ledger.issue(request, GrantScope::Once, GRANT_TTL))
        } else {
            ApprovalResponse::Deny {
                reason: "refused at the terminal".to_owned(),
            }
        }
    }

    fn ledger(&self) -> Option<&GrantLedger> {
        Some(&self.ledger)
    }
}
