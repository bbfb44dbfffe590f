// An executor implemented directly that hands the call it was given to another tool's
// executor: one implemented directly, a typed one's stage 7 with a plan it made up, and one
// it holds as a trait object (as toolgate-tools hands out its builtins).
include!("common.rs");

#[derive(Debug)]
struct HandsOn(Arc<dyn Executor>);
impl Executor for HandsOn {
    fn execute(&self, call: &Call<'_, Self>, cx: &ExecContext) -> Result<ToolOutput, ToolError> {
        let _ = Reader.execute(call, cx);
        let _ = self.0.execute(call, cx);
        TypedExecutor::execute(&Writer, &(), call, cx)
    }
}

fn main() {}
