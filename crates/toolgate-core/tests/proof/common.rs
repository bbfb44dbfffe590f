// What every case shares: a pipeline with a read-only tool and a writing one, and a context
// to run them in.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toolgate_core::*;

#[derive(Debug)]
struct Reader;
impl Executor for Reader {
    fn execute(&self, _: &Call<'_, Self>, _: &ExecContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::new(Value::Null))
    }
}

#[derive(Debug)]
struct Writer;
impl TypedExecutor for Writer {
    type Args = serde_json::Map<String, Value>;
    type Plan = ();
    fn plan(&self, _: Self::Args) -> ((), Classification) {
        ((), Classification::default())
    }
    fn execute(
        &self,
        (): &(),
        _: &Call<'_, Self>,
        _: &ExecContext,
    ) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::new(json!("wrote")))
    }
}

fn pipeline() -> Pipeline {
    let mut registry = RegistryBuilder::new();
    let mut reader = ToolEntry::new("reader", "reads");
    reader.effect = Some(EffectClass::ReadOnly);
    let schema = json!({"type": "object"});
    registry
        .register(
            Descriptor::new("reader", "r", schema.clone()),
            reader,
            Arc::new(Reader),
        )
        .unwrap();
    let mut writer = ToolEntry::new("writer", "writes");
    writer.effect = Some(EffectClass::LocalWrite);
    registry
        .register(
            Descriptor::new("writer", "w", schema),
            writer,
            Arc::new(Writer),
        )
        .unwrap();
    Pipeline::new(
        Arc::new(registry.build().unwrap()),
        Arc::new(PolicyEngine::default_policy().unwrap()),
        Arc::new(HeadlessBroker),
        WorkspaceId::new("/tmp/project"),
    )
}

fn context() -> ExecContext {
    ExecContext::new(Duration::from_secs(5), Cancel::new())
}
