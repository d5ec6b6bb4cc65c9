//! One run's stages in order: run lock and state → host → augments →
//! parse and pre-evaluate → the agent run. `main` calls these and maps
//! what they return to output and exit codes.

use crate::agent::{AgentRun, RunError, RunSetup, RunSummary};
use crate::augments::{self, AugmentsInput};
use crate::config::Config;
use crate::discover::{DiscoverInput, Discovery, NameLookup, Role, apply_command_line, discover};
use crate::eval::classes::ClassInfo;
use crate::eval::preeval::{PreEvalReport, load_entry, preevaluate_entry};
use crate::eval::vars::Variable;
use crate::eval::{EvalContext, EvalSettings};
use crate::host::Host;
use crate::host::changes_chroot::ChangesChroot;
use crate::host::clock::now_secs;
use crate::load::{EarlyValidation, LoadError, LoadedFile, PolicySet, validate_together};
use crate::promises::custom::{ModuleSettings, PromiseModules};
use crate::report::Sink;
use crate::schema::Scope;
use crate::state::{RunLock, RunLockError, StateError, StateStore};
use crate::syntax::Diagnostic;
use crate::values::Origin;
use crate::values::canon::canonify_class;
use std::sync::Arc;
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
    #[error("could not make the changes chroot '{path}': {source}")]
    ChangesChroot {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// A policy file its group or others may write: the agent stops
    /// without running anything, not even the failsafe policy.
    #[error(transparent)]
    Refused(LoadError),
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
    /// Lets go of the policy and the variable and class stores without
    /// freeing them, for a process about to exit: freeing every node of
    /// a large policy costs more than the rest of a quick check's ending.
    /// What needs closing (modules, connections) is still dropped.
    pub fn release_at_exit(self) {
        let Prepared { ctx, policy, .. } = self;
        std::mem::forget(policy);
        let crate::eval::context::EvalContext { vars, classes, .. } = ctx;
        std::mem::forget(vars);
        std::mem::forget(classes);
    }

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
            // The call, located where pre-evaluation met it, then
            // cf-promises' closing words for it.
            .chain(self.report.fatal.iter().map(|f| {
                let at = self.report.messages.iter().find(|m| &m.message == f);
                let located = match at {
                    Some(m) => format!("{f} ({}:{})", m.file, m.line),
                    None => f.clone(),
                };
                if f.contains(crate::eval::rval::BAD_ARGUMENTS) {
                    format!("   error: {located}\n   error: Fatal CFEngine error: Bad arguments\n")
                } else {
                    format!("   error: Fatal CFEngine error: {located}\n")
                }
            }))
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
            || self.report.fatal.is_some()
    }
}

/// The host's hard classes and special variables, with the `-D` classes
/// (which cf-agent defines before discovery, and which win over it).
pub fn install_host(ctx: &mut EvalContext, config: &Config, role: Role) {
    let mut found = discover(&DiscoverInput::new(&config.workdir, &config.entry, role));
    apply_command_line(&mut found.classes, &config.defines, &config.negates);
    install_discovery(ctx, found);
    install_log_level_classes(ctx, config.log_level);
}

/// cf-agent's classes for the level it logs at: `inform_mode` from `-I`
/// on, `verbose_mode` from `-v` on, `debug_mode` and `opt_debug` with `-d`
/// (policies such as the MPF's inventory report more under them).
fn install_log_level_classes(ctx: &mut EvalContext, level: crate::config::LogLevel) {
    use crate::config::LogLevel;
    let mut names = Vec::new();
    if level >= LogLevel::Debug {
        names.extend(["debug_mode", "opt_debug"]);
    }
    if level >= LogLevel::Verbose {
        names.push("verbose_mode");
    }
    if level >= LogLevel::Info {
        names.push("inform_mode");
    }
    for name in names {
        let tags = ["cfe_internal", "source=agent", "hardclass"]
            .map(String::from)
            .to_vec();
        let info = ClassInfo {
            hard: true,
            ..ClassInfo::soft(Origin::Agent, tags)
        };
        ctx.classes.define(name, info);
    }
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
    // Each scope sized once, in the order the variables first name them
    // (the order scopes are made in, as before).
    let mut sizes: Vec<(&str, usize)> = Vec::new();
    for v in &found.vars {
        match sizes.iter_mut().find(|(s, _)| *s == v.scope) {
            Some((_, n)) => *n += 1,
            None => sizes.push((v.scope, 1)),
        }
    }
    for (scope, n) in sizes {
        ctx.vars.reserve("default", scope, n);
    }
    for v in found.vars {
        let var = Variable::new(v.value, v.dtype, Origin::Agent).with_tags(v.tags);
        match v.deferred {
            Some(make) => ctx
                .vars
                .put_deferred("default", v.scope, &v.name, var, make),
            None => {
                ctx.vars.put("default", v.scope, &v.name, var);
            }
        }
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
    let augments_input = AugmentsInput {
        no_def: config.no_augments,
        no_host_specific: config.no_host_specific_data,
        ..AugmentsInput::new(
            entry_dir,
            config.workdir.clone(),
            config.ignore_preferred_augments,
        )
    };
    let augmented = augments::apply(&mut ctx, &augments_input);
    let mut policy = PolicySet::default();
    match entry_text {
        Some(file) => policy.add_entry(file),
        None => load_entry(&ctx, &mut policy, &config.entry)?,
    }
    // The check of a big policy overlaps its pre-evaluation.
    let early = EarlyValidation::start(&policy, validation_scope(config, true));
    let report = preevaluate_entry(&mut ctx, &mut policy, &config.entry);
    // Inputs that never resolved are logged as cf-promises logs them while
    // loading (on its log's stream, which tests filter with grep): errors
    // that do not stop the check.
    for text in &report.unresolved_inputs {
        crate::error!("Unresolved variable '{text}' in input list, cannot parse");
    }
    let files: Vec<&LoadedFile> = policy.files.iter().map(|f| f.as_ref()).collect();
    // cf-promises checks that referenced bodies exist over what it could
    // load, whatever inputs never resolved (it names those in an error of
    // their own); given a bundlesequence (`-b`), it does not check them.
    // An input that could not be read stops it before that check: the
    // bodies that file would define are not reported missing.
    let scope = validation_scope(config, report.load_errors.is_empty());
    let validation = early
        .and_then(|e| e.result_for(&files, scope))
        .unwrap_or_else(|| validate_together(&files, scope));
    // What a fragment's check finds, the whole policy's finds too: only a
    // policy with errors is checked again, to tell its syntax errors.
    let any_error = |v: &[Vec<Diagnostic>]| v.iter().flatten().any(Diagnostic::is_error);
    let syntax_errors = files.iter().any(|f| f.has_errors())
        || match scope {
            Scope::Fragment => any_error(&validation),
            _ => any_error(&validation) && any_error(&validate_together(&files, Scope::Fragment)),
        };
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

/// How much of the policy validation may take as the whole of it.
fn validation_scope(config: &Config, all_inputs_read: bool) -> Scope {
    if (config.bundlesequence.is_some() && config.mode != crate::config::Mode::Run)
        || !all_inputs_read
    {
        Scope::Fragment
    } else if config.full_check {
        Scope::FullCheck
    } else {
        Scope::WholePolicy
    }
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
        Err(e) => crate::error!("{e}"),
    }
}

/// What a finished run leaves: the context (for --show-evaluated-*) and
/// what happened.
pub struct RunReport {
    pub prepared: Prepared,
    pub summary: RunSummary,
    /// Under `--simulate`: the scratch copy the run changed, for the
    /// report that ends the run (its owner removes it).
    pub changes_chroot: Option<Arc<ChangesChroot>>,
}

/// The check `cf-promises` makes of a policy, made by this program itself
/// when the work directory's `cf-promises` is this very program: given
/// that program's command line (`argv[0]` its path), whether the policy
/// passed. The caller runs it as that program would run (its own log
/// level, no system log, its errors not this run's).
pub type CheckInProcess<'a> = &'a dyn Fn(&[String]) -> bool;

/// A whole agent run: the run lock, the state store, loading and
/// pre-evaluation, then the bundlesequence. `on_loaded` sees the loaded
/// policy first (to print its diagnostics); parse errors stop the run
/// before anything acts.
pub fn run_agent(
    config: &Config,
    sink: &mut dyn Sink,
    on_loaded: &mut dyn FnMut(&Prepared),
    check_here: Option<CheckInProcess<'_>>,
) -> Result<RunReport, PipelineError> {
    precheck_with_cf_promises(config, check_here)?;
    let (expire_after, exec) = match config.scheduled {
        true => match scheduled_start(config)? {
            Start::Now { expire_after, exec } => (Some(expire_after), exec),
            Start::NotDue(prepared) => {
                return Ok(RunReport {
                    prepared: *prepared,
                    summary: RunSummary::default(),
                    changes_chroot: None,
                });
            }
        },
        false => (None, None),
    };
    let _run_lock = RunLock::acquire_expiring(&config.workdir, config.lock_wait, expire_after)?;
    if let (Some((command, prepared)), Some(limit)) = (exec, expire_after) {
        run_exec_command(&command, limit);
        return Ok(RunReport {
            prepared: *prepared,
            summary: RunSummary::default(),
            changes_chroot: None,
        });
    }
    let state_dir = StateStore::dir(&config.workdir);
    recover_transactions(&state_dir, sink);
    let mut state = StateStore::open(&config.workdir)?;
    let settings = EvalSettings {
        no_side_effects: false,
        dry_run: config.dry_run,
        command_output_shown: config.log_level >= crate::config::LogLevel::Info,
        source_base: config.source_base.clone(),
        refuse_writable_policy: true,
        ..EvalSettings::default()
    };
    let changes_chroot = match config.simulate {
        Some(mode) => {
            let dir = state_dir.join(format!("{}.changes", std::process::id()));
            let c = ChangesChroot::create(dir.clone(), mode)
                .map_err(|source| PipelineError::ChangesChroot { path: dir, source })?;
            crate::warn!(
                "All changes in files will be made in the '{}' chroot",
                c.dir().display()
            );
            Some(Arc::new(c))
        }
        None => None,
    };
    // The changes chroot goes when the run fails before its report.
    let removed_on_error = |e: PipelineError| {
        if let Some(c) = &changes_chroot {
            c.remove();
        }
        e
    };
    // Under --simulate, the policy's functions read the real system, as
    // cf-agent's do; only the run's promises reach the copy.
    let host = if config.dry_run && changes_chroot.is_none() {
        Host::real().with_dry_run_overlay()
    } else {
        Host::real()
    };
    let synced = host.clone();
    let mut prepared = match prepare_with(config, settings, host.clone(), Some(&mut state), None) {
        Err(e @ LoadError::WritableByOthers { .. }) => {
            return Err(removed_on_error(PipelineError::Refused(e)));
        }
        r => r.map_err(|e| removed_on_error(e.into()))?,
    };
    // After pre-evaluation, as cf-agent (ThisAgentInit after loading the
    // policy): on a first run the MPF's setuid inventory, pre-evaluated,
    // finds no log, and the variables it then leaves undefined move the
    // order of every classic array walked later.
    open_setuid_log(&host, &config.workdir);
    let writable = |e: &LoadError| matches!(e, LoadError::WritableByOthers { .. });
    if let Some(i) = prepared.report.load_errors.iter().position(writable) {
        return Err(removed_on_error(PipelineError::Refused(
            prepared.report.load_errors.remove(i),
        )));
    }
    on_loaded(&prepared);
    if prepared.has_errors() {
        return Err(removed_on_error(PipelineError::PolicyErrors));
    }
    let host = match &changes_chroot {
        Some(c) => Host::in_changes_chroot(c.clone()),
        None => host,
    };
    tag_validated_masterfiles(config);
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
            profile: config.profile,
            ..RunSetup::new(config.dry_run)
        };
        let mut run = AgentRun::new(&mut prepared.ctx, &prepared.policy, sink, setup);
        let seq = run
            .bundlesequence(config.bundlesequence.as_deref())
            .map_err(|e| removed_on_error(e.into()))?;
        let ran = {
            // The run's lines go out together (see host::out).
            let _held = crate::host::out::hold();
            run.run(&seq)
        };
        // The renames of the run made durable, once per directory.
        if let Err(e) = synced.sync_pending_dirs() {
            crate::error!("Could not sync the directories the run wrote to: {e}");
        }
        ran.map_err(|e| removed_on_error(e.into()))?;
        save_why(&state_dir, config, run.why_mut());
        run.into_summary()
    };
    state.flush().map_err(|e| removed_on_error(e.into()))?;
    Ok(RunReport {
        prepared,
        summary,
        changes_chroot,
    })
}

/// Whether a scheduled run goes ahead.
enum Start {
    /// It does (after its splay), stopping a run older than
    /// `expire_after`; by running the policy's `exec_command` when it
    /// names one, as cf-execd runs it.
    Now {
        expire_after: std::time::Duration,
        exec: Option<(String, Box<Prepared>)>,
    },
    /// No schedule class holds: nothing runs.
    NotDue(Box<Prepared>),
}

/// cf-execd's part of a scheduled run: the policy's executor control read
/// from a first evaluation (common bundles included, as cf-execd keeps
/// them), the schedule checked, then the host's splay waited out before
/// the run proper evaluates afresh. A dry run says how long it would wait.
fn scheduled_start(config: &Config) -> Result<Start, PipelineError> {
    let settings = EvalSettings {
        dry_run: config.dry_run,
        ..EvalSettings::default()
    };
    let mut prepared = prepare_with(config, settings, Host::real(), None, None)?;
    if prepared.has_errors() {
        return Err(PipelineError::PolicyErrors);
    }
    let schedule = crate::agent::schedule::Schedule::of(&prepared.ctx);
    let Some(class) = schedule.due(&mut prepared.ctx) else {
        crate::info!(
            "Not scheduled now: none of the schedule's classes ({}) is defined",
            schedule.classes.join(", ")
        );
        return Ok(Start::NotDue(Box::new(prepared)));
    };
    crate::debug!("Scheduled by class '{class}'");
    crate::host::procs::lead_own_process_group();
    let secs = schedule.splay.as_secs();
    if config.dry_run {
        crate::info!("Would sleep for splaytime {secs} seconds");
    } else if secs > 0 {
        crate::info!("Sleeping for splaytime {secs} seconds");
        std::thread::sleep(schedule.splay);
    }
    let exec = prepared
        .ctx
        .lookup("control_executor.exec_command")
        .and_then(|v| v.as_scalar().map(str::to_string))
        .filter(|c| !c.trim().is_empty());
    Ok(Start::Now {
        expire_after: schedule.expire_after,
        exec: exec.map(|c| (c, Box::new(prepared))),
    })
}

/// Runs body executor control's `exec_command` through the shell, as
/// cf-execd does (the MPF's runs `update.cf`, then the agent), its output
/// going where ours goes; past `agent_expireafter` it is killed with its
/// process group.
fn run_exec_command(command: &str, limit: std::time::Duration) {
    let spec = crate::host::exec::CommandSpec {
        argv: vec![command.to_string()],
        shell: true,
        timeout: Some(limit),
        output: crate::host::exec::OutputSelect::Inherit,
        ..Default::default()
    };
    crate::info!("Running exec_command '{command}'");
    match Host::real().run(&spec) {
        Ok(r) if r.timed_out => crate::error!(
            "exec_command '{command}' ran longer than agent_expireafter ({} minutes): killed it \
             and its process group",
            limit.as_secs() / 60
        ),
        Ok(r) if r.code == Some(0) => {}
        Ok(r) => crate::error!(
            "exec_command '{command}' ended with {}",
            match (r.code, r.signal) {
                (Some(c), _) => format!("exit code {c}"),
                (None, Some(s)) => format!("signal {s}"),
                _ => "an unknown status".to_string(),
            }
        ),
        Err(e) => crate::error!("Could not run exec_command '{command}': {e}"),
    }
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
///
/// When that `cf-promises` is this program itself (the same file), the
/// check is made here by `check_here`, as that program would make it
/// (its settings, its output, its side effects: `execresult` still runs
/// in the check), without starting a second process: a second start of
/// this program and its host discovery was half of a small run.
fn precheck_with_cf_promises(
    config: &Config,
    check_here: Option<CheckInProcess<'_>>,
) -> Result<(), PipelineError> {
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
        crate::trace!(
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
    crate::debug!("Checking policy with command '{shown}'");
    if let Some(check) = check_here
        && host.is_this_program(&cf_promises)
    {
        crate::trace!(
            "'{}' is this program: checking in this process",
            cf_promises.display()
        );
        return match check(&argv) {
            true => Ok(()),
            false => Err(PipelineError::Validation(shown)),
        };
    }
    let spec = crate::host::exec::CommandSpec {
        argv,
        output: crate::host::exec::OutputSelect::Inherit,
        ..Default::default()
    };
    match host.run(&spec) {
        Ok(r) if r.code == Some(0) => Ok(()),
        Ok(_) => Err(PipelineError::Validation(shown)),
        Err(e) => {
            crate::error!("Cannot run '{}': {e}", cf_promises.display());
            Err(PipelineError::Validation(shown))
        }
    }
}

/// cf-agent opens its log of setuid programs, `cfagent.<node>.log` in the
/// work directory, once its policy is loaded, leaving an empty one behind:
/// the MPF's setuid inventory looks for it (and -v tells what it finds).
fn open_setuid_log(host: &Host, workdir: &std::path::Path) {
    let node = match host.read(std::path::Path::new("/proc/sys/kernel/hostname")) {
        Ok(b) => String::from_utf8_lossy(&b).trim_end().to_lowercase(),
        Err(e) => {
            crate::trace!("Could not read the node name for the setuid log: {e}");
            return;
        }
    };
    // cf-agent lowercases the whole path, so under a work directory whose
    // name has capitals it opens nothing.
    let path = std::path::PathBuf::from(
        workdir
            .join(format!("cfagent.{node}.log"))
            .to_string_lossy()
            .to_lowercase(),
    );
    if let Err(e) = host.append(&path, b"") {
        crate::trace!("Could not open the setuid log '{}': {e}", path.display());
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
        crate::warn!(
            "Recovered an unfinished transaction '{namespace}:{bundle}': {reason}; undoing its \
             changes to {} path(s)",
            undo.restored.len() + undo.failed.len()
        );
        for r in &undo.restored {
            crate::warn!("Rolled back ({namespace}:{bundle}): {r}");
        }
        for f in &undo.failed {
            crate::error!("Could not roll back ({namespace}:{bundle}): {f}");
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
    // Streamed: the text of a big run's record would double its memory.
    // serde_json writes in small pieces: a buffer of our own takes them
    // without a dynamic call each.
    let written = crate::host::local::write_private_with(&path, |w| {
        let mut w = std::io::BufWriter::with_capacity(64 * 1024, w);
        serde_json::to_writer(&mut w, why).map_err(std::io::Error::other)?;
        std::io::Write::flush(&mut w)
    });
    if let Err(e) = written {
        crate::error!(
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
            no_augments: false,
            no_host_specific_data: false,
            note_unresolved: true,
            show_evaluated_vars: None,
            show_evaluated_classes: None,
            detailed_exitcodes: false,
            lock_wait: std::time::Duration::ZERO,
            module_timeout: std::time::Duration::from_secs(1),
            scheduled: false,
            diff: false,
            simulate: None,
            json: false,
            report_file: None,
            metrics_file: None,
            bootstrap: None,
            trust_server: false,
            skip_bootstrap_policy_run: false,
            source_base: None,
            unresolved_are_errors: false,
            tag_release: None,
            timing: false,
            profile: false,
            eval_functions: true,
            no_extensions: false,
            skip_db_check: false,
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
            source_base: None,
            no_functions: false,
            refuse_writable_policy: false,
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

/// A policy hub's agent run on the default policy (no `-f`) that passed
/// validation tags the masterfiles directory as cf-agent does: its
/// `cf_promises_validated`, and its release ID when missing. A failure is
/// said and the run goes on.
fn tag_validated_masterfiles(config: &Config) {
    let default_entry = config.entry == config.workdir.join("inputs/promises.cf");
    let hub = crate::host::local::exists(config.workdir.join("state/am_policy_hub"));
    if !default_entry || !hub || config.dry_run {
        return;
    }
    let masterdir = config.workdir.join("masterfiles");
    if let Err(e) = tag_release(&masterdir) {
        crate::error!("{e}");
    }
}

/// Why `cf-promises -T` could not tag a directory.
#[derive(Debug, thiserror::Error)]
pub enum TagError {
    #[error("Cannot access policy directory '{0}' to generate release ID: {1}")]
    Unreadable(String, std::io::Error),
    #[error("While writing '{0}', could not create file: {1}")]
    Write(String, std::io::Error),
}

/// cf-promises' `-T DIR` once the policy passed its check: writes
/// `DIR/cf_promises_release_id` (`{"releaseId": ...}`) when it is missing
/// or git says otherwise, then `DIR/cf_promises_validated`
/// (`{"timestamp": now}`), both as cf-promises writes them.
pub fn tag_release(dir: &std::path::Path) -> Result<(), TagError> {
    use crate::host::local;
    let id_file = dir.join("cf_promises_release_id");
    let git = release_id_from_git(dir);
    let current = local::read_to_string(&id_file)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|j| j.get("releaseId")?.as_str().map(str::to_string));
    let stale = match (&current, &git) {
        (None, _) => true,
        (Some(c), Some(g)) => c != g,
        (Some(_), None) => false,
    };
    if stale {
        let id = match git {
            Some(g) => g,
            None => release_id_from_tree(dir)
                .map_err(|e| TagError::Unreadable(dir.display().to_string(), e))?,
        };
        let text = format!("{{\n  \"releaseId\": \"{id}\"\n}}");
        local::write_private(&id_file, text.as_bytes())
            .map_err(|e| TagError::Write(id_file.display().to_string(), e))?;
        crate::debug!("Saved policy release ID file '{}'", id_file.display());
    }
    let validated = dir.join("cf_promises_validated");
    let text = format!("{{\n  \"timestamp\": {}\n}}", now_secs());
    local::write_private(&validated, text.as_bytes())
        .map_err(|e| TagError::Write(validated.display().to_string(), e))?;
    crate::debug!(
        "Saved policy validated marker file '{}'",
        validated.display()
    );
    Ok(())
}

/// The commit a git checkout of `dir` is on: `.git/HEAD`'s ref, read in
/// `.git/`, or the commit HEAD names itself.
fn release_id_from_git(dir: &std::path::Path) -> Option<String> {
    let head = crate::host::local::read_to_string(dir.join(".git/HEAD")).ok()?;
    let first_word = |t: &str| {
        t.split_whitespace()
            .next()
            .map(|w| w.chars().take(40).collect())
    };
    match head.strip_prefix("ref: ") {
        Some(r) => {
            let r = r.split_whitespace().next()?;
            let text = crate::host::local::read_to_string(dir.join(".git").join(r)).ok()?;
            first_word(&text)
        }
        None => first_word(&head),
    }
}

/// The release ID cf-promises makes of a directory that is not a git
/// checkout. Its walk lists the top directory at every level (so in
/// practice it sees the top files only), and it hashes a zeroed buffer
/// rather than what it read: the ID is the SHA-1 of as many zero bytes as
/// the files it counted hold. Kept so, as the hubs that compare IDs
/// expect it.
fn release_id_from_tree(dir: &std::path::Path) -> std::io::Result<String> {
    use sha1::Digest;
    const SUFFIXES: &[&str] = &[
        ".cf",
        ".dat",
        ".txt",
        ".conf",
        ".mustache",
        ".json",
        ".yaml",
    ];
    let names: Vec<String> = crate::host::local::list_dir(dir)?
        .iter()
        .filter_map(|p| p.file_name()?.to_str().map(str::to_string))
        .collect();
    fn walk(names: &[String], current: &std::path::Path, depth: usize, total: &mut u64) {
        if depth > 64 {
            return;
        }
        for n in names {
            let sub = current.join(n);
            let Ok(meta) = crate::host::local::symlink_metadata(&sub) else {
                continue;
            };
            if meta.is_dir() {
                walk(names, &sub, depth + 1, total);
            } else if SUFFIXES.iter().any(|s| n.ends_with(s)) {
                *total += meta.len();
            }
        }
    }
    let mut total = 0u64;
    walk(&names, dir, 0, &mut total);
    let mut h = sha1::Sha1::new();
    let zeros = [0u8; 1024];
    let mut left = total;
    while left > 0 {
        let n = left.min(1024);
        h.update(&zeros[..n as usize]);
        left -= n;
    }
    Ok(h.finalize().iter().map(|b| format!("{b:02x}")).collect())
}
