//! One run's stages in order: run lock and state → host → augments →
//! parse and pre-evaluate → the agent run. `main` calls these and maps
//! what they return to output and exit codes.

use crate::agent::{AgentRun, RunError, RunSetup, RunSummary};
use crate::augments::{self, AugmentsInput};
use crate::config::Config;
use crate::discover::{DiscoverInput, Discovery, NameLookup, Role, apply_command_line, discover};
use crate::eval::classes::ClassInfo;
use crate::eval::preeval::{PreEvalReport, load_and_preevaluate, preevaluate_entry};
use crate::eval::vars::Variable;
use crate::eval::{EvalContext, EvalSettings};
use crate::host::Host;
use crate::host::clock::now_secs;
use crate::load::{LoadError, LoadedFile, PolicySet, validate_together};
use crate::promises::custom::{ModuleSettings, PromiseModules};
use crate::report::Sink;
use crate::schema::Scope;
use crate::state::{RunLock, RunLockError, StateError, StateStore};
use crate::syntax::Diagnostic;
use crate::values::Origin;
use crate::values::canon::canonify_class;
use thiserror::Error;

/// Why a run could not start or could not load its policy.
#[derive(Debug, Error)]
pub enum PipelineError {
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("the policy has errors; nothing was run")]
    PolicyErrors,
    #[error("Policy failed validation with command '{0}'")]
    Validation(String),
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
    /// What validating all loaded files together found, one list per file
    /// of `policy.files`.
    pub validation: Vec<Vec<Diagnostic>>,
    /// The hierarchical properties and how each was merged (`--explain`).
    pub properties: crate::augments::properties::Properties,
    /// `depends_on` cycles: their promises could never run, so the policy
    /// is refused before anything runs.
    pub cycles: Vec<crate::agent::graph::DependsCycle>,
    /// Some file has an error of its own, found without looking at the
    /// others (what cf-promises calls syntax errors, as opposed to
    /// references that do not resolve).
    pub syntax_errors: bool,
}

impl Prepared {
    /// Every parse and validation diagnostic of every loaded file, rendered.
    pub fn render_diagnostics(&self) -> String {
        self.policy
            .files
            .iter()
            .zip(&self.validation)
            .map(|(f, v)| {
                crate::syntax::diagnostic::render_all(f.diagnostics.iter().chain(v), &f.source)
            })
            .chain(
                self.properties
                    .errors
                    .iter()
                    .map(|e| format!("   error: {e}\n")),
            )
            .chain(self.cycles.iter().map(|c| format!("   error: {c}\n")))
            // cf-promises' closing words, which tests grep for
            // (00_basics/namespaces_can_not_contain_funny_characters.cf).
            .chain(
                self.syntax_errors
                    .then(|| "   error: There are syntax errors in policy files\n".to_string()),
            )
            .collect()
    }

    pub fn has_errors(&self) -> bool {
        self.policy.files.iter().any(|f| f.has_errors())
            || self.validation.iter().flatten().any(Diagnostic::is_error)
            || !self.report.load_errors.is_empty()
            || !self.properties.errors.is_empty()
            || !self.cycles.is_empty()
    }
}

/// The host's hard classes and special variables, with the `-D` classes
/// (which cf-agent defines before discovery, and which win over it).
pub fn install_host(ctx: &mut EvalContext, config: &Config, role: Role) {
    let mut found = discover(&DiscoverInput::new(&config.workdir, &config.entry, role));
    apply_command_line(&mut found.classes, &config.defines, &config.negates);
    install_discovery(ctx, found);
}

/// Defines what discovery found (hard classes, special variables).
fn install_discovery(ctx: &mut EvalContext, found: Discovery) {
    for c in found.classes {
        let origin = if c.tags.iter().any(|t| t == "source=environment") {
            Origin::CommandLine
        } else {
            Origin::Agent
        };
        ctx.classes.define(
            &c.name,
            ClassInfo {
                tags: c.tags,
                comment: None,
                origin,
                hard: true,
            },
        );
    }
    for v in found.vars {
        let var = Variable::new(v.value, v.dtype, Origin::Agent).with_tags(v.tags);
        ctx.vars.put("default", v.scope, &v.name, var);
    }
}

/// Builds the evaluation context and loads and pre-evaluates the policy.
pub fn prepare(config: &Config, settings: EvalSettings) -> Result<Prepared, LoadError> {
    prepare_with(config, settings, Host::real(), None, None)
}

/// `prepare`, with the host the run acts through (its functions read
/// files and run commands through it too), the state of an agent run
/// (persistent classes) and, when the host was discovered already, what
/// was found.
fn prepare_with(
    config: &Config,
    settings: EvalSettings,
    host: Host,
    state: Option<&mut StateStore>,
    sandboxed: Option<(&Discovery, LoadedFile)>,
) -> Result<Prepared, LoadError> {
    let mut ctx = EvalContext::new(settings)
        .with_builtins(crate::functions::BUILTINS)
        .with_host(host);
    let role = if state.is_some() {
        Role::Agent
    } else {
        Role::Promises
    };
    let entry_text = match sandboxed {
        Some((found, text)) => {
            install_discovery(&mut ctx, found.clone());
            Some(text)
        }
        None => {
            install_host(&mut ctx, config, role);
            None
        }
    };
    if let Some(st) = state {
        load_persistent_classes(&mut ctx, st, &config.negates);
    }
    // Augments come after the host and persistent classes, before policy.
    let entry_dir = crate::load::dirname_text(&config.entry);
    let augmented = augments::apply(
        &mut ctx,
        &AugmentsInput::new(
            entry_dir,
            config.workdir.clone(),
            config.ignore_preferred_augments,
        ),
    );
    let mut policy = PolicySet::default();
    let report = match entry_text {
        Some(file) => preevaluate_entry(&mut ctx, &mut policy, &config.entry, file),
        None => load_and_preevaluate(&mut ctx, &mut policy, &config.entry)?,
    };
    // Inputs that never resolved are logged as cf-promises logs them while
    // loading (on its log's stream, which tests filter with grep): errors
    // that do not stop the check.
    for text in &report.unresolved_inputs {
        tracing::error!("Unresolved variable '{text}' in input list, cannot parse");
    }
    let files: Vec<&LoadedFile> = policy.files.iter().map(|f| f.as_ref()).collect();
    // cf-promises checks that referenced bodies exist over what it could
    // load, whatever inputs never resolved (it names those in an error of
    // their own); given a bundlesequence (`-b`), it does not check them.
    // An input that could not be read stops it before that check: the
    // bodies that file would define are not reported missing.
    let scope = if (config.bundlesequence.is_some() && config.mode != crate::config::Mode::Run)
        || !report.load_errors.is_empty()
    {
        Scope::Fragment
    } else if config.full_check {
        Scope::FullCheck
    } else {
        Scope::WholePolicy
    };
    let validation = validate_together(&files, scope);
    let syntax_errors = files.iter().any(|f| f.has_errors())
        || validate_together(&files, Scope::Fragment)
            .iter()
            .flatten()
            .any(Diagnostic::is_error);
    let cycles =
        crate::agent::graph::PromiseGraph::build(&mut ctx, &policy, false).depends_cycles();
    Ok(Prepared {
        ctx,
        policy,
        report,
        validation,
        properties: augmented.properties,
        cycles,
        syntax_errors,
    })
}

/// Persistent classes from earlier runs are defined after the host's and
/// before the policy is read, with the tags they were stored with and
/// `source=persistent`; `-N` names ones not to load (all that `-N` does in
/// cf-agent 3.21).
fn load_persistent_classes(ctx: &mut EvalContext, st: &mut StateStore, negates: &[String]) {
    match st.persistent_classes(now_secs()) {
        Ok(classes) => {
            for c in classes {
                if negates.iter().any(|n| canonify_class(n) == c.name) {
                    continue;
                }
                let mut tags = c.tags;
                if !tags.iter().any(|t| t == "source=persistent") {
                    tags.push("source=persistent".to_string());
                }
                ctx.classes
                    .define(&c.name, ClassInfo::soft(Origin::Persistent, tags));
            }
        }
        Err(e) => tracing::error!("{e}"),
    }
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
    precheck_with_cf_promises(config)?;
    let _run_lock = RunLock::acquire(&config.workdir, config.lock_wait)?;
    let state_dir = StateStore::dir(&config.workdir);
    recover_transactions(&state_dir, sink);
    let mut state = StateStore::open(&config.workdir)?;
    let settings = EvalSettings {
        no_side_effects: false,
        dry_run: config.dry_run,
        command_output_shown: config.log_level >= crate::config::LogLevel::Info,
        ..EvalSettings::default()
    };
    let host = if config.dry_run {
        Host::real().with_dry_run_overlay()
    } else {
        Host::real()
    };
    let mut prepared = prepare_with(config, settings, host.clone(), Some(&mut state), None)?;
    on_loaded(&prepared);
    if prepared.has_errors() {
        return Err(PipelineError::PolicyErrors);
    }
    let summary = {
        let setup = RunSetup {
            no_lock: config.no_lock,
            diff: config.diff,
            state: Some(&mut state),
            state_dir: Some(state_dir.clone()),
            modules: PromiseModules::new(ModuleSettings {
                log_level: config.log_level.into(),
                timeout: config.module_timeout,
            }),
            host,
            ..RunSetup::new(config.dry_run)
        };
        let mut run = AgentRun::new(&mut prepared.ctx, &prepared.policy, sink, setup);
        let seq = run.bundlesequence(config.bundlesequence.as_deref())?;
        run.run(&seq)?;
        save_why(&state_dir, config, run.why_mut());
        run.into_summary()
    };
    state.flush()?;
    Ok(RunReport { prepared, summary })
}

/// cf-agent has a policy file from outside the work directory's inputs
/// checked by the `cf-promises` of its bin directory before it loads it
/// (`cf-promises -c FILE`, or `cf-promises FILE -b SEQ` with a
/// bundlesequence given), with that program's output going where the
/// agent's goes. The check evaluates the policy's variables as
/// cf-promises does, so what they run (`execresult`) runs then too, and
/// policies see it (the acceptance tests' lock checks run sub-agents that
/// way). The same is done here when that `cf-promises` exists; without
/// one (cf-agent would give up for its failsafe policy) the policy is
/// only validated in this process, as it always is. cf-agent also checks
/// a policy of the inputs directory changed since its last validation;
/// that record (`cf_promises_validated`) is not kept here, so such a
/// policy is checked in this process only.
fn precheck_with_cf_promises(config: &Config) -> Result<(), PipelineError> {
    let layout = crate::discover::Layout::for_workdir(&config.workdir);
    let entry = config.entry.to_string_lossy();
    if entry.starts_with(&*layout.inputdir.to_string_lossy()) {
        return Ok(());
    }
    let cf_promises = layout.bindir.join("cf-promises");
    let host = crate::host::Host::real();
    if host
        .access(&cf_promises, crate::host::exec::Access::Execute)
        .is_err()
    {
        tracing::trace!(
            "No '{}' to check the policy with; it is validated in this process only",
            cf_promises.display()
        );
        return Ok(());
    }
    let mut argv = vec![cf_promises.to_string_lossy().into_owned()];
    match &config.bundlesequence {
        Some(seq) => {
            argv.push(entry.into_owned());
            argv.push("-b".into());
            argv.push(seq.join(","));
        }
        None => {
            argv.push("-c".into());
            argv.push(entry.into_owned());
        }
    }
    if config.ignore_preferred_augments {
        argv.push("--ignore-preferred-augments".into());
    }
    let shown = argv
        .iter()
        .map(|a| format!("\"{a}\""))
        .collect::<Vec<_>>()
        .join(" ");
    tracing::debug!("Checking policy with command '{shown}'");
    let spec = crate::host::exec::CommandSpec {
        argv,
        output: crate::host::exec::OutputSelect::Inherit,
        ..Default::default()
    };
    match host.run(&spec) {
        Ok(r) if r.code == Some(0) => Ok(()),
        Ok(_) => Err(PipelineError::Validation(shown)),
        Err(e) => {
            tracing::error!("Cannot run '{}': {e}", cf_promises.display());
            Err(PipelineError::Validation(shown))
        }
    }
}

/// Undoes the transactions of runs that were killed (their journals are
/// still in the state directory), before anything else, and says so.
fn recover_transactions(state_dir: &std::path::Path, sink: &mut dyn Sink) {
    for undo in crate::state::journal::recover(state_dir) {
        let (bundle, namespace, pid, started) = match &undo.header {
            Some(h) => (h.bundle.clone(), h.namespace.clone(), h.pid, h.started),
            None => ("?".to_string(), "default".to_string(), 0, 0),
        };
        let reason = format!(
            "the run that started it (pid {pid}, at {started}) was killed before the \
             transaction ended"
        );
        tracing::warn!(
            "Recovered an unfinished transaction '{namespace}:{bundle}': {reason}; undoing its \
             changes to {} path(s)",
            undo.restored.len() + undo.failed.len()
        );
        for r in &undo.restored {
            tracing::warn!("Rolled back ({namespace}:{bundle}): {r}");
        }
        for f in &undo.failed {
            tracing::error!("Could not roll back ({namespace}:{bundle}): {f}");
        }
        sink.event(&crate::report::json::JsonEvent::Rollback {
            bundle,
            namespace,
            reason,
            restored: undo.restored,
            failed: undo.failed,
            recovered: true,
        });
    }
}

/// Saves what `--why` needs about this run in the state directory.
fn save_why(state_dir: &std::path::Path, config: &Config, why: &mut crate::agent::why::WhyLog) {
    why.time = now_secs();
    why.policy = config.entry.display().to_string();
    why.dry_run = config.dry_run;
    let path = state_dir.join(crate::agent::why::WHY_FILE);
    let text = serde_json::to_vec(why).unwrap_or_default();
    if let Err(e) = crate::host::local::write_private(&path, &text) {
        tracing::error!(
            "Cannot save the run's record for --why in '{}': {e}",
            path.display()
        );
    }
}

/// A place where any policy can run without touching the machine, for the
/// fuzzer's evaluation target: a dry run (nothing is written) on a host
/// rooted in a directory of its own (what the policy's paths reach is a
/// private tree), without state (no locks, no persistent classes, no
/// transactions, no `--why` record), under the sandbox (functions and
/// promise types that could run programs, reach the network or signal
/// processes fail instead), and with a deadline for each run.
pub struct Sandbox {
    config: Config,
    discovery: Discovery,
    root: std::path::PathBuf,
}

impl Sandbox {
    /// Lays out `dir`: `policy/` (where the policy file is said to be:
    /// its `inputs` are looked for there), `root/` (the host's root) and
    /// `work/` (the work directory), all made 0700; then discovers the
    /// host, once, with its name looked up in `/etc/hosts` only (no DNS).
    pub fn new(dir: &std::path::Path) -> std::io::Result<Sandbox> {
        let (policy, root, workdir) = (dir.join("policy"), dir.join("root"), dir.join("work"));
        for d in [&policy, &root, &workdir] {
            crate::host::local::create_private_dir(d)?;
        }
        let config = Config {
            mode: crate::config::Mode::Run,
            full_check: true,
            workdir,
            entry: policy.join("promises.cf"),
            bundlesequence: None,
            defines: Vec::new(),
            negates: Vec::new(),
            no_lock: true,
            dry_run: true,
            log_level: crate::config::LogLevel::Error,
            timestamps: false,
            color: false,
            ignore_preferred_augments: false,
            note_unresolved: true,
            show_evaluated_vars: None,
            show_evaluated_classes: None,
            detailed_exitcodes: false,
            lock_wait: std::time::Duration::ZERO,
            module_timeout: std::time::Duration::from_secs(1),
            diff: false,
            json: false,
            report_file: None,
        };
        let mut input = DiscoverInput::new(&config.workdir, &config.entry, Role::Agent);
        input.name_lookup = NameLookup::HostsFile;
        let discovery = discover(&input);
        Ok(Sandbox {
            config,
            discovery,
            root,
        })
    }

    /// The directory the policy's absolute paths are taken below.
    pub fn root(&self) -> &std::path::Path {
        &self.root
    }

    /// Runs `text` as the whole policy: loads, validates and pre-evaluates
    /// it, then runs its bundlesequence as a dry run on the rooted host,
    /// for at most about `budget` (past it, evaluation stops: see
    /// `EvalSettings::deadline`). A policy that cannot run is an `Err`, as
    /// for a real run; what the run did is the `Ok`.
    pub fn run(
        &self,
        text: String,
        budget: std::time::Duration,
        sink: &mut dyn Sink,
    ) -> Result<RunSummary, PipelineError> {
        let settings = EvalSettings {
            no_side_effects: false,
            dry_run: true,
            sandbox: true,
            deadline: Some(std::time::Instant::now() + budget),
            command_output_shown: false,
        };
        let file = LoadedFile::from_text(&self.config.entry.display().to_string(), text);
        let host = Host::rooted(&self.root).with_dry_run_overlay();
        let mut prepared = prepare_with(
            &self.config,
            settings,
            host.clone(),
            None,
            Some((&self.discovery, file)),
        )?;
        if prepared.has_errors() {
            return Err(PipelineError::PolicyErrors);
        }
        let setup = RunSetup {
            host,
            ..RunSetup::new(true)
        };
        let mut run = AgentRun::new(&mut prepared.ctx, &prepared.policy, sink, setup);
        let seq = run.bundlesequence(None)?;
        run.run(&seq)?;
        Ok(run.into_summary())
    }
}
