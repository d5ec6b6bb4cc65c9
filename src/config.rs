//! Resolved settings: what to do, on which files, in which work directory.
//! Built from the raw flags (`cli::AgentArgs::resolve`); no I/O beyond
//! looking up paths.

use std::path::{Path, PathBuf};
use thiserror::Error;

/// How long a promise module may stay silent, unless `--module-timeout`
/// says otherwise, before it is taken for hung.
pub const DEFAULT_MODULE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

#[derive(Debug, Error, PartialEq)]
pub enum ConfigError {
    #[error("option {0} is not supported yet")]
    NotSupported(String),
    #[error("invalid value '{value}' for {flag}: {reason}")]
    Invalid {
        flag: String,
        value: String,
        reason: String,
    },
    #[error("{0}")]
    Conflict(String),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum LogLevel {
    Error,
    Warning,
    Notice,
    Info,
    Verbose,
    Debug,
}

/// `-p`: how the parsed policy is printed. cf-promises' formats print
/// the entry file, their `-full` forms every file loaded; `json-spans` is
/// ours (the whole tree with spans and quote styles; it reads back).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PolicyFormat {
    None,
    Cf,
    Json,
    CfFull,
    JsonFull,
    JsonSpans,
}

impl PolicyFormat {
    /// The format a `-p` value names.
    pub fn from_flag(s: &str) -> Option<PolicyFormat> {
        Some(match s {
            "none" => PolicyFormat::None,
            "cf" => PolicyFormat::Cf,
            "json" => PolicyFormat::Json,
            "cf-full" => PolicyFormat::CfFull,
            "json-full" => PolicyFormat::JsonFull,
            "json-spans" => PolicyFormat::JsonSpans,
            _ => return None,
        })
    }

    /// Whether every file loaded is printed, not the entry file alone.
    pub fn full(self) -> bool {
        matches!(self, PolicyFormat::CfFull | PolicyFormat::JsonFull)
    }
}

/// What this invocation does.
#[derive(Debug, Clone, PartialEq)]
pub enum Mode {
    Version,
    /// Run the policy.
    Run,
    /// Parse, validate, pre-evaluate; change nothing.
    Check,
    /// Print the parsed policy (`-p`); the entry as the command line named
    /// it, when it named a path (cf-promises prints paths from it).
    PolicyOutput {
        format: PolicyFormat,
        entry_as_given: Option<String>,
    },
    /// Parse and validate each file alone.
    SyntaxOnly(Vec<PathBuf>),
    /// cf-promises' tables after pre-evaluation (either or both).
    Show {
        vars: Option<String>,
        classes: Option<String>,
    },
    /// How a property, variable or class got its value, after
    /// pre-evaluation.
    Explain(String),
    /// The promise dependency graph as DOT, after pre-evaluation.
    Graph,
    /// Why a promise ran, was skipped or failed in the last run.
    Why(String),
    /// cf-agent's `-x`: what this installation holds.
    SelfDiagnostics,
    /// cf-promises' `-s json`: the syntax we accept, in its shape.
    SyntaxDescription,
    /// `--log-modules=help`: the areas it takes.
    LogModulesHelp,
    /// cf-promises' `-x`, retired there.
    RetiredDiagnostic,
}

#[derive(Debug, Clone)]
pub struct Config {
    pub mode: Mode,
    /// Validate as `cf-promises -c` does (and cf-agent before a run):
    /// references to bodies must resolve even in a policy without `body
    /// common control`.
    pub full_check: bool,
    pub workdir: PathBuf,
    pub entry: PathBuf,
    pub bundlesequence: Option<Vec<String>>,
    pub defines: Vec<String>,
    pub negates: Vec<String>,
    pub no_lock: bool,
    pub dry_run: bool,
    pub log_level: LogLevel,
    /// `-l`: each log line starts with the local time.
    pub timestamps: bool,
    /// `-C`: log lines coloured by level (decided here: `auto` means
    /// standard output is a terminal).
    pub color: bool,
    pub ignore_preferred_augments: bool,
    /// `--no-augments` (cf-agent 3.24): no def.json nor def_preferred.json.
    pub no_augments: bool,
    /// `--no-host-specific-data` (cf-agent 3.24): no host_specific.json.
    pub no_host_specific_data: bool,
    /// The check warns of variables that pre-evaluation left referring to
    /// undefined ones. cf-promises says nothing of them (and cf-agent
    /// passes its check's output through), so invoked as cf-promises we
    /// say it only under `-v`.
    pub note_unresolved: bool,
    /// `-W error=lint`: those notes are errors, and fail the check.
    pub unresolved_are_errors: bool,
    /// cf-promises' `-T DIR`: after a good check, write DIR's
    /// `cf_promises_validated` and `cf_promises_release_id`.
    pub tag_release: Option<PathBuf>,
    /// `-t`: under `-v`, how long each bundle took.
    pub timing: bool,
    /// `-p`/`--profile` (cf-agent 3.27): after the run, the time of each
    /// bundle and promise as JSON.
    pub profile: bool,
    /// cf-promises' `--eval-functions` (off: functions with side effects
    /// are not called while checking).
    pub eval_functions: bool,
    /// `-E`: no extensions (we load none).
    pub no_extensions: bool,
    /// `--skip-db-check`.
    pub skip_db_check: bool,
    pub show_evaluated_vars: Option<String>,
    pub show_evaluated_classes: Option<String>,
    pub detailed_exitcodes: bool,
    pub lock_wait: std::time::Duration,
    /// How long a custom promise module may stay silent before it is
    /// taken for hung and killed.
    pub module_timeout: std::time::Duration,
    /// Print a unified diff of every file change (made, or under dry-run
    /// that would be made).
    pub diff: bool,
    /// `--simulate`: files promises change a scratch copy of the system,
    /// other promises act as under `--dry-run`, and the run ends with a
    /// report of what would change.
    pub simulate: Option<crate::host::changes_chroot::SimulateMode>,
    /// Print events as JSON lines on standard output.
    pub json: bool,
    /// Also write the JSON events to this file (atomically, at the end).
    pub report_file: Option<PathBuf>,
    /// Write the run's metrics here, Prometheus' text format (atomically,
    /// at the end).
    pub metrics_file: Option<PathBuf>,
    /// Started by a timer or cron (`--scheduled`): run only when the
    /// policy's executor schedule holds, after the host's splay.
    pub scheduled: bool,
    /// `-B HUB`: bootstrap to this policy server instead of running.
    pub bootstrap: Option<String>,
    /// `--trust-server`: whether bootstrapping trusts a server key never
    /// seen before.
    pub trust_server: bool,
    /// `--skip-bootstrap-policy-run`: the bootstrap runs with the class
    /// `skip_policy_on_bootstrap`, with which cf-agent's failsafe policy
    /// does not run the fetched policy (ours never runs it).
    pub skip_bootstrap_policy_run: bool,
    /// The directory the entry was named relative to (`-f ./x.cf` or a
    /// positional `x.cf`): cf-agent keeps policy file names relative to
    /// it where it hands them on (a custom promise module's `filename`).
    pub source_base: Option<PathBuf>,
}

pub fn split_list(values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// The work directory when `-w` is not given: `/var/lib/convergent` for
/// root, else `$XDG_STATE_HOME/convergent` (or `~/.local/state/convergent`).
/// CFEngine's own default work directory: `/var/cfengine` for root,
/// `~/.cfagent` for anyone else.
pub fn cfengine_workdir(is_root: bool, home: Option<&str>) -> Option<PathBuf> {
    match (is_root, home) {
        (true, _) => Some(PathBuf::from("/var/cfengine")),
        (false, Some(h)) if !h.is_empty() => Some(Path::new(h).join(".cfagent")),
        // No shared, predictable fallback under /tmp: another user could
        // make it first and own our state.
        (false, _) => None,
    }
}

/// Our default work directory: `/var/lib/convergent` as root, else under
/// XDG_STATE_HOME or the home directory; None for a user with neither
/// (the caller asks for -w rather than falling back to a shared path).
pub fn default_workdir(
    is_root: bool,
    xdg_state: Option<&str>,
    home: Option<&str>,
) -> Option<PathBuf> {
    if is_root {
        return Some(PathBuf::from("/var/lib/convergent"));
    }
    match (xdg_state, home) {
        (Some(x), _) if !x.is_empty() => Some(Path::new(x).join("convergent")),
        (_, Some(h)) if !h.is_empty() => Some(Path::new(h).join(".local/state/convergent")),
        _ => None,
    }
}

/// Resolves `-f` as cf-agent does: absolute paths as given, `./` and `../`
/// paths joined to the current directory as written (cf-agent's
/// `this.promise_filename` of `-f ./x.cf` is `CWD/./x.cf`; the
/// `sys.policy_entry_*` variables are normalised), bare names inside
/// WORKDIR/inputs.
pub fn resolve_entry(file: Option<&str>, workdir: &Path, cwd: &Path) -> PathBuf {
    let inputs = workdir.join("inputs");
    match file {
        None => inputs.join("promises.cf"),
        Some(f) if f.starts_with('/') => PathBuf::from(f),
        Some(f) if f.starts_with("./") || f.starts_with("../") || f == "." || f == ".." => {
            cwd.join(f)
        }
        Some(f) => inputs.join(f),
    }
}

/// Removes `.` components and folds `..` without touching the file system.
pub fn normalize(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

pub fn parse_log_level(l: &str) -> Result<LogLevel, ConfigError> {
    Ok(match l {
        "error" | "critical" | "crit" | "err" => LogLevel::Error,
        "warning" | "warn" => LogLevel::Warning,
        "notice" => LogLevel::Notice,
        "info" | "inform" => LogLevel::Info,
        "verbose" => LogLevel::Verbose,
        "debug" => LogLevel::Debug,
        _ => {
            return Err(ConfigError::Invalid {
                flag: "-g/--log-level".into(),
                value: l.into(),
                reason: "expected error, warning, notice, info, verbose or debug".into(),
            });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_resolution_matches_cf_agent() {
        let wd = Path::new("/w");
        let cwd = Path::new("/home/u");
        assert_eq!(
            resolve_entry(None, wd, cwd),
            PathBuf::from("/w/inputs/promises.cf")
        );
        assert_eq!(
            resolve_entry(Some("x.cf"), wd, cwd),
            PathBuf::from("/w/inputs/x.cf")
        );
        assert_eq!(
            resolve_entry(Some("./x.cf"), wd, cwd),
            PathBuf::from("/home/u/./x.cf")
        );
        assert_eq!(
            resolve_entry(Some("../x.cf"), wd, cwd),
            PathBuf::from("/home/u/../x.cf")
        );
        assert_eq!(
            resolve_entry(Some("/p/x.cf"), wd, cwd),
            PathBuf::from("/p/x.cf")
        );
    }

    #[test]
    fn default_workdirs() {
        assert_eq!(
            default_workdir(true, None, None),
            Some(PathBuf::from("/var/lib/convergent"))
        );
        assert_eq!(
            default_workdir(false, Some("/s"), Some("/h")),
            Some(PathBuf::from("/s/convergent"))
        );
        assert_eq!(
            default_workdir(false, None, Some("/h")),
            Some(PathBuf::from("/h/.local/state/convergent"))
        );
        // Never a shared, predictable path for a user without a home.
        assert_eq!(default_workdir(false, None, None), None);
        assert_eq!(default_workdir(false, Some(""), Some("")), None);
        assert_eq!(cfengine_workdir(false, None), None);
    }
}
