//! Stage 3: the arguments against the tool's schema and its own checks; every problem found
//! is one field error, and their codes (`missing_input`, `invalid_type`, `unknown_argument`,
//! `constraint_violation`, `path_outside_workspace`, `read_required`, `stale_write`,
//! `sandbox_unavailable`) become the call's rejection only here.

use super::*;

impl Pipeline {
    /// Stage 3.
    pub(crate) fn validate(&self, resolved: Resolved) -> Result<Validated, Stopped> {
        let started = Instant::now();
        let Resolved {
            mut invocation,
            tool,
            mut trace,
        } = resolved;
        if let Some(rejection) = self.foreign(&trace) {
            return Err(Stopped { rejection, trace });
        }
        let arguments = Value::Object(std::mem::take(&mut invocation.arguments));
        let schema_errors = tool.schema.check(&arguments);
        let checked = if schema_errors.is_empty() {
            tool.executor.parse(&arguments)
        } else {
            Err(schema_errors)
        };
        trace.record(Stage::Validate, started);
        let parsed = match checked {
            Ok(parsed) => parsed,
            Err(errors) => {
                return Err(Stopped {
                    rejection: Rejection::from_field_errors(errors),
                    trace,
                });
            }
        };
        if let Value::Object(map) = &arguments {
            trace.argument_names = map.keys().cloned().collect();
            trace.argument_names.sort_unstable();
        }
        Ok(Validated {
            invocation,
            tool,
            arguments,
            parsed,
            trace,
        })
    }
}
