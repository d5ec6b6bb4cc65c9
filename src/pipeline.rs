//! One run's stages in order: host → augments → parse and pre-evaluate.
//! `main` calls these and maps what they return to output and exit codes.

use crate::config::Config;
use crate::eval::classes::{ClassInfo, canonify_class};
use crate::eval::preeval::{PreEvalReport, load_and_preevaluate};
use crate::eval::{EvalContext, EvalSettings, Origin};
use crate::load::{LoadError, PolicySet};

/// A policy loaded and pre-evaluated, ready to inspect or run.
pub struct Prepared {
    pub ctx: EvalContext,
    pub policy: PolicySet,
    pub report: PreEvalReport,
}

impl Prepared {
    /// Every parse diagnostic of every loaded file, rendered.
    pub fn render_diagnostics(&self) -> String {
        self.policy
            .files
            .iter()
            .map(|f| f.render_diagnostics())
            .collect()
    }

    pub fn has_errors(&self) -> bool {
        self.policy.files.iter().any(|f| f.has_errors()) || !self.report.load_errors.is_empty()
    }
}

/// Classes from `-D` are defined, and those from `-N` cancelled, before
/// anything else is evaluated.
pub fn apply_command_line_classes(ctx: &mut EvalContext, config: &Config) {
    for n in &config.negates {
        ctx.classes.negate(&canonify_class(n));
    }
    for d in &config.defines {
        ctx.classes.define(
            &canonify_class(d),
            ClassInfo::soft(Origin::CommandLine, vec!["source=environment".to_string()]),
        );
    }
}

/// Builds the evaluation context and loads and pre-evaluates the policy.
pub fn prepare(config: &Config, settings: EvalSettings) -> Result<Prepared, LoadError> {
    let mut ctx = EvalContext::new(settings);
    apply_command_line_classes(&mut ctx, config);
    let mut policy = PolicySet::default();
    let report = load_and_preevaluate(&mut ctx, &mut policy, &config.entry)?;
    Ok(Prepared {
        ctx,
        policy,
        report,
    })
}
