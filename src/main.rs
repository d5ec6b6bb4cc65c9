//! The `agent` binary: parse flags, run the library, map the result to an
//! exit code. Invoked through a link named `cf-promises` it takes
//! cf-promises' flags; through one named `cf-key`, cf-key's.

// The C library calls our `main` directly: Rust's start-up for `fn main`
// reads /proc/self/maps to find the main thread's stack and sets up a
// signal stack (20 of an empty check's ~330 system calls, the maps file
// made by the kernel for the read) for a message on stack overflow (which
// becomes a plain SIGSEGV). What else it does is
// done below: the standard descriptors, SIGPIPE, and exit code 101 for a
// panic.
#![no_main]

/// Small blocks from a pool of our own (see `convergent::alloc`).
#[global_allocator]
static POOL: convergent::alloc::Pool = convergent::alloc::Pool;

use clap::Parser;
use convergent::cli::{AgentArgs, KeyArgs, PromisesArgs};
use convergent::config::{Config, Mode, PolicyFormat};
use convergent::eval::{EvalContext, EvalSettings};

use convergent::load::{LoadedFile, load_file};
use convergent::pipeline::{PipelineError, Prepared, RunReport, prepare, run_agent};
use convergent::report::json::{Envelope, JsonEvent, JsonSink};
use convergent::report::log::LogTarget;
use convergent::report::metrics::{RunMetrics, prometheus_text, promise_summary_line};
use convergent::report::{Counts, HumanSink, Observed, Sink, Tee};
use convergent::show::explain::explain;
use convergent::show::policy::{cf_promises_shape, cf_text, json_text, paths_as_given};
use convergent::show::tables::{classes_table, compile_filter, vars_table};
use convergent::syntax::json::policy_json;

/// How the process ends (the C entry point exits with it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ExitCode(u8);

impl ExitCode {
    const SUCCESS: ExitCode = ExitCode(0);
    const FAILURE: ExitCode = ExitCode(1);
}

impl From<u8> for ExitCode {
    fn from(code: u8) -> ExitCode {
        ExitCode(code)
    }
}

/// Rust's code for a program that panicked.
const EXIT_PANIC: i32 = 101;

/// Exit codes (see README): 0 success, 1 the policy has errors, could not
/// be loaded, or the run could not start; 2 bad command line (clap's own
/// code). With --detailed-exitcodes a run adds 2 when something was
/// repaired and 4 when something was not kept.
const EXIT_POLICY_ERROR: u8 = 1;
const EXIT_USAGE: u8 = 2;
const EXIT_REPAIRED: u8 = 2;
const EXIT_NOT_KEPT: u8 = 4;
/// agent control's `abortclasses` stopped the run (cf-agent's code).
const EXIT_ABORTED: u8 = 6;

#[unsafe(no_mangle)]
extern "C" fn main(_argc: libc::c_int, _argv: *const *const libc::c_char) -> libc::c_int {
    convergent::host::local::ensure_standard_descriptors();
    convergent::alloc::keep_big_blocks_in_the_heap();
    let code = match std::panic::catch_unwind(agent_main) {
        Ok(code) => i32::from(code.0),
        Err(_) => EXIT_PANIC,
    };
    // exit, not a return: it flushes what Rust's stdout still holds.
    std::process::exit(code)
}

fn agent_main() -> ExitCode {
    // Die quietly when the reader of our output goes away (`agent | head`),
    // as command-line tools do, instead of panicking on a write.
    // SAFETY: setting a signal disposition to its default before any thread
    // starts has no memory-safety preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let argv = match utf8_args(std::env::args_os()) {
        Ok(argv) => argv,
        Err(e) => {
            eprintln!("   error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let invoked_as = argv
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("agent")
        .to_string();
    if invoked_as == "cf-key" {
        return cf_key(KeyArgs::parse_from(&argv));
    }
    let mut args = if invoked_as == "cf-promises" {
        AgentArgs::from(
            PromisesArgs::parse_common(&argv).unwrap_or_else(|| PromisesArgs::parse_from(&argv)),
        )
    } else {
        AgentArgs::parse_from(&argv)
    };
    if args.man_page {
        return print_bytes(&convergent::cli::man_page());
    }
    if let Some(shell) = &args.completions {
        // clap checked the name against the shells it knows.
        let script = convergent::cli::completions(shell).unwrap_or_default();
        return print_bytes(&script);
    }
    // Called by CFEngine's name, the agent stands in for it: CFEngine's
    // work directory unless told otherwise.
    args.cfengine_name = matches!(invoked_as.as_str(), "cf-agent" | "cf-promises");
    let unknown_log_modules: Vec<String> = args
        .log_modules
        .iter()
        .flat_map(|m| m.split(','))
        .map(str::trim)
        .filter(|n| !n.is_empty() && !convergent::cli::LOG_MODULES.contains(n))
        .map(str::to_string)
        .collect();
    // The effective uid is what matters for the default work directory
    // (and whether we may give files away is the same question).
    let is_root = convergent::host::fs::can_chown();
    let config = match args.resolve(is_root) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("   error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let log_target = if config.json {
        LogTarget::Stderr
    } else {
        LogTarget::Stdout
    };
    convergent::report::log::init(
        config.log_level,
        convergent::report::log::LineStyle {
            timestamps: config.timestamps,
            color: config.color,
        },
        log_target,
    );
    convergent::trace!(
        "Work directory '{}', policy entry '{}', mode {:?}",
        config.workdir.display(),
        config.entry.display(),
        config.mode
    );
    // A run logs to the system log as cf-agent does (journald reads it
    // too); checks and inspections do not.
    if matches!(config.mode, Mode::Run) {
        convergent::report::log::open_syslog(&invoked_as);
    }
    for name in &unknown_log_modules {
        convergent::warn!("Unknown debug logging module '{name}'");
    }
    if config.no_extensions {
        convergent::debug!(
            "-E/--no-extensions: this agent loads no extensions, so there are none to leave out"
        );
    }
    if config.skip_db_check {
        convergent::debug!(
            "--skip-db-check: the state database is SQLite, which checks itself; nothing to skip"
        );
    }
    run(&config)
}

fn print_bytes(bytes: &[u8]) -> ExitCode {
    use std::io::Write;
    match std::io::stdout().write_all(bytes) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("   error: cannot write to standard output: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `cf-key`: makes this host's key pair, or prints a key's digest, or
/// trusts, lists or forgets the keys of other hosts.
fn cf_key(args: KeyArgs) -> ExitCode {
    use convergent::remote::keys::{DEFAULT_BITS, KeyPair, KeyRing, PublicKey};
    use convergent::remote::lastseen::{LastSeen, Seen};
    if args.version {
        println!("{}", convergent::VERSION_LINE);
        return ExitCode::SUCCESS;
    }
    if let Some(l) = &args.log_level
        && let Err(e) = convergent::config::parse_log_level(l)
    {
        eprintln!("   error: {e}");
        return ExitCode::from(EXIT_USAGE);
    }
    let inform = args.inform || args.verbose || args.debug;
    let workdir =
        match convergent::cli::resolve_workdir_as(None, convergent::host::fs::can_chown(), true) {
            Ok(w) => w,
            Err(e) => {
                eprintln!("   error: {e}");
                return ExitCode::from(EXIT_USAGE);
            }
        };
    let ring = KeyRing::of_workdir(&workdir);
    let lastseen = LastSeen::of_workdir(&workdir);
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("   error: {e}");
        ExitCode::from(1)
    };

    if args.show_hosts {
        let all = match lastseen.load() {
            Ok(a) => a,
            Err(e) => return fail(&e),
        };
        let row = |dir: &str, ip: &str, name: &str, when: &str, key: &str| {
            if args.no_truncate {
                println!("{dir}\t{ip}\t{name}\t{when}\t{key}");
            } else {
                let cut = |s: &str, n: usize| s.chars().take(n).collect::<String>();
                println!(
                    "{:<10} {:<40} {:<25} {:<26} {}",
                    cut(dir, 10),
                    cut(ip, 40),
                    cut(name, 25),
                    cut(when, 26),
                    key
                );
            }
        };
        row("Direction", "IP", "Name", "Last connection", "Key");
        for (address, seen) in &all {
            let when = convergent::host::clock::local_text(seen.when, "%a %b %e %H:%M:%S %Y")
                .unwrap_or_default();
            // Host names are not looked up: the address is shown (as -n).
            row("Outgoing", address, address, &when, &seen.key);
        }
        println!("Total Entries: {}", all.len());
        return ExitCode::SUCCESS;
    }

    if let Some(file) = &args.print_digest {
        let path = if file.is_empty() {
            ring.local_public_path()
        } else {
            std::path::PathBuf::from(file)
        };
        return match PublicKey::read(&path) {
            Ok(k) => {
                println!("{}", k.digest());
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        };
    }

    if let Some(what) = &args.remove_keys {
        let is_digest = what.starts_with("MD5=") || what.starts_with("SHA=");
        let digests = if is_digest {
            match lastseen.remove_key(what) {
                Ok(addresses) if addresses.is_empty() && !args.force_removal => {
                    eprintln!("   error: Unable to remove digest from lastseen database.");
                    return ExitCode::from(252);
                }
                Ok(_) => vec![what.clone()],
                Err(e) => return fail(&e),
            }
        } else {
            match lastseen.remove_address(what) {
                Ok(Some(key)) => vec![key],
                Ok(None) => {
                    eprintln!(
                        "   error: No key file(s) for entry '{what}' were found on the filesystem"
                    );
                    return ExitCode::from(1);
                }
                Err(e) => return fail(&e),
            }
        };
        let mut removed = 0;
        for d in &digests {
            match ring.remove_digest(d) {
                Ok(n) => removed += n,
                Err(e) => return fail(&e),
            }
        }
        if removed == 0 {
            eprintln!("   error: No key file(s) for entry '{what}' were found on the filesystem");
            return ExitCode::from(1);
        }
        if inform {
            println!("    info: Removed {removed} corresponding key file(s) from filesystem.");
        }
        return ExitCode::SUCCESS;
    }

    if let Some(arg) = &args.trust_key {
        // [[USER@]IPADDR:]FILENAME, split at the last colon (IPv6).
        let (file, address, user) = match arg.rsplit_once(':') {
            None => (arg.as_str(), None, "root"),
            Some((front, file)) => match front.split_once('@') {
                None => (file, Some(front), "root"),
                Some((user, ip)) => (file, (!ip.is_empty()).then_some(ip), user),
            },
        };
        if address.is_none() {
            println!(
                "  notice: Establishing trust might be incomplete. For completeness, use --trust-key IPADDR:filename"
            );
        }
        let key = match PublicKey::read(std::path::Path::new(file)) {
            Ok(k) => k,
            Err(e) => return fail(&e),
        };
        if let Err(e) = ring.trust(user, &key) {
            return fail(&e);
        }
        if let Some(address) = address {
            let seen = Seen {
                key: key.digest(),
                user: user.to_string(),
                when: convergent::host::clock::now_secs(),
                how: "trusted".into(),
            };
            if let Err(e) = lastseen.record(address, seen) {
                return fail(&e);
            }
        }
        return ExitCode::SUCCESS;
    }

    let bits = match args.key_bits.as_deref().map(str::parse::<usize>) {
        None => DEFAULT_BITS,
        Some(Ok(b)) if b >= 1024 => b,
        Some(_) => {
            eprintln!(
                "   error: -T/--key-type '{}': expected a key size in bits, at least 1024",
                args.key_bits.as_deref().unwrap_or_default()
            );
            return ExitCode::from(EXIT_USAGE);
        }
    };
    let (public, private) = match &args.output_file {
        Some(f) => (
            std::path::PathBuf::from(format!("{f}.pub")),
            std::path::PathBuf::from(format!("{f}.priv")),
        ),
        None => {
            if let Err(e) = ring.ensure_dir() {
                return fail(&e);
            }
            (ring.local_public_path(), ring.local_private_path())
        }
    };
    for p in [&public, &private] {
        if convergent::host::local::exists(p) {
            return fail(&format!("A key file already exists at {}", p.display()));
        }
    }
    if inform {
        println!(
            "    info: Making a key pair for CFEngine, please wait, this could take a minute..."
        );
    }
    let pair = match KeyPair::generate(bits) {
        Ok(p) => p,
        Err(e) => return fail(&e),
    };
    match pair.write_new(&public, &private) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(&e),
    }
}

/// The command line as text. Policy file names, bundle names, classes and
/// the work directory are all text to the agent (a policy names its files
/// in UTF-8 strings), so an argument that is not UTF-8 is refused, naming
/// it, where `std::env::args` would panic. The program name may be anything.
fn utf8_args(args: impl Iterator<Item = std::ffi::OsString>) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    for (i, a) in args.enumerate() {
        match a.into_string() {
            Ok(s) => out.push(s),
            Err(a) if i == 0 => out.push(a.to_string_lossy().into_owned()),
            Err(a) => {
                let after = match out.last() {
                    Some(prev) if i > 1 && prev.starts_with('-') => format!(" (after {prev})"),
                    _ => String::new(),
                };
                return Err(format!(
                    "argument {i}{after} is not valid UTF-8: '{}' (the agent reads file names, bundles and classes as UTF-8 text)",
                    a.to_string_lossy()
                ));
            }
        }
    }
    Ok(out)
}

/// Carries out the mode the command line chose, each in its own function.
fn run(config: &Config) -> ExitCode {
    match &config.mode {
        Mode::Version => {
            println!("{}", convergent::VERSION_LINE);
            ExitCode::SUCCESS
        }
        Mode::SyntaxOnly(files) => check_syntax(files),
        Mode::PolicyOutput {
            format,
            entry_as_given,
        } => print_policy(config, *format, entry_as_given.as_deref()),
        Mode::Run => match &config.bootstrap {
            Some(hub) => bootstrap(config, hub),
            None => run_policy(config),
        },
        Mode::Why(query) => why(config, query),
        Mode::Graph => print_graph(config),
        Mode::Check | Mode::Show { .. } | Mode::Explain(_) => check_policy(config),
        Mode::SelfDiagnostics => self_diagnostics(config),
        Mode::SyntaxDescription => {
            let doc = convergent::schema::syntax_description();
            match serde_json::to_string_pretty(&doc) {
                Ok(text) => {
                    println!("{text}");
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("   error: {e}");
                    ExitCode::from(EXIT_POLICY_ERROR)
                }
            }
        }
        Mode::LogModulesHelp => {
            println!();
            println!(
                "--log-modules accepts a comma separated list of one or more of the following:"
            );
            println!();
            for m in convergent::cli::LOG_MODULES {
                println!("    {m}");
            }
            println!();
            // cf-agent ends this listing with its failure code.
            ExitCode::from(1)
        }
        Mode::RetiredDiagnostic => {
            convergent::error!("Self-diagnostic functionality is retired.");
            ExitCode::SUCCESS
        }
    }
}

/// cf-agent's `-x`: where this agent keeps its things, and whether they
/// are there.
fn self_diagnostics(config: &Config) -> ExitCode {
    let layout = convergent::discover::Layout::for_workdir(&config.workdir);
    let w = &config.workdir;
    println!("self-diagnostics for agent using workdir '{}'", w.display());
    println!(
        "self-diagnostics for agent using inputdir '{}'",
        layout.inputdir.display()
    );
    println!("self-diagnostics for agent using logdir '{}'", w.display());
    println!(
        "self-diagnostics for agent using statedir '{}'",
        w.join("state").display()
    );
    let exists = |p: &std::path::Path| convergent::host::local::exists(p);
    let line = |ok: bool, what: &str, detail: String| {
        println!("[ {} ] {what}: {detail}", if ok { "YES" } else { "NO " });
    };
    let hub = w.join("policy_server.dat");
    line(
        exists(&hub),
        "Check that agent is bootstrapped",
        if exists(&hub) {
            format!("Bootstrapped ('{}' exists)", hub.display())
        } else {
            "Not bootstrapped".into()
        },
    );
    let am_hub = w.join("state/am_policy_hub");
    line(
        exists(&am_hub),
        "Check if agent is acting as a policy server",
        if exists(&am_hub) {
            "Acting as a policy server".into()
        } else {
            "Not acting as a policy server".into()
        },
    );
    for (what, file) in [
        ("private key", "localhost.priv"),
        ("public key", "localhost.pub"),
    ] {
        let p = w.join("ppkeys").join(file);
        let ok = exists(&p);
        line(
            ok,
            &format!("Check {what}"),
            if ok {
                format!("OK at '{}'", p.display())
            } else {
                format!("No {what} found at '{}'", p.display())
            },
        );
    }
    let db = convergent::state::StateStore::dir(w);
    let ok = exists(&db);
    line(
        ok,
        "Check state database",
        if ok {
            format!("Found at '{}'", db.display())
        } else {
            format!("No state yet at '{}'", db.display())
        },
    );
    ExitCode::SUCCESS
}

/// `--syntax-only`: each file parsed and validated alone, every file's
/// diagnostics printed before the exit code says whether any had errors.
fn check_syntax(files: &[std::path::PathBuf]) -> ExitCode {
    let mut failed = false;
    for f in files {
        match load_file(f) {
            Ok(mut loaded) => {
                loaded.validate_alone();
                eprint!("{}", loaded.render_diagnostics());
                failed |= loaded.has_errors();
            }
            Err(e) => {
                eprintln!("   error: {e}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::from(EXIT_POLICY_ERROR)
    } else {
        ExitCode::SUCCESS
    }
}

/// `-p FORMAT`: the parsed policy printed as cf-promises prints it (or
/// as our JSON with spans); nothing is printed for a policy with errors.
/// The `-full` formats load every input, the others the entry file alone.
fn print_policy(config: &Config, format: PolicyFormat, entry_as_given: Option<&str>) -> ExitCode {
    let files: Vec<std::sync::Arc<LoadedFile>> = if format.full() {
        let settings = EvalSettings {
            no_side_effects: true,
            dry_run: true,
            ..EvalSettings::default()
        };
        let prepared = match prepare_or_exit(config, settings) {
            Ok(p) => p,
            Err(code) => return code,
        };
        eprint!("{}", prepared.render_diagnostics());
        if prepared.has_errors() {
            return ExitCode::from(EXIT_POLICY_ERROR);
        }
        prepared.policy.files.clone()
    } else {
        match load_file(&config.entry) {
            Ok(mut l) => {
                l.validate_alone();
                eprint!("{}", l.render_diagnostics());
                if l.has_errors() {
                    return ExitCode::from(EXIT_POLICY_ERROR);
                }
                vec![std::sync::Arc::new(l)]
            }
            Err(e) => {
                eprintln!("   error: {e}");
                return ExitCode::from(EXIT_POLICY_ERROR);
            }
        }
    };
    let ours = policy_json(files.iter().map(|f| (&f.tree, &f.source)));
    let text = match format {
        PolicyFormat::None => String::new(),
        PolicyFormat::JsonSpans => serde_json::to_string_pretty(&ours).unwrap_or_default() + "\n",
        PolicyFormat::Json | PolicyFormat::JsonFull => {
            json_text(&shaped(config, entry_as_given, &ours))
        }
        PolicyFormat::Cf | PolicyFormat::CfFull => cf_text(&shaped(config, entry_as_given, &ours)),
    };
    print!("{text}");
    ExitCode::SUCCESS
}

/// The policy in cf-promises' shape, its paths as the command line gave them.
fn shaped(
    config: &Config,
    entry_as_given: Option<&str>,
    ours: &serde_json::Value,
) -> serde_json::Value {
    let mut v = cf_promises_shape(ours);
    if let (Some(given), Ok(cwd)) = (entry_as_given, std::env::current_dir()) {
        paths_as_given(&mut v, given, &config.entry, &cwd);
    }
    v
}

/// A policy run: events go to the human or the JSON sink, and to the
/// report file if one is asked for; then the closing summary, the
/// `--show-evaluated-*` tables and the exit code. Whatever happens, the
/// run ends with its `run_end` event, its report file and its metrics.
fn run_policy(config: &Config) -> ExitCode {
    let started = std::time::Instant::now();
    let start_secs = convergent::host::clock::now_secs();
    let envelope = Envelope {
        run_id: convergent::host::local::run_id(),
        hostname: convergent::host::local::hostname(),
    };
    let mut human = HumanSink::default();
    let mut json = JsonSink::new(std::io::stdout(), envelope.clone());
    let mut file = config
        .report_file
        .as_ref()
        .map(|_| JsonSink::new(Vec::new(), envelope.clone()));
    let mut sinks: Vec<&mut dyn Sink> = Vec::new();
    if config.json {
        sinks.push(&mut json);
    } else {
        sinks.push(&mut human);
    }
    if let Some(f) = file.as_mut() {
        sinks.push(f);
    }
    let mut tee = Tee(sinks);
    let mut sink = Observed::new(&mut tee);
    sink.event(&run_start_event(config));
    let result = run_agent(
        config,
        &mut sink,
        &mut report_loaded,
        Some(&check_as_cf_promises),
    );
    let (report, load_failed) = match result {
        Ok(r) => (Some(r), false),
        Err(e) => {
            if !matches!(e, PipelineError::PolicyErrors) {
                convergent::error!("{e}");
            }
            let load_failed = matches!(
                e,
                PipelineError::PolicyErrors | PipelineError::Load(_) | PipelineError::Validation(_)
            );
            (None, load_failed)
        }
    };
    if let Some(report) = &report {
        log_run_failures(report);
        // `-p`/`--profile`: the times, as cf-agent 3.27 prints them.
        if let Some(events) = &report.summary.profile {
            let json = convergent::report::profile::to_json(events);
            println!(
                "{}",
                serde_json::to_string_pretty(&json).unwrap_or_default()
            );
        }
    }
    if config.timing {
        convergent::debug!(
            "T: This measurement event, alias 'agent run', took {:.6} seconds",
            started.elapsed().as_secs_f64()
        );
    }
    sink.flush_errors();
    let (c, errors, rollbacks) = (sink.counts, sink.errors, sink.rollbacks);
    let aborted = report.as_ref().is_some_and(|r| r.summary.aborted.is_some());
    let code = match &report {
        None => EXIT_POLICY_ERROR,
        Some(_) => run_exit_code(config, aborted, &c, errors, rollbacks),
    };
    let status = match (&report, aborted) {
        (None, _) => "error",
        (Some(_), true) => "aborted",
        (Some(_), false) => "ok",
    };
    let end = JsonEvent::RunEnd {
        status: status.to_string(),
        kept: c.kept,
        repaired: c.repaired,
        not_kept: c.not_kept,
        errors,
        rollbacks,
        exit_code: code,
        duration_ms: started.elapsed().as_secs_f64() * 1000.0,
    };
    sink.event(&end);
    // The sinks are borrowed by the tee until here.
    drop(tee);
    if let (Some(path), Some(f)) = (&config.report_file, file) {
        write_report_file(path, f);
    }
    let end_secs = convergent::host::clock::now_secs();
    if let Some(path) = &config.metrics_file {
        let m = RunMetrics {
            counts: c,
            errors,
            rollbacks,
            duration_secs: started.elapsed().as_secs_f64(),
            end_secs,
            exit_code: code,
            success: status == "ok",
            dry_run: config.dry_run,
        };
        let text = prometheus_text(&m, env!("CARGO_PKG_VERSION"), convergent::COMMIT);
        // 0644: node_exporter reads it as its own user.
        if let Err(e) = convergent::host::local::write_atomic(path, text.as_bytes(), 0o644) {
            convergent::error!("Could not write the metrics file '{}': {e}", path.display());
        }
    }
    let Some(report) = report else {
        if load_failed {
            return failsafe(config);
        }
        return ExitCode::from(code);
    };
    let version = report
        .prepared
        .ctx
        .common_control("version")
        .and_then(|v| v.as_scalar())
        .map(str::to_string);
    if let Some(line) = promise_summary_line(start_secs, end_secs, version.as_deref(), &c) {
        let path = config.workdir.join("promise_summary.log");
        if let Err(e) = convergent::host::local::open_append_private(&path)
            .and_then(|mut f| f.append_synced(line.as_bytes()))
        {
            convergent::error!("Could not append to '{}': {e}", path.display());
        }
    }
    log_summary(&c);
    if let Some(chroot) = &report.changes_chroot {
        let mut out = std::io::stdout().lock();
        if let Err(e) = chroot.report(&mut out, &config.workdir.join("bin")) {
            convergent::error!("Failed to report the simulated changes: {e}");
        }
        chroot.remove();
    }
    let shown = show_tables(
        &report.prepared.ctx,
        config.show_evaluated_classes.as_ref(),
        config.show_evaluated_vars.as_ref(),
    );
    leak_at_exit(report);
    match shown {
        Ok(out) => print!("{out}"),
        Err(code) => return code,
    }
    ExitCode::from(code)
}

/// The process ends right after a run: its policy, variables, classes and
/// function results (a loaded 1 MB JSON file is some 100 000 allocations)
/// go with it, without a walk over them to free each one. What has a
/// `Drop` that acts (the host's pending directory syncs, helpers to kill)
/// is still dropped.
fn leak_at_exit(report: convergent::pipeline::RunReport) {
    let mut prepared = report.prepared;
    std::mem::forget(std::mem::take(&mut prepared.ctx.vars));
    std::mem::forget(std::mem::take(&mut prepared.ctx.classes));
    std::mem::forget(std::mem::take(&mut prepared.ctx.fn_cache));
    std::mem::forget(std::mem::take(&mut prepared.ctx.merged));
    std::mem::forget(prepared.policy);
}

/// `--bootstrap HUB`: prepares the work directory, runs the failsafe
/// policy (with the class `bootstrap_mode`) to fetch the hub's policy,
/// and undoes it all when that policy did not arrive (see
/// `convergent::bootstrap`).
fn bootstrap(config: &Config, hub: &str) -> ExitCode {
    let host = convergent::host::Host::real();
    let b = match convergent::bootstrap::prepare(&host, &config.workdir, hub, config.trust_server) {
        Ok(b) => b,
        Err(e) => {
            convergent::error!("{e}");
            return ExitCode::from(EXIT_POLICY_ERROR);
        }
    };
    let mut run = config.clone();
    run.bootstrap = None;
    run.entry = b.failsafe();
    run.bundlesequence = None;
    run.defines.push("bootstrap_mode".into());
    if config.skip_bootstrap_policy_run {
        run.defines.push("skip_policy_on_bootstrap".into());
    }
    let code = run_policy(&run);
    if convergent::bootstrap::finish(&host, &b) {
        code
    } else {
        ExitCode::from(EXIT_POLICY_ERROR)
    }
}

/// A policy of the inputs directory that is missing or does not pass the
/// check: the failsafe policy runs instead, as cf-agent runs its own, so
/// that the next update can repair a bad push; not when a person is at
/// the terminal (cf-agent does not either), nor for any other policy.
fn failsafe(config: &Config) -> ExitCode {
    use std::io::IsTerminal;
    // The report file keeps the run that failed, which is what its reader
    // needs to see; the failsafe run's events go to standard output.
    let config = &Config {
        report_file: None,
        ..config.clone()
    };
    let Some(entry) = convergent::bootstrap::failsafe_for(&config.workdir, &config.entry) else {
        return ExitCode::from(EXIT_POLICY_ERROR);
    };
    if std::io::stdin().is_terminal() && std::io::stdout().is_terminal() {
        convergent::error!(
            "Failsafe condition triggered. Interactive session detected, skipping failsafe.cf execution."
        );
        return ExitCode::from(EXIT_POLICY_ERROR);
    }
    convergent::error!(
        "CFEngine was not able to get confirmation of promises from cf-promises, so going to failsafe"
    );
    if let Err(e) = convergent::bootstrap::ensure_failsafe(&convergent::host::Host::real(), &entry)
    {
        convergent::error!("{e}");
        return ExitCode::from(EXIT_POLICY_ERROR);
    }
    let mut run = config.clone();
    run.entry = entry;
    run.bundlesequence = None;
    run.defines.push("failsafe_fallback".into());
    run_policy(&run)
}

/// The event that opens a run's report: when, which agent, which policy.
fn run_start_event(config: &Config) -> JsonEvent {
    JsonEvent::RunStart {
        version: convergent::VERSION_LINE.to_string(),
        commit: convergent::COMMIT.to_string(),
        policy: config.entry.display().to_string(),
        workdir: config.workdir.display().to_string(),
        dry_run: config.dry_run,
    }
}

/// Called once the policy is loaded, before anything acts: its
/// diagnostics, load errors and pre-evaluation failures.
fn report_loaded(p: &Prepared) {
    // An input that cannot be read comes first, as in cf-agent: what
    // follows from it (bodies it would define) is not reported.
    for e in &p.report.load_errors {
        convergent::error!("{e}");
    }
    let diagnostics = p.render_diagnostics();
    eprint!("{diagnostics}");
    // The diagnostics' errors are the run's errors too (its events, its
    // exit code, the system log).
    for line in diagnostics.lines() {
        if let Some(message) = line.trim_start().strip_prefix("error: ") {
            convergent::report::log::record_error(message);
        }
    }
    if let Some(level) = p
        .ctx
        .common_control("system_log_level")
        .and_then(|v| v.as_scalar())
        .and_then(|l| convergent::config::parse_log_level(l).ok())
    {
        convergent::report::log::set_system_log_level(level);
    }
    // Promises that failed while pre-evaluating, as cf-agent
    // reports them before it runs anything.
    for m in &p.report.messages {
        // A fatal one is told with the policy's diagnostics.
        if p.report.fatal.as_ref() != Some(&m.message) {
            convergent::error!("{} ({}:{})", m.message, m.file, m.line);
        }
    }
}

/// The run's failure messages not already logged when the policy was
/// loaded.
fn log_run_failures(report: &RunReport) {
    for m in &report.summary.messages {
        if !report.prepared.report.messages.contains(m) {
            convergent::error!("{} ({}:{})", m.message, m.file, m.line);
        }
    }
}

/// `--report-file`: the run's JSON events, written where only the owner
/// can read them.
fn write_report_file(path: &std::path::Path, file: JsonSink<Vec<u8>>) {
    // 0600: the report holds expanded command lines.
    if let Err(e) = convergent::host::local::write_private(path, &file.into_inner()) {
        convergent::error!("Could not write the report file '{}': {e}", path.display());
    }
}

/// The promise counts of the run, with their shares.
fn log_summary(c: &Counts) {
    // Verbose only: under -I cf-agent prints changes and nothing else,
    // and cron mails or scripts may count those lines.
    if c.total() > 0 {
        let pct = |n: usize| 100.0 * n as f64 / c.total() as f64;
        convergent::debug!(
            "Summary: {} promises: {} kept ({:.2}%), {} repaired ({:.2}%), {} not kept ({:.2}%)",
            c.total(),
            c.kept,
            pct(c.kept),
            c.repaired,
            pct(c.repaired),
            c.not_kept,
            pct(c.not_kept)
        );
    }
}

/// The exit code of a run that finished: an abort first, then what
/// `--detailed-exitcodes` adds for repairs and for failures, where any
/// `error:` line of the run and any transaction undone is a failure.
fn run_exit_code(
    config: &Config,
    aborted: bool,
    c: &Counts,
    errors: usize,
    rollbacks: usize,
) -> u8 {
    if aborted {
        return EXIT_ABORTED;
    }
    if config.detailed_exitcodes {
        let repaired = if c.repaired > 0 { EXIT_REPAIRED } else { 0 };
        let failed = c.not_kept > 0 || errors > 0 || rollbacks > 0;
        let not_kept = if failed { EXIT_NOT_KEPT } else { 0 };
        return repaired | not_kept;
    }
    0
}

/// The policy loaded and pre-evaluated with `settings`, or the exit code
/// after saying why it could not be.
fn prepare_or_exit(config: &Config, settings: EvalSettings) -> Result<Prepared, ExitCode> {
    prepare(config, settings).map_err(|e| {
        eprintln!("   error: {e}");
        ExitCode::from(EXIT_POLICY_ERROR)
    })
}

/// `--graph`: the promise graph in Graphviz dot, from a dry pre-evaluation.
fn print_graph(config: &Config) -> ExitCode {
    let settings = EvalSettings {
        no_side_effects: false,
        dry_run: true,
        ..EvalSettings::default()
    };
    let mut prepared = match prepare_or_exit(config, settings) {
        Ok(p) => p,
        Err(code) => return code,
    };
    eprint!("{}", prepared.render_diagnostics());
    // The graph is printed even for a policy with a cycle: it is
    // the way to see the cycle.
    let graph =
        convergent::agent::graph::PromiseGraph::build(&mut prepared.ctx, &prepared.policy, true);
    print!("{}", convergent::show::graph::to_dot(&graph));
    if prepared.has_errors() {
        ExitCode::from(EXIT_POLICY_ERROR)
    } else {
        ExitCode::SUCCESS
    }
}

/// The agent's pre-check by its work directory's `cf-promises`, when that
/// is this program: made here as that program would make it with the
/// command line `argv` (parsed as cf-promises parses it, its own log
/// level), without a second process. Its memory is freed before the run
/// loads the policy again.
fn check_as_cf_promises(argv: &[String]) -> bool {
    let parsed =
        PromisesArgs::parse_common(argv).map_or_else(|| PromisesArgs::try_parse_from(argv), Ok);
    let mut args = match parsed {
        Ok(a) => AgentArgs::from(a),
        Err(e) => {
            eprintln!("   error: {e}");
            return false;
        }
    };
    args.cfengine_name = true;
    let config = match args.resolve(convergent::host::fs::can_chown()) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("   error: {e}");
            return false;
        }
    };
    convergent::report::log::as_separate_program(config.log_level, || {
        check_policy_then(&config, drop)
    }) == ExitCode::SUCCESS
}

/// cf-promises' check, and `--show-vars`, `--show-classes` and `--explain`,
/// which answer from a policy that passed it.
fn check_policy(config: &Config) -> ExitCode {
    check_policy_then(config, Prepared::release_at_exit)
}

/// `check_policy`, with what is done with the loaded policy afterwards.
fn check_policy_then(config: &Config, after: fn(Prepared)) -> ExitCode {
    let settings = EvalSettings {
        no_side_effects: false,
        no_functions: !config.eval_functions,
        dry_run: config.dry_run,
        command_output_shown: config.log_level >= convergent::config::LogLevel::Info,
        ..EvalSettings::default()
    };
    let mut prepared = match prepare_or_exit(config, settings) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let code = check_prepared(config, &mut prepared);
    after(prepared);
    code
}

/// `check_policy` on a policy loaded and pre-evaluated.
fn check_prepared(config: &Config, prepared: &mut Prepared) -> ExitCode {
    // An input that cannot be read comes first, as cf-promises reports
    // it; what follows from it (bodies it would define) is not reported.
    for e in &prepared.report.load_errors {
        eprintln!("   error: {e}");
    }
    eprint!("{}", prepared.render_diagnostics());
    if prepared.has_errors() {
        return ExitCode::from(EXIT_POLICY_ERROR);
    }
    // Promises that failed, and variables left with references to
    // nothing: one located line each. They fail alone, as in
    // cf-promises, so they do not change the exit code.
    for m in &prepared.report.messages {
        eprintln!("   error: {}:{}: {}", m.file, m.line, m.message);
    }
    // The full check ends with the bundlesequence (unless `-b` names
    // one): every bundle it names must be defined.
    if config.full_check && config.bundlesequence.is_none() {
        let missing =
            convergent::agent::missing_sequence_bundles(&mut prepared.ctx, &prepared.policy);
        if !missing.is_empty() {
            for name in missing {
                eprintln!(
                    "   error: Bundle '{name}' listed in the bundlesequence is not a defined bundle"
                );
            }
            eprintln!(
                "   error: Fatal CFEngine error: Errors in promise bundles: could not verify \
                 bundlesequence"
            );
            return ExitCode::from(EXIT_POLICY_ERROR);
        }
    }
    // cf-promises says nothing of these (the MPF has some on every
    // platform): they are said under -v, or with `-W lint` as warnings,
    // `-W error=lint` as errors that fail the check.
    for m in &prepared.report.unresolved {
        if config.unresolved_are_errors {
            eprintln!("   error: {}:{}: {}", m.file, m.line, m.message);
        } else if config.note_unresolved {
            eprintln!(" warning: {}:{}: {}", m.file, m.line, m.message);
        } else {
            convergent::debug!("{}:{}: {}", m.file, m.line, m.message);
        }
    }
    if config.unresolved_are_errors && !prepared.report.unresolved.is_empty() {
        return ExitCode::from(EXIT_POLICY_ERROR);
    }
    if let Some(dir) = &config.tag_release {
        match convergent::pipeline::tag_release(dir) {
            Ok(()) => convergent::debug!("Release tagging done!"),
            Err(e) => {
                convergent::error!("{e}");
                convergent::error!("The given directory could not be tagged, sorry.");
                return ExitCode::from(EXIT_POLICY_ERROR);
            }
        }
    }
    match &config.mode {
        Mode::Show { vars, classes } => {
            match show_tables(&prepared.ctx, classes.as_ref(), vars.as_ref()) {
                Ok(out) => print!("{out}"),
                Err(code) => return code,
            }
        }
        Mode::Explain(name) => return explain_name(prepared, name),
        _ => {}
    }
    ExitCode::SUCCESS
}

/// `--explain NAME`: what the policy says of a property, variable or class.
fn explain_name(prepared: &Prepared, name: &str) -> ExitCode {
    match explain(&prepared.ctx, &prepared.properties, name) {
        Some(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        None => {
            eprintln!(
                "   error: '{name}' names no property, variable (write scope.name) or \
                 class of this policy on this host"
            );
            ExitCode::from(EXIT_POLICY_ERROR)
        }
    }
}

/// `--why`: answers from the record the last run left in the state
/// directory; the policy is not read again.
fn why(config: &Config, query: &str) -> ExitCode {
    use convergent::agent::why::{WHY_FILE, WhyLog};
    use convergent::show::why::render;
    let path = convergent::state::StateStore::dir(&config.workdir).join(WHY_FILE);
    let text = match convergent::host::local::read_to_string(&path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!(
                "   error: no run is recorded in '{}' ({e}); run the policy first (a dry run, -n, \
                 will do)",
                path.display()
            );
            return ExitCode::from(EXIT_POLICY_ERROR);
        }
    };
    let log: WhyLog = match serde_json::from_str(&text) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("   error: cannot read '{}': {e}", path.display());
            return ExitCode::from(EXIT_POLICY_ERROR);
        }
    };
    let found = log.find(query);
    print!("{}", render(&log, query, &found));
    if found.is_empty() {
        ExitCode::from(EXIT_POLICY_ERROR)
    } else {
        ExitCode::SUCCESS
    }
}

/// The classes table then the variables table, each if asked for.
fn show_tables(
    ctx: &EvalContext,
    classes: Option<&String>,
    vars: Option<&String>,
) -> Result<String, ExitCode> {
    let mut out = String::new();
    for (filter, is_classes) in [(classes, true), (vars, false)] {
        let Some(pattern) = filter else { continue };
        let re = compile_filter(pattern).map_err(|e| {
            eprintln!("   error: invalid filter '{pattern}': {e}");
            ExitCode::from(EXIT_USAGE)
        })?;
        out.push_str(&if is_classes {
            classes_table(ctx, re.as_ref())
        } else {
            vars_table(ctx, re.as_ref())
        });
    }
    Ok(out)
}
