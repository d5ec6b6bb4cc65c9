//! Raw command-line flags, a plain mirror of argv. Nothing here is resolved
//! or checked beyond what clap does; `config` turns these into settings.
//!
//! Three flag sets share one binary: cf-agent's (the default),
//! cf-promises' and cf-key's (when invoked through a link of that name).

use crate::config::{
    Config, ConfigError, LogLevel, Mode, PolicyFormat, default_workdir, normalize, parse_log_level,
    resolve_entry, split_list,
};
use clap::{ArgAction, Parser};
use std::path::PathBuf;

/// What `agent --help` and the manual page say after the flags.
const AGENT_AFTER_HELP: &str = "\
Work directory (-w): /var/lib/convergent as root, else $XDG_STATE_HOME/convergent
(~/.local/state/convergent); the policy is WORKDIR/inputs/promises.cf unless -f names one.

Exit codes: 0 the policy ran (or the check passed); 1 the policy has errors or the run could
not start; 2 bad command line; 6 an abortclasses class stopped the run. With
--detailed-exitcodes: 0 all kept, 2 something repaired, 4 something not kept, 6 both.";

/// Flags accepted as `agent` or `cf-agent`.
#[derive(Debug, Parser, Default)]
#[command(
    name = "agent",
    version = crate::VERSION_LINE,
    disable_version_flag = true,
    // getopt lets a flag repeat (the last value wins); so do we.
    args_override_self = true,
    about = "convergent: brings a host to the state its CFEngine 3 policy promises",
    after_help = AGENT_AFTER_HELP,
    next_help_heading = "cf-agent options"
)]
pub struct AgentArgs {
    /// Policy entry file (relative names are looked up in WORKDIR/inputs, ./names in the current directory)
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Option<String>,

    /// Policy entry file given without -f, a relative name taken in the
    /// current directory; it wins over -f, as in cf-agent
    #[arg(value_name = "POLICY")]
    pub policy: Option<String>,

    /// Run these bundles instead of body common control's bundlesequence (comma separated)
    #[arg(short = 'b', long = "bundlesequence", value_name = "BUNDLES")]
    pub bundlesequence: Option<String>,

    /// Define classes before anything else (comma separated; repeatable)
    #[arg(short = 'D', long = "define", value_name = "CLASSES", action = ArgAction::Append)]
    pub define: Vec<String>,

    /// Cancel classes (comma separated; repeatable)
    #[arg(short = 'N', long = "negate", value_name = "CLASSES", action = ArgAction::Append)]
    pub negate: Vec<String>,

    /// Ignore promise locks (ifelapsed, expireafter)
    #[arg(short = 'K', long = "no-lock")]
    pub no_lock: bool,

    /// Print one line per change made (log level info)
    #[arg(short = 'I', long = "inform")]
    pub inform: bool,

    /// Verbose output
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,

    /// Debug output
    #[arg(short = 'd', long = "debug")]
    pub debug: bool,

    /// Log level: error, warning, notice, info, verbose, debug
    #[arg(short = 'g', long = "log-level", value_name = "LEVEL")]
    pub log_level: Option<String>,

    /// Report what would change without changing it
    #[arg(short = 'n', long = "dry-run")]
    pub dry_run: bool,

    /// Working directory for state, locks and inputs
    #[arg(short = 'w', long = "workdir", value_name = "DIR")]
    pub workdir: Option<String>,

    /// Print the version and exit
    #[arg(short = 'V', long = "version")]
    pub version: bool,

    /// Do not load def_preferred.json in place of def.json
    #[arg(long = "ignore-preferred-augments")]
    pub ignore_preferred_augments: bool,

    /// Do not load the augments (def.json, def_preferred.json) (CFEngine 3.24)
    #[arg(long = "no-augments")]
    pub no_augments: bool,

    /// Do not load host-specific data (host_specific.json) (CFEngine 3.24)
    #[arg(long = "no-host-specific-data")]
    pub no_host_specific_data: bool,

    /// With --bootstrap: start no CFEngine service (CFEngine 3.24; ours never starts one)
    #[arg(long = "skip-bootstrap-service-start")]
    pub skip_bootstrap_service_start: bool,

    /// With --bootstrap: run no policy after the bootstrap (the class skip_policy_on_bootstrap; ours never runs one)
    #[arg(long = "skip-bootstrap-policy-run")]
    pub skip_bootstrap_policy_run: bool,

    /// After the run, print variables (optionally only those matching REGEX)
    #[arg(help_heading = "Inspection", long = "show-evaluated-vars", value_name = "REGEX", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub show_evaluated_vars: Option<String>,

    /// After the run, print classes (optionally only those matching REGEX)
    #[arg(help_heading = "Inspection", long = "show-evaluated-classes", value_name = "REGEX", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub show_evaluated_classes: Option<String>,

    /// Print variables after pre-evaluation, as cf-promises does, and stop
    #[arg(help_heading = "Inspection", long = "show-vars", value_name = "REGEX", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub show_vars: Option<String>,

    /// Print classes after pre-evaluation, as cf-promises does, and stop
    #[arg(help_heading = "Inspection", long = "show-classes", value_name = "REGEX", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub show_classes: Option<String>,

    /// Parse, validate and pre-evaluate the policy; change nothing
    #[arg(help_heading = "Inspection", short = 'c', long = "check")]
    pub check: bool,

    /// cf-promises without `-c`: its lighter check, which resolves body
    /// references only in a policy with `body common control`.
    #[arg(skip)]
    pub light_check: bool,

    /// Invoked as `cf-promises`: its output, without our check's notes
    /// on variables left referring to undefined ones.
    #[arg(skip)]
    pub as_cf_promises: bool,

    /// Print the parsed policy in FORMAT (none, cf, json, cf-full, json-full; json-spans: ours, with spans) and stop; `-p` alone is --profile
    #[arg(
        help_heading = "Inspection",
        short = 'p',
        long = "policy-output-format",
        value_name = "FORMAT",
        num_args = 0..=1,
        default_missing_value = ""
    )]
    pub policy_output_format: Option<String>,

    /// After the run, print the time spent in each bundle and promise as JSON (CFEngine 3.27)
    #[arg(help_heading = "Inspection", long = "profile")]
    pub profile: bool,

    /// Parse and validate each FILE alone, following no inputs
    #[arg(help_heading = "Inspection", long = "syntax-only", value_name = "FILE", num_args = 1..)]
    pub syntax_only: Option<Vec<String>>,

    /// Prefix log lines with the local time
    #[arg(short = 'l', long = "timestamp")]
    pub timestamp: bool,

    /// Colour log lines by level: always, auto (on a terminal), never
    #[arg(short = 'C', long = "color", num_args = 0..=1, default_missing_value = "auto",
          value_parser = ["always", "auto", "never"])]
    pub color: Option<String>,

    /// Exit with 0 all kept, 2 something repaired, 4 something not kept, 6 both
    #[arg(help_heading = "Beyond CFEngine", long = "detailed-exitcodes")]
    pub detailed_exitcodes: bool,

    /// Seconds to wait for another agent on the same work directory to finish
    #[arg(
        help_heading = "Beyond CFEngine",
        long = "wait-for-lock",
        value_name = "SECONDS",
        default_value_t = 10
    )]
    pub wait_for_lock: u64,

    /// Seconds a custom promise module may stay silent before it is killed
    #[arg(
        help_heading = "Beyond CFEngine",
        long = "module-timeout",
        value_name = "SECONDS",
        default_value_t = 600
    )]
    pub module_timeout: u64,

    /// Print a unified diff of every file change (with --dry-run: of every change that would be made)
    #[arg(help_heading = "Beyond CFEngine", long = "diff")]
    pub diff: bool,

    /// cf-agent's simulation: change nothing and print diffs (diff, manifest, manifest-full)
    #[arg(long = "simulate", value_name = "MODE")]
    pub simulate: Option<String>,

    /// One JSON object per event on standard output (logs go to standard error)
    #[arg(help_heading = "Beyond CFEngine", long = "json")]
    pub json: bool,

    /// Explain how a variable, class or property got its value (after pre-evaluation) and stop
    #[arg(help_heading = "Inspection", long = "explain", value_name = "NAME")]
    pub explain: Option<String>,

    /// Print the promise dependency graph as DOT and stop
    #[arg(help_heading = "Inspection", long = "graph")]
    pub graph: bool,

    /// Say why a promise (a handle or FILE:LINE) ran, was skipped or failed in the last run
    #[arg(help_heading = "Inspection", long = "why", value_name = "PROMISE")]
    pub why: Option<String>,

    /// Also write the JSON events to PATH (atomically, when the run ends)
    #[arg(
        help_heading = "Beyond CFEngine",
        long = "report-file",
        value_name = "PATH"
    )]
    pub report_file: Option<String>,

    /// Write the run's metrics to PATH in Prometheus' text format (for node_exporter's textfile collector; atomically, when the run ends)
    #[arg(
        help_heading = "Beyond CFEngine",
        long = "metrics-file",
        value_name = "PATH"
    )]
    pub metrics_file: Option<String>,

    /// For timers and cron: run only when body executor control's schedule holds, after the host's splaytime, stopping a run older than agent_expireafter
    #[arg(help_heading = "Beyond CFEngine", long = "scheduled")]
    pub scheduled: bool,

    /// Print the manual page (roff) and stop; the package installs it as agent(1)
    #[arg(long = "man-page", hide = true)]
    pub man_page: bool,

    /// Print a completion script for SHELL (bash, zsh, fish, elvish, powershell) and stop
    #[arg(long = "completions", value_name = "SHELL", hide = true,
          value_parser = ["bash", "zsh", "fish", "elvish", "powershell"])]
    pub completions: Option<String>,

    /// Bootstrap to a policy server: HOST or HOST:PORT (see README, "Running a fleet")
    #[arg(short = 'B', long = "bootstrap", value_name = "HOST")]
    pub bootstrap: Option<String>,

    /// With --bootstrap: trust the server's key on first sight (yes, the default) or only a key already trusted (no)
    #[arg(long = "trust-server", value_name = "yes|no", num_args = 0..=1, default_missing_value = "yes")]
    pub trust_server: Option<String>,

    /// Check this installation (work directory, keys, state) and print what was found
    #[arg(short = 'x', long = "self-diagnostics", value_name = "VALUE", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub self_diagnostics: Option<String>,

    /// Under -v, print how long each bundle took
    #[arg(short = 't', long = "timing-output")]
    pub timing_output: bool,

    /// Load no extensions (we have none: accepted, and said so under -v)
    #[arg(short = 'E', long = "no-extensions")]
    pub no_extensions: bool,

    /// Skip the state databases' integrity check (ours is SQLite, checked by SQLite itself: accepted, and said so under -v)
    #[arg(long = "skip-db-check", value_name = "VALUE", num_args = 0..=1, require_equals = true, default_missing_value = "yes")]
    pub skip_db_check: Option<String>,

    /// More debug logging for some areas (help lists them); with -d
    #[arg(long = "log-modules", value_name = "MODULES")]
    pub log_modules: Option<String>,

    /// Warnings: deprecated, removed, all (cf-promises'), lint (ours: variables left referring to undefined ones); error=LIST makes them errors
    #[arg(short = 'W', long = "warn", value_name = "WARNINGS")]
    pub warn: Option<String>,

    /// cf-promises' --eval-functions: evaluate functions while checking (yes, the default, or no)
    #[arg(skip)]
    pub eval_functions: Option<String>,

    /// cf-promises' -T DIR: check DIR/promises.cf, then write DIR/cf_promises_validated and DIR/cf_promises_release_id
    #[arg(skip)]
    pub tag_release: Option<String>,

    /// cf-promises' -x: retired there, said so
    #[arg(skip)]
    pub diagnostic_retired: bool,

    /// cf-promises' -s FORMAT: the syntax description
    #[arg(skip)]
    pub syntax_description: Option<String>,

    /// Invoked by one of CFEngine's names (cf-agent, cf-promises): its
    /// default work directory, not ours.
    #[arg(skip)]
    pub cfengine_name: bool,
}

/// The manual page of `agent`, from its flags (roff, for `man`).
pub fn man_page() -> Vec<u8> {
    let mut out = Vec::new();
    let page = clap_mangen::Man::new(<AgentArgs as clap::CommandFactory>::command());
    // Writing into a Vec cannot fail.
    let _ = page.render(&mut out);
    out
}

/// A completion script of `agent`'s flags for `shell`; `None` for a shell
/// clap_complete does not know.
pub fn completions(shell: &str) -> Option<Vec<u8>> {
    let shell: clap_complete::Shell = shell.parse().ok()?;
    let mut cmd = <AgentArgs as clap::CommandFactory>::command();
    let mut out = Vec::new();
    clap_complete::generate(shell, &mut cmd, "agent", &mut out);
    Some(out)
}

/// Flags accepted when invoked as `cf-promises`.
#[derive(Debug, Parser, Default, PartialEq)]
#[command(
    name = "cf-promises",
    version = crate::VERSION_LINE,
    disable_version_flag = true,
    args_override_self = true,
    about = "convergent as cf-promises: parse, validate and inspect a CFEngine 3 policy"
)]
pub struct PromisesArgs {
    /// Policy entry file
    #[arg(short = 'f', long = "file", value_name = "FILE")]
    pub file: Option<String>,

    /// Full check: parse, validate and pre-evaluate
    #[arg(short = 'c', long = "full-check", visible_alias = "check")]
    pub check: bool,

    /// Evaluate functions while checking: yes (the default) or no
    #[arg(long = "eval-functions", value_name = "yes|no", num_args = 0..=1, require_equals = true, default_missing_value = "yes")]
    pub eval_functions: Option<String>,

    /// Make no changes (checking makes none anyway)
    #[arg(short = 'n', long = "dry-run")]
    pub dry_run: bool,

    /// Internal diagnostics: retired in cf-promises, said so
    #[arg(short = 'x', long = "diagnostic")]
    pub diagnostic: bool,

    /// Warnings: deprecated, removed, all; lint (ours); error=LIST makes them errors
    #[arg(short = 'W', long = "warn", value_name = "WARNINGS")]
    pub warn: Option<String>,

    /// Colour log lines by level: always, auto (on a terminal), never
    #[arg(short = 'C', long = "color", num_args = 0..=1, default_missing_value = "auto",
          value_parser = ["always", "auto", "never"])]
    pub color: Option<String>,

    /// Check DIR/promises.cf, then write DIR/cf_promises_validated and DIR/cf_promises_release_id
    #[arg(short = 'T', long = "tag-release", value_name = "DIR")]
    pub tag_release: Option<String>,

    /// Prefix log lines with the local time
    #[arg(short = 'l', long = "timestamp")]
    pub timestamp: bool,

    /// More debug logging for some areas (help lists them); with -d
    #[arg(long = "log-modules", value_name = "MODULES")]
    pub log_modules: Option<String>,

    /// Print the parsed policy in FORMAT (none, cf, json, cf-full, json-full; json-spans: ours, with spans) and stop
    #[arg(short = 'p', long = "policy-output-format", value_name = "FORMAT")]
    pub policy_output_format: Option<String>,

    /// Working directory
    #[arg(short = 'w', long = "workdir", value_name = "DIR")]
    pub workdir: Option<String>,

    /// Print variables after pre-evaluation
    #[arg(long = "show-vars", value_name = "REGEX", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub show_vars: Option<String>,

    /// Print classes after pre-evaluation
    #[arg(long = "show-classes", value_name = "REGEX", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub show_classes: Option<String>,

    /// Define classes (comma separated; repeatable)
    #[arg(short = 'D', long = "define", value_name = "CLASSES", action = ArgAction::Append)]
    pub define: Vec<String>,

    /// Cancel classes (comma separated; repeatable)
    #[arg(short = 'N', long = "negate", value_name = "CLASSES", action = ArgAction::Append)]
    pub negate: Vec<String>,

    /// Run these bundles (used by the bundlesequence check)
    #[arg(short = 'b', long = "bundlesequence", value_name = "BUNDLES")]
    pub bundlesequence: Option<String>,

    /// Do not load def_preferred.json in place of def.json
    #[arg(long = "ignore-preferred-augments")]
    pub ignore_preferred_augments: bool,

    /// Print one line per notable event
    #[arg(short = 'I', long = "inform")]
    pub inform: bool,

    /// Verbose output
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,

    /// Debug output
    #[arg(short = 'd', long = "debug")]
    pub debug: bool,

    /// Log level
    #[arg(short = 'g', long = "log-level", value_name = "LEVEL")]
    pub log_level: Option<String>,

    /// Print the version and exit
    #[arg(short = 'V', long = "version")]
    pub version: bool,

    /// Print the syntax description: none or json
    #[arg(short = 's', long = "syntax-description", value_name = "FORMAT")]
    pub syntax_description: Option<String>,

    /// Policy entry file, as `-f` but a relative name is taken in the
    /// current directory (`cf-promises [OPTIONS] [FILE]`)
    #[arg(value_name = "FILE")]
    pub entry: Option<String>,
}

/// Flags accepted when invoked as `cf-key`.
#[derive(Debug, Parser, Default)]
#[command(
    name = "cf-key",
    version = crate::VERSION_LINE,
    disable_version_flag = true,
    args_override_self = true,
    about = "convergent as cf-key: make this host's key pair, print key digests, trust and forget keys"
)]
pub struct KeyArgs {
    /// Print the digest of a public key (default: this host's, WORKDIR/ppkeys/localhost.pub)
    #[arg(short = 'p', long = "print-digest", value_name = "FILE", num_args = 0..=1, default_missing_value = "")]
    pub print_digest: Option<String>,

    /// Trust a public key: [[USER@]IPADDR:]FILENAME, the key of the host at IPADDR
    #[arg(short = 't', long = "trust-key", value_name = "[[USER@]IPADDR:]FILE")]
    pub trust_key: Option<String>,

    /// Show the hosts connected to and the keys they showed
    #[arg(short = 's', long = "show-hosts")]
    pub show_hosts: bool,

    /// Do not truncate --show-hosts output
    #[arg(short = 'N', long = "no-truncate")]
    pub no_truncate: bool,

    /// Remove the keys of a host: its IP address or a digest (MD5=..., SHA=...)
    #[arg(short = 'r', long = "remove-keys", value_name = "HOST")]
    pub remove_keys: Option<String>,

    /// Remove the key files of a digest even when no host is recorded for it
    #[arg(short = 'x', long = "force-removal")]
    pub force_removal: bool,

    /// Write the new key pair to FILE.priv and FILE.pub instead of WORKDIR/ppkeys/localhost.*
    #[arg(short = 'f', long = "output-file", value_name = "FILE")]
    pub output_file: Option<String>,

    /// The size of a new RSA key in bits (default 2048)
    #[arg(short = 'T', long = "key-type", value_name = "BITS")]
    pub key_bits: Option<String>,

    /// Do not look up host names (we never do: addresses are shown as they are)
    #[arg(short = 'n', long = "numeric")]
    pub numeric: bool,

    /// Print basic information about key generation
    #[arg(short = 'I', long = "inform")]
    pub inform: bool,

    /// Verbose output
    #[arg(short = 'v', long = "verbose")]
    pub verbose: bool,

    /// Debug output
    #[arg(short = 'd', long = "debug")]
    pub debug: bool,

    /// Log level
    #[arg(short = 'g', long = "log-level", value_name = "LEVEL")]
    pub log_level: Option<String>,

    /// Print the version and exit
    #[arg(short = 'V', long = "version")]
    pub version: bool,
}

/// The areas `--log-modules` names, as cf-agent lists them.
pub const LOG_MODULES: &[&str] = &[
    "help",
    "all",
    "evalctx",
    "expand",
    "iterations",
    "parser",
    "vartable",
    "vars",
    "locks",
    "ps",
];

/// `-W`: which warnings are on, and which are errors. cf-promises' own
/// are `deprecated` and `removed` (`all` is both); `lint` is ours: the
/// variables pre-evaluation left referring to undefined ones, which
/// cf-promises never mentions (the MPF has some on every platform).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Warnings {
    pub lint: bool,
    pub lint_errors: bool,
}

impl Warnings {
    pub fn parse(w: &str) -> Result<Warnings, ConfigError> {
        let bad = |reason: &str| ConfigError::Invalid {
            flag: "-W/--warn".into(),
            value: w.into(),
            reason: reason.into(),
        };
        if w.is_empty() {
            return Err(bad("expected deprecated, removed, all or lint"));
        }
        if w == "error" {
            return Ok(Warnings::default());
        }
        let (list, errors) = match w.strip_prefix("error=") {
            Some(l) => (l, true),
            None => (w, false),
        };
        let mut out = Warnings::default();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name {
                "deprecated" | "removed" | "all" => {}
                "lint" => {
                    out.lint = true;
                    out.lint_errors = errors;
                }
                other => {
                    return Err(bad(&format!(
                        "unrecognized warning '{other}' (expected deprecated, removed, all or lint)"
                    )));
                }
            }
        }
        Ok(out)
    }
}

/// The work directory as every front end finds it: `-w` (given), else
/// `CFENGINE_TEST_OVERRIDE_WORKDIR`, else the default for this user.
pub fn resolve_workdir(flag: Option<&str>, is_root: bool) -> Result<PathBuf, ConfigError> {
    resolve_workdir_as(flag, is_root, false)
}

/// `resolve_workdir`, for a program invoked by one of CFEngine's names
/// when `cfengine_name`: then the default is CFEngine's own
/// (`/var/cfengine` as root, `~/.cfagent` otherwise), so that a link named
/// cf-agent finds what cf-agent left.
pub fn resolve_workdir_as(
    flag: Option<&str>,
    is_root: bool,
    cfengine_name: bool,
) -> Result<PathBuf, ConfigError> {
    // HOME, or the password database's home for a run without it (cron
    // and some service managers leave HOME out).
    let home = std::env::var("HOME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(crate::host::procs::current_user_home);
    let no_home = || ConfigError::Invalid {
        flag: "-w/--workdir".into(),
        value: String::new(),
        reason: "no work directory given, and this user has neither HOME nor a home directory \
                 in the password database: name a private one with -w (a shared, predictable \
                 path under /tmp could be made first by another user)"
            .into(),
    };
    if flag.is_none()
        && cfengine_name
        && std::env::var_os("CFENGINE_TEST_OVERRIDE_WORKDIR").is_none_or(|w| w.is_empty())
    {
        return crate::config::cfengine_workdir(is_root, home.as_deref()).ok_or_else(no_home);
    }
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    match flag {
        // An empty name would silently mean the current directory, and
        // the state (locks, persistent classes) would land there.
        Some("") => Err(ConfigError::Invalid {
            flag: "-w/--workdir".into(),
            value: String::new(),
            reason: "expected a directory name, found an empty one".into(),
        }),
        Some(w) => Ok(normalize(&cwd.join(w))),
        // CFEngine's own name for a work directory chosen from outside
        // (its acceptance suite sets it for every test), as cf-agent
        // reads it; -w wins.
        None => match std::env::var_os("CFENGINE_TEST_OVERRIDE_WORKDIR") {
            Some(w) if !w.is_empty() => Ok(normalize(&cwd.join(w))),
            _ => default_workdir(
                is_root,
                std::env::var("XDG_STATE_HOME").ok().as_deref(),
                home.as_deref(),
            )
            .ok_or_else(no_home),
        },
    }
}

/// The policy file a positional `FILE` names: cf-promises takes a relative
/// one in the current directory as written (`t/x.cf` is `CWD/t/x.cf`),
/// where `-f t/x.cf` would look in WORKDIR/inputs.
fn positional_entry(f: String) -> String {
    if f.starts_with('/') {
        return f;
    }
    match std::env::current_dir() {
        Ok(cwd) => cwd.join(&f).display().to_string(),
        Err(_) => format!("./{f}"),
    }
}

impl PromisesArgs {
    /// The flags of the common checks (`-f FILE`, `-w DIR`, `-c`, `-I`,
    /// `-v`), read without clap: building clap's whole command cost ~7% of
    /// an empty policy's check. `None` for anything else (clap reads it,
    /// and says what is wrong). A value must be a separate word that does
    /// not start with `-`, as clap takes it.
    pub fn parse_common(argv: &[String]) -> Option<PromisesArgs> {
        let mut args = PromisesArgs::default();
        let mut words = argv.iter().skip(1);
        while let Some(word) = words.next() {
            let mut value = || {
                words
                    .next()
                    .filter(|v| !v.is_empty() && !v.starts_with('-'))
                    .cloned()
            };
            match word.as_str() {
                "-f" | "--file" => args.file = Some(value()?),
                "-w" | "--workdir" => args.workdir = Some(value()?),
                "-c" | "--full-check" | "--check" => args.check = true,
                "-I" | "--inform" => args.inform = true,
                "-v" | "--verbose" => args.verbose = true,
                _ => return None,
            }
        }
        Some(args)
    }
}

impl From<PromisesArgs> for AgentArgs {
    /// cf-promises' flags mean the same as the agent's inspection flags;
    /// without one of them cf-promises only checks the policy.
    fn from(p: PromisesArgs) -> AgentArgs {
        let inspecting =
            p.show_vars.is_some() || p.show_classes.is_some() || p.policy_output_format.is_some();
        // -T DIR checks DIR/promises.cf.
        let tagged = p
            .tag_release
            .as_ref()
            .map(|d| positional_entry(format!("{}/promises.cf", d.trim_end_matches('/'))));
        AgentArgs {
            file: p.entry.map(positional_entry).or(tagged).or(p.file),
            dry_run: p.dry_run,
            warn: p.warn,
            color: p.color,
            timestamp: p.timestamp,
            log_modules: p.log_modules,
            eval_functions: p.eval_functions,
            tag_release: p.tag_release,
            diagnostic_retired: p.diagnostic,
            syntax_description: p.syntax_description,
            policy: None,
            check: p.check || !inspecting,
            light_check: !p.check,
            as_cf_promises: true,
            policy_output_format: p.policy_output_format,
            workdir: p.workdir,
            show_vars: p.show_vars,
            show_classes: p.show_classes,
            define: p.define,
            negate: p.negate,
            bundlesequence: p.bundlesequence,
            ignore_preferred_augments: p.ignore_preferred_augments,
            inform: p.inform,
            verbose: p.verbose,
            debug: p.debug,
            log_level: p.log_level,
            version: p.version,
            ..AgentArgs::default()
        }
    }
}

impl AgentArgs {
    /// The settings these flags ask for.
    pub fn resolve(self, is_root: bool) -> Result<Config, ConfigError> {
        let args = self;
        let trust_server = match args.trust_server.as_deref() {
            None | Some("yes" | "y" | "true" | "on") => true,
            Some("no" | "n" | "false" | "off") => false,
            Some(other) => {
                return Err(ConfigError::Invalid {
                    flag: "--trust-server".into(),
                    value: other.to_string(),
                    reason: "expected yes or no".into(),
                });
            }
        };
        if let Some(b) = &args.bootstrap
            && b.trim().is_empty()
        {
            return Err(ConfigError::Invalid {
                flag: "-B/--bootstrap".into(),
                value: b.clone(),
                reason: "expected the policy server's address or name".into(),
            });
        }
        let workdir = resolve_workdir_as(args.workdir.as_deref(), is_root, args.cfengine_name)?;
        let warnings = match args.warn.as_deref() {
            Some(w) => Warnings::parse(w)?,
            None => Warnings::default(),
        };
        let eval_functions = match args.eval_functions.as_deref() {
            None | Some("yes") => true,
            Some("no") => false,
            Some(v) => {
                return Err(ConfigError::Invalid {
                    flag: "--eval-functions".into(),
                    value: v.into(),
                    reason: "expected yes or no".into(),
                });
            }
        };

        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
        // cf-agent keeps the names of policy files relative to the
        // current directory when the entry was named relative to it.
        let given_relative = match (&args.policy, &args.file) {
            (Some(p), _) => !p.starts_with('/'),
            (None, Some(f)) => f.starts_with("./") || f.starts_with("../"),
            (None, None) => false,
        };
        let positional = args.policy.clone().map(positional_entry);
        let file = positional.as_ref().or(args.file.as_ref());
        let entry = resolve_entry(file.map(String::as_str), &workdir, &cwd);
        let simulate = match &args.simulate {
            None => None,
            Some(sim) => match crate::host::changes_chroot::SimulateMode::from_flag(sim) {
                Some(m) => Some(m),
                None => {
                    return Err(ConfigError::Invalid {
                        flag: "--simulate".into(),
                        value: sim.clone(),
                        reason: "expected diff, manifest or manifest-full".into(),
                    });
                }
            },
        };
        let mode = if args.version {
            Mode::Version
        } else if args.diagnostic_retired {
            Mode::RetiredDiagnostic
        } else if args
            .log_modules
            .as_deref()
            .is_some_and(|m| m.split(',').any(|n| n.trim() == "help"))
        {
            Mode::LogModulesHelp
        } else if args.self_diagnostics.is_some() {
            Mode::SelfDiagnostics
        } else if let Some(f) = &args.syntax_description {
            match f.as_str() {
                "json" => Mode::SyntaxDescription,
                "none" => Mode::Check,
                _ => {
                    return Err(ConfigError::Invalid {
                        flag: "-s/--syntax-description".into(),
                        value: f.clone(),
                        reason: "expected none or json".into(),
                    });
                }
            }
        } else if let Some(name) = &args.explain {
            Mode::Explain(name.clone())
        } else if args.graph {
            Mode::Graph
        } else if let Some(p) = &args.why {
            Mode::Why(p.clone())
        } else if let Some(files) = args.syntax_only {
            Mode::SyntaxOnly(files.into_iter().map(PathBuf::from).collect())
        } else if let Some(fmt) = args.policy_output_format.as_ref().filter(|f| !f.is_empty()) {
            match PolicyFormat::from_flag(fmt) {
                Some(format) => Mode::PolicyOutput {
                    format,
                    entry_as_given: file.cloned().filter(|f| {
                        f.starts_with('/') || f.starts_with("./") || f.starts_with("../")
                    }),
                },
                None => {
                    return Err(ConfigError::Invalid {
                        flag: "-p/--policy-output-format".into(),
                        value: fmt.clone(),
                        reason: "expected none, cf, json, cf-full, json-full or json-spans".into(),
                    });
                }
            }
        } else if args.show_vars.is_some() || args.show_classes.is_some() {
            Mode::Show {
                vars: args.show_vars.clone(),
                classes: args.show_classes.clone(),
            }
        } else if args.check {
            Mode::Check
        } else {
            Mode::Run
        };
        let log_level = match args.log_level.as_deref() {
            Some(l) => parse_log_level(l)?,
            None if args.debug => LogLevel::Debug,
            None if args.verbose => LogLevel::Verbose,
            None if args.inform => LogLevel::Info,
            None => LogLevel::Notice,
        };
        let bundlesequence = args
            .bundlesequence
            .as_ref()
            .map(|b| split_list(std::slice::from_ref(b)));
        // cf-agent has cf-promises check the policy fully before it runs it.
        let full_check = mode == Mode::Run || (args.check && !args.light_check);
        Ok(Config {
            mode,
            full_check,
            workdir,
            entry,
            bundlesequence,
            defines: split_list(&args.define),
            negates: split_list(&args.negate),
            no_lock: args.no_lock,
            // cf-agent's --simulate never changes the system.
            dry_run: args.dry_run || args.simulate.is_some(),
            log_level,
            timestamps: args.timestamp,
            // NO_COLOR (no-color.org) turns `auto` off; `always`, asked
            // for on the command line, still wins.
            color: match args.color.as_deref() {
                Some("always") => true,
                Some("auto") => {
                    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
                        && std::io::IsTerminal::is_terminal(&std::io::stdout())
                }
                _ => false,
            },
            ignore_preferred_augments: args.ignore_preferred_augments,
            no_augments: args.no_augments,
            no_host_specific_data: args.no_host_specific_data,
            note_unresolved: warnings.lint,
            unresolved_are_errors: warnings.lint_errors,
            tag_release: args.tag_release.map(|d| normalize(&cwd.join(d))),
            timing: args.timing_output,
            // cf-agent 3.27's `-p` takes no value; ours with a value is
            // cf-promises' policy output format.
            profile: args.profile || args.policy_output_format.as_deref() == Some(""),
            eval_functions,
            no_extensions: args.no_extensions,
            skip_db_check: args.skip_db_check.is_some(),
            show_evaluated_vars: args.show_evaluated_vars,
            show_evaluated_classes: args.show_evaluated_classes,
            detailed_exitcodes: args.detailed_exitcodes,
            json: args.json,
            diff: args.diff,
            simulate,
            report_file: args.report_file.map(|f| normalize(&cwd.join(f))),
            metrics_file: args.metrics_file.map(|f| normalize(&cwd.join(f))),
            scheduled: args.scheduled,
            bootstrap: args.bootstrap.map(|b| b.trim().to_string()),
            trust_server,
            skip_bootstrap_policy_run: args.skip_bootstrap_policy_run,
            source_base: given_relative.then(|| cwd.clone()),
            lock_wait: std::time::Duration::from_secs(args.wait_for_lock),
            // Zero is what a default-built argument set holds (the
            // cf-promises front end's), not a limit anyone asked for.
            module_timeout: match args.module_timeout {
                0 => crate::config::DEFAULT_MODULE_TIMEOUT,
                n => std::time::Duration::from_secs(n),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn common_check_flags_read_as_clap_reads_them() {
        use clap::Parser;
        let argvs: &[&[&str]] = &[
            &[],
            &["-f", "p.cf"],
            &["-f", "p.cf", "-w", "/tmp/wd", "-c"],
            &[
                "--file",
                "a.cf",
                "--workdir",
                "w",
                "--full-check",
                "-I",
                "-v",
            ],
            &[
                "--check",
                "-f",
                "a.cf",
                "-f",
                "b.cf",
                "--inform",
                "--verbose",
            ],
        ];
        for argv in argvs {
            let argv: Vec<String> = std::iter::once("cf-promises")
                .chain(argv.iter().copied())
                .map(String::from)
                .collect();
            let fast = super::PromisesArgs::parse_common(&argv);
            assert_eq!(
                fast,
                Some(super::PromisesArgs::parse_from(&argv)),
                "{argv:?}"
            );
        }
        // Anything else is left to clap.
        let others: &[&[&str]] = &[
            &["-f"],
            &["-f", ""],
            &["-f", "-c"],
            &["-fp.cf"],
            &["--file=p.cf"],
            &["p.cf"],
            &["-cv"],
            &["--show-vars"],
            &["--", "-f"],
        ];
        for argv in others {
            let argv: Vec<String> = std::iter::once("cf-promises")
                .chain(argv.iter().copied())
                .map(String::from)
                .collect();
            assert_eq!(super::PromisesArgs::parse_common(&argv), None, "{argv:?}");
        }
    }

    use super::*;

    #[test]
    fn bootstrap_and_trust_server() {
        let a = AgentArgs::try_parse_from(["agent", "-B", "10.0.0.1:5308", "--trust-server=no"])
            .unwrap()
            .resolve(false)
            .unwrap();
        assert_eq!(a.bootstrap.as_deref(), Some("10.0.0.1:5308"));
        assert!(!a.trust_server);
        let a = AgentArgs::try_parse_from(["agent", "--bootstrap", "hub"])
            .unwrap()
            .resolve(false)
            .unwrap();
        assert!(a.trust_server);
        let bad = AgentArgs::try_parse_from(["agent", "-B", "h", "--trust-server=maybe"])
            .unwrap()
            .resolve(false)
            .unwrap_err();
        assert!(bad.to_string().contains("expected yes or no"), "{bad}");
        let empty = AgentArgs::try_parse_from(["agent", "-B", " "])
            .unwrap()
            .resolve(false)
            .unwrap_err();
        assert!(empty.to_string().contains("policy server"), "{empty}");
    }

    #[test]
    fn cf_promises_takes_a_positional_file_in_the_current_directory() {
        // 01_vars/04_containers/inline_json_parse.cf runs
        // `cf-promises -p json FILE`.
        let p = PromisesArgs::try_parse_from(["cf-promises", "-p", "json", "t/x.cf"]).unwrap();
        let a = AgentArgs::from(p);
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(a.file, Some(cwd.join("t/x.cf").display().to_string()));
        let p = PromisesArgs::try_parse_from(["cf-promises", "/abs/x.cf", "-f", "y.cf"]).unwrap();
        assert_eq!(AgentArgs::from(p).file.as_deref(), Some("/abs/x.cf"));
    }

    #[test]
    fn warnings_as_cf_promises_reads_them_with_lint_ours() {
        assert_eq!(Warnings::parse("all").unwrap(), Warnings::default());
        assert!(Warnings::parse("deprecated,lint").unwrap().lint);
        let e = Warnings::parse("error=lint").unwrap();
        assert!(e.lint && e.lint_errors);
        assert!(Warnings::parse("bogus").is_err());
        assert!(Warnings::parse("").is_err());
    }

    #[test]
    fn cf_promises_takes_its_long_names_and_tag_release_checks_the_directory() {
        let p =
            PromisesArgs::try_parse_from(["cf-promises", "--full-check", "-f", "./x.cf"]).unwrap();
        assert!(p.check);
        let p = PromisesArgs::try_parse_from(["cf-promises", "-T", "/srv/m"]).unwrap();
        let a = AgentArgs::from(p);
        assert_eq!(a.file.as_deref(), Some("/srv/m/promises.cf"));
        assert_eq!(a.tag_release.as_deref(), Some("/srv/m"));
    }

    #[test]
    fn an_empty_workdir_is_refused() {
        let args = AgentArgs {
            workdir: Some(String::new()),
            ..AgentArgs::default()
        };
        assert_eq!(
            args.resolve(false).unwrap_err().to_string(),
            "invalid value '' for -w/--workdir: expected a directory name, found an empty one"
        );
    }
}
