//! One run's stages in order: run lock and state → host → augments →
//! parse and pre-evaluate → the agent run. `main` calls these and maps
//! what they return to output and exit codes.

use crate::config::Config;
use crate::eval::agent::{AgentRun, RunError, RunSummary};
use crate::eval::classes::{ClassInfo, canonify_class};
use crate::eval::preeval::{PreEvalReport, load_and_preevaluate};
use crate::eval::{EvalContext, EvalSettings, Origin};
use crate::load::{LoadError, PolicySet};
use crate::report::Sink;
use crate::state::{RunLock, RunLockError, StateError, StateStore};
use thiserror::Error;

/// Why a run could not start or could not load its policy.
#[derive(Debug, Error)]
pub enum PipelineError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("the policy has errors; nothing was run")]
    PolicyErrors,
    #[error(transparent)]
    Busy(#[from] RunLockError),
    #[error(transparent)]
    State(#[from] StateError),
    #[error(transparent)]
    Run(#[from] RunError),
}

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
    prepare_with(config, settings, None)
}

fn prepare_with(
    config: &Config,
    settings: EvalSettings,
    state: Option<&mut StateStore>,
) -> Result<Prepared, LoadError> {
    let mut ctx = EvalContext::new(settings);
    apply_command_line_classes(&mut ctx, config);
    if let Some(st) = state {
        load_persistent_classes(&mut ctx, st);
    }
    let mut policy = PolicySet::default();
    let report = load_and_preevaluate(&mut ctx, &mut policy, &config.entry)?;
    Ok(Prepared {
        ctx,
        policy,
        report,
    })
}

/// Persistent classes from earlier runs are defined after the command
/// line's and before the policy is read.
fn load_persistent_classes(ctx: &mut EvalContext, st: &mut StateStore) {
    match st.persistent_classes(now_secs()) {
        Ok(classes) => {
            for c in classes {
                ctx.classes
                    .define(&c.name, ClassInfo::soft(Origin::Persistent, c.tags));
            }
        }
        Err(e) => tracing::error!("{e}"),
    }
}

pub fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// What a finished run leaves: the context (for --show-evaluated-*) and
/// what happened.
pub struct RunReport {
    pub prepared: Prepared,
    pub summary: RunSummary,
}

/// A whole agent run: the run lock, the state store, loading and
/// pre-evaluation, then the bundlesequence. `on_loaded` sees the loaded
/// policy first (to print its diagnostics); parse errors stop the run
/// before anything acts.
pub fn run_agent(
    config: &Config,
    sink: &mut dyn Sink,
    on_loaded: &mut dyn FnMut(&Prepared),
) -> Result<RunReport, PipelineError> {
    let _run_lock = RunLock::acquire(&config.workdir, config.lock_wait)?;
    let mut state = StateStore::open(&config.workdir)?;
    let settings = EvalSettings {
        no_side_effects: false,
        dry_run: config.dry_run,
    };
    let mut prepared = prepare_with(config, settings, Some(&mut state))?;
    on_loaded(&prepared);
    if prepared.has_errors() {
        return Err(PipelineError::PolicyErrors);
    }
    let summary = {
        let mut run = AgentRun::new(&mut prepared.ctx, &prepared.policy, sink, config.dry_run);
        run.no_lock = config.no_lock;
        run.state = Some(&mut state);
        let seq = run.bundlesequence(config.bundlesequence.as_deref())?;
        run.run(&seq)?;
        std::mem::take(&mut run.summary)
    };
    state.flush()?;
    Ok(RunReport { prepared, summary })
}
