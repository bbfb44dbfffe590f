//! Executors with types: arguments parsed once, at stage 3, into the tool's own type; a plan
//! made from them at stage 4; that plan, and nothing re-read from strings, run at stage 7.
//!
//! A [`TypedExecutor`] names its `Args` and its `Plan`. Every `TypedExecutor` is an
//! [`Executor`] through the one implementation here, which carries the parsed arguments and
//! then the plan between the stages as [`Parsed`] and [`Planned`]: boxes that only this crate
//! can fill or open, so an executor is only ever handed the values its own stages made. A box
//! that holds another type (which the stages never produce) fails the call closed with
//! `plan_mismatch`; it never panics.

use std::any::Any;

use serde::Deserialize as _;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::{Call, Classification, ExecContext, Executor, Forwarded};
use crate::outcome::{ToolError, ToolErrorCode, ToolOutput};
use crate::rejection::{FieldError, RejectCode};

/// An executor whose arguments and plan have types.
pub trait TypedExecutor: Send + Sync + std::fmt::Debug {
    /// The arguments, as `serde` reads them from the object the schema accepted. Give it
    /// `#[serde(deny_unknown_fields)]` where the schema is closed, so that the two agree.
    type Args: DeserializeOwned + Send + Sync + 'static;
    /// What stage 4 decided the call will do: resolved paths, the program and its argv.
    type Plan: Send + Sync + 'static;

    /// Stage 3, after the schema and the parse passed: semantic checks (paths inside the
    /// workspace, regexes that compile, sensible ranges). Every problem, not just the first.
    fn check(&self, _arguments: &Self::Args) -> Vec<FieldError> {
        Vec::new()
    }

    /// Stage 4: the plan, and what it touches (see [`Classification`]). It cannot reject: a
    /// plan that cannot be made is a plan that fails at stage 7, saying why.
    fn plan(&self, arguments: Self::Args) -> (Self::Plan, Classification);

    /// Stage 7: carry out `plan`, the one stage 4 made for this call, within
    /// `call.limits()`, watching `cx` for cancellation.
    fn execute(
        &self,
        plan: &Self::Plan,
        call: &Call<'_, Self>,
        cx: &ExecContext,
    ) -> Result<ToolOutput, ToolError>;

    /// See [`Executor::brief`]; the default is no.
    fn brief(&self) -> bool {
        false
    }

    /// See [`Executor::brief_call`]: whether the call `plan` describes is brief. The default
    /// is what [`TypedExecutor::brief`] says.
    fn brief_plan(&self, _plan: &Self::Plan) -> bool {
        TypedExecutor::brief(self)
    }

    /// See [`Executor::forwards`]; the default is no.
    fn forwards(&self) -> bool {
        false
    }

    /// See [`Executor::forward`]: stage 7 begun on `plan`, its result to come. The default
    /// does nothing and fails the call.
    fn forward(&self, _plan: &Self::Plan, _call: &Call<'_, Self>, _cx: &ExecContext) -> Forwarded {
        super::cannot_forward()
    }
}

/// A call's arguments as its tool's type holds them, from stage 3 to stage 4. Only this
/// crate can fill or open one.
pub struct Parsed(Option<Box<dyn Any + Send + Sync>>);

/// What stage 4 planned for a call, in its tool's type, until stage 7 runs it. Only this
/// crate can fill or open one.
pub struct Planned(Option<Box<dyn Any + Send + Sync>>);

impl Parsed {
    /// Nothing beyond the JSON object: what an executor without types parses.
    pub(crate) fn untyped() -> Parsed {
        Parsed(None)
    }
}

impl Planned {
    /// No plan: what an executor without types plans.
    pub(crate) fn untyped() -> Planned {
        Planned(None)
    }

    /// The plan, if it is a `P`.
    pub(crate) fn get<P: 'static>(&self) -> Option<&P> {
        self.0.as_deref()?.downcast_ref()
    }
}

impl std::fmt::Debug for Parsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Parsed(..)"
        } else {
            "Parsed(untyped)"
        })
    }
}

impl std::fmt::Debug for Planned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Planned(..)"
        } else {
            "Planned(untyped)"
        })
    }
}

impl<T: TypedExecutor> Executor for T {
    fn parse(&self, arguments: &Value) -> Result<Parsed, Vec<FieldError>> {
        let parsed = T::Args::deserialize(arguments).map_err(|e| vec![refused(&e)])?;
        let errors = TypedExecutor::check(self, &parsed);
        if errors.is_empty() {
            Ok(Parsed(Some(Box::new(parsed))))
        } else {
            Err(errors)
        }
    }

    fn plan_call(&self, parsed: Parsed) -> (Planned, Classification) {
        match parsed.0.map(|any| any.downcast::<T::Args>()) {
            Some(Ok(arguments)) => {
                let (plan, classification) = TypedExecutor::plan(self, *arguments);
                (Planned(Some(Box::new(plan))), classification)
            }
            // Stage 3 parsed something else; stage 7 refuses a call with no plan.
            Some(Err(_)) | None => (Planned::untyped(), Classification::default()),
        }
    }

    fn execute(&self, call: &Call<'_, Self>, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        match call.plan().get::<T::Plan>() {
            Some(plan) if call.is_for(self) => TypedExecutor::execute(self, plan, call, cx),
            Some(_) => Err(handed_on()),
            None => Err(no_plan()),
        }
    }

    fn brief(&self) -> bool {
        TypedExecutor::brief(self)
    }

    fn brief_call(&self, plan: &Planned) -> bool {
        plan.get::<T::Plan>()
            .is_some_and(|plan| TypedExecutor::brief_plan(self, plan))
    }

    fn forwards(&self) -> bool {
        TypedExecutor::forwards(self)
    }

    fn forward(&self, call: &Call<'_, Self>, cx: &ExecContext) -> Forwarded {
        match call.plan().get::<T::Plan>() {
            Some(plan) if call.is_for(self) => TypedExecutor::forward(self, plan, call, cx),
            Some(_) => Box::pin(std::future::ready(Err(handed_on()))),
            None => Box::pin(std::future::ready(Err(no_plan()))),
        }
    }
}

/// The failure of a call one executor handed to another: it was authorized for the first.
fn handed_on() -> ToolError {
    ToolError::new(
        ToolErrorCode::PlanMismatch,
        "the call was handed to an executor it was not authorized for; it did not run",
    )
}

/// The failure of a call that reached stage 7 without its tool's own plan.
fn no_plan() -> ToolError {
    ToolError::new(
        ToolErrorCode::PlanMismatch,
        "the call reached execution without the plan its tool made for it; it did not run",
    )
}

/// Stage 3's rejection of arguments the schema accepted but the tool's type does not: the
/// field `serde` names, when it names one. `serde_json` does not say where in the object the
/// field is, so a nested one is pointed to as if at the top; the builtins' schemas are closed
/// at every level, and refuse those before their types see them.
fn refused(error: &serde_json::Error) -> FieldError {
    let message = error.to_string();
    // serde names fields in backticks: "unknown field `x`, expected one of …".
    let named = message
        .split('`')
        .nth(1)
        .filter(|name| !name.is_empty() && !name.contains(['/', '~']));
    let (code, pointer) = if message.starts_with("unknown field") {
        (RejectCode::UnknownArgument, named)
    } else if message.starts_with("missing field") {
        (RejectCode::MissingInput, named)
    } else {
        (RejectCode::InvalidType, None)
    };
    let pointer = pointer.map_or_else(String::new, |name| format!("/{name}"));
    FieldError::new(
        pointer,
        code,
        format!("the arguments do not fit this tool: {message}"),
    )
}
