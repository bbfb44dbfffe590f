//! The one sequence of stages 1–5 that running, authorizing and explaining a call all
//! follow. Each stage is a module of its own (`normalize`, `resolve`, `validate`, `classify`,
//! `hook`, `authorize`, `approve`, `execute`, `describe`), and only it issues its reject codes.

use super::*;

impl Pipeline {
    /// Stages 1–5, the one sequence that running, authorizing and explaining a call follow.
    /// `shown` narrows stage 2 (see [`Shown`]); `reports`, when given, hears what each stage
    /// that passed decided, worded only then.
    pub(super) fn through_policy(
        &self,
        raw: RawCall,
        shown: Option<&Shown>,
        mut reports: Option<&mut Vec<StageReport>>,
    ) -> Result<Permitted, Stopped> {
        let mut passed = |stage, detail: &dyn Fn() -> String| {
            if let Some(reports) = reports.as_deref_mut() {
                reports.push(StageReport {
                    stage,
                    decision: "pass",
                    detail: detail(),
                });
            }
        };
        let normalized = self.normalize(raw)?;
        passed(Stage::Normalize, &|| explain::normalized(&normalized));
        let resolved = self.resolve_within(normalized, shown)?;
        passed(Stage::Resolve, &|| explain::resolved(&resolved));
        let validated = self.validate(resolved)?;
        passed(Stage::Validate, &|| explain::validated(&validated));
        let classified = self.classify(validated);
        passed(Stage::Classify, &|| explain::classified(&classified));
        let classified = self.pre_call(classified)?;
        if !classified.trace.hooks.is_empty() {
            passed(Stage::Hook, &|| explain::hooked(&classified.trace.hooks));
        }
        let permitted = self.authorize(classified)?;
        passed(Stage::Authorize, &|| explain::permitted(&permitted));
        Ok(permitted)
    }
}
