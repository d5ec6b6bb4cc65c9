//! The `agent` binary: parse flags, run the library, map the result to an
//! exit code. Invoked through a link named `cf-promises` it takes
//! cf-promises' flags.

use clap::Parser;
use convergent::cli::{AgentArgs, PromisesArgs};
use convergent::config::{Config, Mode};
use convergent::eval::EvalSettings;
use convergent::eval::agent::AgentRun;
use convergent::load::{LoadedFile, load_file};
use convergent::pipeline::prepare;
use convergent::report::HumanSink;
use convergent::report::tables::{classes_table, compile_filter, vars_table};
use convergent::syntax::json::policy_json;
use std::process::ExitCode;

/// Exit codes (see README): 0 success, 1 the policy has errors or could not
/// be loaded, 2 bad command line (clap's own code).
const EXIT_POLICY_ERROR: u8 = 1;
const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().collect();
    let invoked_as = argv
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("agent")
        .to_string();
    let args = if invoked_as == "cf-promises" {
        let p = PromisesArgs::parse_from(&argv);
        if p.syntax_description.is_some() {
            eprintln!("   error: option -s/--syntax-description is not supported yet");
            return ExitCode::from(EXIT_USAGE);
        }
        AgentArgs::from(p)
    } else {
        AgentArgs::parse_from(&argv)
    };
    // SAFETY-free check for root: the effective uid is what matters for the
    // default work directory.
    let is_root = std::fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false);
    let config = match Config::from_args(args, is_root) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("   error: {e}");
            return ExitCode::from(EXIT_USAGE);
        }
    };
    convergent::report::log::init(config.log_level, false);
    run(&config)
}

fn run(config: &Config) -> ExitCode {
    match &config.mode {
        Mode::Version => {
            println!("{}", convergent::VERSION_LINE);
            ExitCode::SUCCESS
        }
        Mode::SyntaxOnly(files) => {
            let mut failed = false;
            for f in files {
                match load_file(f) {
                    Ok(loaded) => {
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
        Mode::PolicyJson => {
            let loaded: LoadedFile = match load_file(&config.entry) {
                Ok(l) => l,
                Err(e) => {
                    eprintln!("   error: {e}");
                    return ExitCode::from(EXIT_POLICY_ERROR);
                }
            };
            eprint!("{}", loaded.render_diagnostics());
            if loaded.has_errors() {
                return ExitCode::from(EXIT_POLICY_ERROR);
            }
            let v = policy_json([(&loaded.tree, &loaded.source)]);
            println!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
            ExitCode::SUCCESS
        }
        Mode::Check | Mode::Show { .. } | Mode::Run => {
            // cf-promises runs functions such as execresult while checking,
            // so the show and check modes do too; only --syntax-only (which
            // evaluates nothing) is free of side effects.
            let settings = EvalSettings {
                no_side_effects: false,
                dry_run: config.dry_run,
            };
            let prepared = match prepare(config, settings) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("   error: {e}");
                    return ExitCode::from(EXIT_POLICY_ERROR);
                }
            };
            eprint!("{}", prepared.render_diagnostics());
            for e in &prepared.report.load_errors {
                eprintln!("   error: {e}");
            }
            if prepared.has_errors() {
                return ExitCode::from(EXIT_POLICY_ERROR);
            }
            match &config.mode {
                Mode::Show { vars, classes } => {
                    let mut out = String::new();
                    for (filter, is_classes) in [(classes, true), (vars, false)] {
                        let Some(pattern) = filter else { continue };
                        let re = match compile_filter(pattern) {
                            Ok(re) => re,
                            Err(e) => {
                                eprintln!("   error: invalid filter '{pattern}': {e}");
                                return ExitCode::from(EXIT_USAGE);
                            }
                        };
                        out.push_str(&if is_classes {
                            classes_table(&prepared.ctx, re.as_ref())
                        } else {
                            vars_table(&prepared.ctx, re.as_ref())
                        });
                    }
                    print!("{out}");
                    ExitCode::SUCCESS
                }
                Mode::Check => ExitCode::SUCCESS,
                _ => {
                    let mut prepared = prepared;
                    let mut sink = HumanSink::default();
                    let mut run = AgentRun::new(
                        &mut prepared.ctx,
                        &prepared.policy,
                        &mut sink,
                        config.dry_run,
                    );
                    let seq = match run.bundlesequence(config.bundlesequence.as_deref()) {
                        Ok(s) => s,
                        Err(e) => {
                            tracing::error!("{e}");
                            return ExitCode::from(EXIT_POLICY_ERROR);
                        }
                    };
                    if let Err(e) = run.run(&seq) {
                        tracing::error!("{e}");
                        return ExitCode::from(EXIT_POLICY_ERROR);
                    }
                    for m in &run.summary.messages {
                        tracing::error!("{} ({}:{})", m.message, m.file, m.line);
                    }
                    drop(run);
                    let mut out = String::new();
                    for (filter, is_classes) in [
                        (&config.show_evaluated_classes, true),
                        (&config.show_evaluated_vars, false),
                    ] {
                        let Some(pattern) = filter else { continue };
                        let re = match compile_filter(pattern) {
                            Ok(re) => re,
                            Err(e) => {
                                eprintln!("   error: invalid filter '{pattern}': {e}");
                                return ExitCode::from(EXIT_USAGE);
                            }
                        };
                        out.push_str(&if is_classes {
                            classes_table(&prepared.ctx, re.as_ref())
                        } else {
                            vars_table(&prepared.ctx, re.as_ref())
                        });
                    }
                    print!("{out}");
                    ExitCode::SUCCESS
                }
            }
        }
    }
}
