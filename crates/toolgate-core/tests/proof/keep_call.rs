// An executor that keeps the call it was handed, to run it again after the pipeline's step.
include!("common.rs");

#[derive(Debug, Default)]
struct Keeper(std::sync::Mutex<Option<&'static Call<'static, Keeper>>>);
impl Executor for Keeper {
    fn execute(&self, call: &Call<'_, Self>, _: &ExecContext) -> Result<ToolOutput, ToolError> {
        *self.0.lock().unwrap() = Some(call);
        Ok(ToolOutput::new(Value::Null))
    }
}

fn main() {}
