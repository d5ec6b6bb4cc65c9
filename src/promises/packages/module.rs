//! A package module: the external program that `packages` promises speak
//! to in CFEngine's package module protocol (API version 1). The command is
//! the program's argument, the request goes to its standard input as
//! `KEY=VALUE` lines (`options=` lines first), and its standard output is
//! the reply; a non-zero exit means the call failed. The replies are parsed
//! here, into what cf-agent 3.21 makes of them, with its log lines.

use crate::eval::bodies::ResolvedBody;
use crate::host::Host;
use crate::host::exec::{Access, CommandSpec, OutputSelect, split_command_line};
use crate::host::packages::PackageRecord;
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

/// How long one call of a package module may take (cf-agent's
/// PACKAGE_PROMISE_SCRIPT_TIMEOUT_SEC).
const CALL_TIMEOUT: Duration = Duration::from_secs(4 * 3600);

/// cf-agent's "no integer" value, which it prints for an
/// `ifelapsed` it cannot read.
pub const CF_NOINT: i64 = -678;

/// A `body package_module`, resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModuleBody {
    pub name: String,
    pub module_path: Option<String>,
    pub interpreter: Option<String>,
    /// Options for calls a promise does not make (the cache queries), and
    /// for promises without `options`.
    pub default_options: Vec<String>,
    /// Minutes between two `list-installed` (0: every time), [`CF_NOINT`]
    /// when the body's value is not an integer.
    pub installed_ifelapsed: i64,
    /// Minutes between two `list-updates`.
    pub updates_ifelapsed: i64,
}

impl ModuleBody {
    /// The settings of a resolved body; unset ones are cf-agent's defaults
    /// (empty, and 0 minutes).
    pub fn from_body(b: &ResolvedBody) -> ModuleBody {
        let minutes = |attr: &str| match b.scalar(attr) {
            None => 0,
            Some(v) => crate::values::number::parse_int(v).unwrap_or(CF_NOINT),
        };
        let text = |attr: &str| b.scalar(attr).filter(|s| !s.is_empty()).map(str::to_string);
        ModuleBody {
            name: b.name.clone(),
            module_path: text("module_path"),
            interpreter: text("interpreter"),
            default_options: b.list("default_options"),
            installed_ifelapsed: minutes("query_installed_ifelapsed"),
            updates_ifelapsed: minutes("query_updates_ifelapsed"),
        }
    }
}

/// A call of a package module that failed: it could not be run, or it did
/// not exit with 0. What failed is said by the caller, in cf-agent's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallFailed;

/// Why a package module cannot be used; the words are cf-agent's.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ModuleError {
    #[error(
        "Cannot find package module interpreter at location '{path}' or access to the file is restricted: {reason}"
    )]
    Interpreter { path: String, reason: String },
    #[error(
        "Cannot find package module script at location '{path}' or access to the file is restricted: {reason}"
    )]
    Script { path: String, reason: String },
    #[error(
        "Cannot find package module at location '{path}' or access to file is restricted: {reason}"
    )]
    Program { path: String, reason: String },
    #[error("No executable for the package module '{0}'")]
    NoExecutable(String),
    #[error("Unsupported package module wrapper API version: {0}")]
    ApiVersion(i64),
}

/// A package module ready to be called: its program was found and it
/// speaks API version 1.
#[derive(Debug, Clone)]
pub struct Module {
    pub name: String,
    /// What comes before the command: the program, or the interpreter,
    /// its options and the script.
    prefix: Vec<String>,
}

/// Whether a module replied with a package file or a repository package.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PackageType {
    File,
    Repo,
}

/// What `get-package-data` said of a promiser.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageInfo {
    pub kind: PackageType,
    pub name: String,
    pub version: Option<String>,
    pub arch: Option<String>,
}

/// The `options=` lines that start every request but `supports-api-version`.
pub fn options_text(options: &[String]) -> String {
    options.iter().map(|o| format!("options={o}\n")).collect()
}

/// A `Name=`/`File=` line with its optional `Version=` and `Architecture=`.
pub fn triplet(key: &str, name: &str, version: Option<&str>, arch: Option<&str>) -> String {
    let mut s = format!("{key}={name}\n");
    if let Some(v) = version {
        s.push_str(&format!("Version={v}\n"));
    }
    if let Some(a) = arch {
        s.push_str(&format!("Architecture={a}\n"));
    }
    s
}

impl Module {
    /// Finds the module's program (`module_path`, else
    /// `WORKDIR/modules/packages/NAME`; with an `interpreter`, the script it
    /// runs) and agrees on the API version with it.
    pub fn open(host: &Host, body: &ModuleBody, workdir: &Path) -> Result<Module, ModuleError> {
        let path = match &body.module_path {
            Some(p) => PathBuf::from(p),
            None => workdir.join("modules").join("packages").join(&body.name),
        };
        let shown = path.display().to_string();
        let prefix = match &body.interpreter {
            Some(interp) => {
                let mut words = split_command_line(interp);
                if words.is_empty() {
                    return Err(ModuleError::NoExecutable(body.name.clone()));
                }
                host.access(Path::new(&words[0]), Access::Execute)
                    .map_err(|e| ModuleError::Interpreter {
                        path: words[0].clone(),
                        reason: crate::host::strerror(&e),
                    })?;
                host.access(&path, Access::Read)
                    .map_err(|e| ModuleError::Script {
                        path: shown.clone(),
                        reason: crate::host::strerror(&e),
                    })?;
                words.push(shown);
                words
            }
            None => {
                host.access(&path, Access::Execute)
                    .map_err(|e| ModuleError::Program {
                        path: shown.clone(),
                        reason: crate::host::strerror(&e),
                    })?;
                vec![shown]
            }
        };
        let module = Module {
            name: body.name.clone(),
            prefix,
        };
        let version = module.api_version(host);
        if version != 1 {
            return Err(ModuleError::ApiVersion(version));
        }
        Ok(module)
    }

    /// `supports-api-version`: the one number the module prints, or -1.
    fn api_version(&self, host: &Host) -> i64 {
        match self.call(host, "supports-api-version", "") {
            Ok(lines) if lines.len() == 1 => crate::values::number::parse_c_long(&lines[0]),
            Ok(_) => -1,
            Err(CallFailed) => {
                crate::info!("Error occurred while getting supported API version.");
                -1
            }
        }
    }

    /// Runs one command with a request; the lines of the reply, or `Err`
    /// when the module could not be run or did not exit with 0 (said at
    /// verbose level, as cf-agent does; the caller says what failed).
    pub fn call(
        &self,
        host: &Host,
        command: &str,
        request: &str,
    ) -> Result<Vec<String>, CallFailed> {
        let mut argv = self.prefix.clone();
        argv.push(command.to_string());
        let line = argv.join(" ");
        crate::trace!("Calling package module: '{line}' with request [{request}]");
        let spec = CommandSpec {
            argv,
            stdin: request.as_bytes().to_vec(),
            timeout: Some(CALL_TIMEOUT),
            output: OutputSelect::StdoutPassStderr,
            ..CommandSpec::default()
        };
        match host.run(&spec) {
            Err(e) => {
                crate::info!("Some error occurred while communicating with {line}: {e}");
                Err(CallFailed)
            }
            Ok(r) if r.code == Some(0) && !r.timed_out => Ok(r
                .output_text()
                .split('\n')
                .filter(|l| !l.is_empty())
                .map(str::to_string)
                .collect()),
            Ok(r) => {
                let how = if r.timed_out {
                    "ran past its time limit and was killed".to_string()
                } else {
                    match r.code {
                        Some(c) => format!("returned with non zero return code: {c}"),
                        None => format!("was killed by signal {}", r.signal.unwrap_or(0)),
                    }
                };
                crate::debug!("Command '{line}' {how}");
                Err(CallFailed)
            }
        }
    }
}

/// Logs the lines of a reply that should have been empty: error messages
/// as errors, anything else at verbose level.
pub fn log_reply_errors(lines: &[String]) {
    for l in lines {
        if l.starts_with("Error=") || l.starts_with("ErrorMessage=") {
            crate::error!("package module: {l}");
        } else {
            crate::debug!("Unsupported response from package module: {l}");
        }
    }
}

/// The reply to `get-package-data`; `None` when it names no package (said
/// as cf-agent says it).
pub fn parse_package_data(lines: &[String]) -> Option<PackageInfo> {
    if lines.is_empty() {
        return None;
    }
    let mut kind = None;
    let (mut name, mut version, mut arch): (Option<String>, Option<String>, Option<String>) =
        (None, None, None);
    for l in lines {
        if let Some(t) = l.strip_prefix("PackageType=") {
            match t {
                "file" => kind = Some(PackageType::File),
                "repo" => kind = Some(PackageType::Repo),
                _ => {
                    crate::debug!("unsupported package type: {t}");
                    return None;
                }
            }
            continue;
        }
        let (slot, what) = if l.starts_with("Name=") {
            (&mut name, "name")
        } else if l.starts_with("Version=") {
            (&mut version, "version")
        } else if l.starts_with("Architecture=") {
            (&mut arch, "architecture")
        } else {
            log_reply_errors(std::slice::from_ref(l));
            continue;
        };
        let value = l.split_once('=').map_or("", |(_, v)| v);
        if let Some(prev) = slot {
            crate::error!("Extraneous package {what} line received: [{l}] {prev}");
            return None;
        }
        *slot = Some(value.to_string());
    }
    match (kind, name) {
        (Some(kind), Some(name)) => Some(PackageInfo {
            kind,
            name,
            version,
            arch,
        }),
        _ => {
            crate::info!("Unknown package name or type.");
            None
        }
    }
}

/// A list of packages (`list-installed`, `list-updates`,
/// `list-updates-local`): the complete `Name`/`Version`/`Architecture`
/// triplets, and whether the reply held errors or lines that are not part
/// of the protocol (each said as cf-agent says it).
pub fn parse_package_list(lines: &[String], module: &str) -> (Vec<PackageRecord>, bool) {
    let mut out = Vec::new();
    let mut had_error = false;
    let (mut name, mut version, mut arch): (Option<&str>, Option<&str>, Option<&str>) =
        (None, None, None);
    let mut push = |n: &str, v: &str, a: &str| {
        out.push(PackageRecord {
            name: n.to_string(),
            version: v.to_string(),
            arch: a.to_string(),
            method: module.to_string(),
        })
    };
    for l in lines {
        if let Some(n) = l.strip_prefix("Name=") {
            if let Some(prev) = name {
                match (version, arch) {
                    (Some(v), Some(a)) => push(prev, v, a),
                    _ => {
                        crate::debug!("Malformed response from package module for package {prev}")
                    }
                }
                version = None;
                arch = None;
            }
            name = Some(n);
        } else if let Some(v) = l.strip_prefix("Version=") {
            version = Some(v);
        } else if let Some(a) = l.strip_prefix("Architecture=") {
            arch = Some(a);
        } else if l.starts_with("Error=") || l.starts_with("ErrorMessage=") {
            crate::error!("package module: {l}");
            had_error = true;
        } else {
            crate::error!("Unsupported response from package module: {l}");
            had_error = true;
        }
    }
    match (name, version, arch) {
        (Some(n), Some(v), Some(a)) => push(n, v, a),
        (None, None, None) => {}
        (n, v, a) => crate::debug!(
            "Malformed response from package manager: [{}:{}:{}]",
            n.unwrap_or(""),
            v.unwrap_or(""),
            a.unwrap_or("")
        ),
    }
    (out, had_error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(s: &str) -> Vec<String> {
        s.lines().map(str::to_string).collect()
    }

    #[test]
    fn requests_are_options_then_triplets() {
        assert_eq!(
            options_text(&["-o".into(), "A=1".into()]),
            "options=-o\noptions=A=1\n"
        );
        assert_eq!(triplet("File", "zip", None, None), "File=zip\n");
        assert_eq!(
            triplet("Name", "zip", Some("3.0"), Some("amd64")),
            "Name=zip\nVersion=3.0\nArchitecture=amd64\n"
        );
    }

    #[test]
    fn package_data_needs_a_type_and_a_name() {
        assert_eq!(
            parse_package_data(&lines("PackageType=repo\nName=zip")),
            Some(PackageInfo {
                kind: PackageType::Repo,
                name: "zip".into(),
                version: None,
                arch: None
            })
        );
        let f = parse_package_data(&lines(
            "PackageType=file\nName=zip\nVersion=3.0\nArchitecture=amd64",
        ))
        .unwrap();
        assert_eq!(f.kind, PackageType::File);
        assert_eq!(f.version.as_deref(), Some("3.0"));
        assert_eq!(parse_package_data(&lines("garbage\nmore")), None);
        assert_eq!(parse_package_data(&lines("PackageType=odd\nName=x")), None);
        assert_eq!(
            parse_package_data(&lines("PackageType=repo\nName=x\nName=y")),
            None
        );
        assert_eq!(parse_package_data(&[]), None);
    }

    #[test]
    fn lists_keep_complete_triplets_and_flag_garbage() {
        let (l, err) = parse_package_list(
            &lines(
                "Name=a\nVersion=1\nArchitecture=x\nName=b\nVersion=2\nName=c\nVersion=3\nArchitecture=y",
            ),
            "m",
        );
        assert!(!err);
        assert_eq!(
            l.iter().map(|r| r.name.as_str()).collect::<Vec<_>>(),
            vec!["a", "c"]
        );
        assert_eq!(l[1].method, "m");
        let (l, err) = parse_package_list(&lines("Name=a\nVersion=1\nArchitecture=x\nhello"), "m");
        assert!(err);
        assert_eq!(l.len(), 1);
        assert!(parse_package_list(&lines("ErrorMessage=boom"), "m").1);
    }

    #[test]
    fn a_missing_module_is_named() {
        let body = ModuleBody {
            name: "nosuch".into(),
            module_path: None,
            interpreter: None,
            default_options: Vec::new(),
            installed_ifelapsed: 0,
            updates_ifelapsed: 0,
        };
        let e = Module::open(&Host::real(), &body, Path::new("/nonexistent-wd")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "Cannot find package module at location '/nonexistent-wd/modules/packages/nosuch' or access to file is restricted: No such file or directory"
        );
    }

    #[test]
    fn a_module_that_prints_garbage_has_no_api_version() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("chatty");
        std::fs::write(&script, "echo hello\necho world\n").unwrap();
        let body = ModuleBody {
            name: "chatty".into(),
            module_path: Some(script.display().to_string()),
            interpreter: Some("/bin/sh".into()),
            default_options: Vec::new(),
            installed_ifelapsed: 0,
            updates_ifelapsed: 0,
        };
        assert_eq!(
            Module::open(&Host::real(), &body, dir.path()).unwrap_err(),
            ModuleError::ApiVersion(-1)
        );
        std::fs::write(&script, "cat >/dev/null; echo 1\n").unwrap();
        let m = Module::open(&Host::real(), &body, dir.path()).unwrap();
        assert_eq!(
            m.call(&Host::real(), "x", "Name=y\n"),
            Ok(vec!["1".to_string()])
        );
    }
}
