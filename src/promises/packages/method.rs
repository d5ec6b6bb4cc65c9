//! CFEngine's old package promise (`package_method` bodies), as cf-agent
//! 3.21 keeps it: the promise reads what is installed (see [`super::legacy`]),
//! decides what the package manager must do and puts it on the schedule;
//! the schedule is carried out when the bundle's `packages` promises of a
//! pass are done: deletions, then additions, updates, patches and
//! verifications, one command per package (`package_changes =>
//! "individual"`) or one for all (`"bulk"`). The promise is repaired when
//! it schedules; the command's exit code then sets its classes again
//! (failed, when the command fails), as cf-agent's do.

use super::legacy::{self, LegacyLists};
use crate::eval::bodies::ResolvedBody;
use crate::eval::expanded::ExpandedPromise;
use crate::host::Host;
use crate::host::exec::{CommandSpec, OutputSelect, split_command_line};
use crate::host::packages::PackageRecord;
use crate::report::Outcome;
use crate::report::change::{Change, Changes, Decision};
use crate::values::regex::Regex;
use std::sync::Arc;

/// What the promise asks of the package manager (`package_policy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Add,
    Delete,
    Reinstall,
    Update,
    AddUpdate,
    Patch,
    Verify,
}

impl Action {
    pub fn parse(s: Option<&str>) -> Option<Action> {
        Some(match s {
            None | Some("add") => Action::Add,
            Some("delete") => Action::Delete,
            Some("reinstall") => Action::Reinstall,
            Some("update") => Action::Update,
            Some("addupdate") => Action::AddUpdate,
            Some("patch") => Action::Patch,
            Some("verify") => Action::Verify,
            Some(_) => return None,
        })
    }

    /// cf-agent's words for it.
    fn gerund(self) -> &'static str {
        match self {
            Action::Add => "installing",
            Action::Delete => "uninstalling",
            Action::Reinstall => "reinstalling",
            Action::Update => "updating",
            Action::AddUpdate => "installing/updating",
            Action::Patch => "patching",
            Action::Verify => "verifying",
        }
    }
}

/// `package_select`: how a version compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Select {
    None,
    Eq,
    Neq,
    Lt,
    Gt,
    Ge,
    Le,
}

impl Select {
    pub fn parse(s: Option<&str>) -> Option<Select> {
        Some(match s {
            None => Select::None,
            // cf-agent reads a value it does not know as none.
            Some(x) if !["==", "!=", "<", ">", ">=", "<="].contains(&x) => Select::None,
            Some("==") => Select::Eq,
            Some("!=") => Select::Neq,
            Some("<") => Select::Lt,
            Some(">") => Select::Gt,
            Some(">=") => Select::Ge,
            Some("<=") => Select::Le,
            Some(_) => return None,
        })
    }

    fn symbol(self) -> &'static str {
        match self {
            Select::None | Select::Eq => "==",
            Select::Neq => "!=",
            Select::Lt => "<",
            Select::Gt => ">",
            Select::Ge => ">=",
            Select::Le => "<=",
        }
    }
}

/// What a version comparison came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerCmp {
    Match,
    NoMatch,
    Error,
}

impl VerCmp {
    fn not(self) -> VerCmp {
        match self {
            VerCmp::Match => VerCmp::NoMatch,
            VerCmp::NoMatch => VerCmp::Match,
            VerCmp::Error => VerCmp::Error,
        }
    }

    fn and(self, o: VerCmp) -> VerCmp {
        match (self, o) {
            (VerCmp::Error, _) | (_, VerCmp::Error) => VerCmp::Error,
            (VerCmp::Match, VerCmp::Match) => VerCmp::Match,
            _ => VerCmp::NoMatch,
        }
    }
}

/// A `package_method` body, read once per promise.
#[derive(Debug, Clone, Default)]
pub struct MethodBody {
    pub name: String,
    pub list_command: Option<String>,
    pub list_name_regex: Option<String>,
    pub list_version_regex: Option<String>,
    pub list_arch_regex: Option<String>,
    pub installed_regex: Option<String>,
    pub multiline_start: Option<String>,
    pub list_update_command: Option<String>,
    pub list_update_ifelapsed: Option<i64>,
    pub name_regex: Option<String>,
    pub version_regex: Option<String>,
    pub arch_regex: Option<String>,
    pub add_command: Option<String>,
    pub delete_command: Option<String>,
    pub update_command: Option<String>,
    pub patch_command: Option<String>,
    pub verify_command: Option<String>,
    pub patch_list_command: Option<String>,
    pub patch_installed_regex: Option<String>,
    pub patch_name_regex: Option<String>,
    pub patch_version_regex: Option<String>,
    pub patch_arch_regex: Option<String>,
    pub name_convention: Option<String>,
    pub delete_convention: Option<String>,
    pub default_arch_command: Option<String>,
    pub version_less_command: Option<String>,
    pub version_equal_command: Option<String>,
    pub noverify_regex: Option<String>,
    pub noverify_returncode: Option<i64>,
    pub file_repositories: Vec<String>,
    pub useshell: bool,
    pub changes: ChangesPolicy,
}

/// `package_changes`: one command a package or one for all. Without it,
/// cf-agent schedules the operations but never runs them (unless the
/// command takes no arguments), and so do we.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ChangesPolicy {
    #[default]
    Unset,
    Individual,
    Bulk,
}

impl MethodBody {
    pub fn from_body(b: &ResolvedBody) -> MethodBody {
        let s = |a: &str| b.scalar(a).map(str::to_string);
        let int = |a: &str| {
            b.scalar(a)
                .and_then(|v| crate::values::number::parse_int(v).ok())
        };
        MethodBody {
            name: b.name.clone(),
            list_command: s("package_list_command"),
            list_name_regex: s("package_list_name_regex"),
            list_version_regex: s("package_list_version_regex"),
            list_arch_regex: s("package_list_arch_regex"),
            installed_regex: s("package_installed_regex"),
            multiline_start: s("package_multiline_start"),
            list_update_command: s("package_list_update_command"),
            list_update_ifelapsed: int("package_list_update_ifelapsed"),
            name_regex: s("package_name_regex"),
            version_regex: s("package_version_regex"),
            arch_regex: s("package_arch_regex"),
            add_command: s("package_add_command"),
            delete_command: s("package_delete_command"),
            update_command: s("package_update_command"),
            patch_command: s("package_patch_command"),
            verify_command: s("package_verify_command"),
            patch_list_command: s("package_patch_list_command"),
            patch_installed_regex: s("package_patch_installed_regex"),
            patch_name_regex: s("package_patch_name_regex"),
            patch_version_regex: s("package_patch_version_regex"),
            patch_arch_regex: s("package_patch_arch_regex"),
            name_convention: s("package_name_convention"),
            delete_convention: s("package_delete_convention"),
            default_arch_command: s("package_default_arch_command"),
            version_less_command: s("package_version_less_command"),
            version_equal_command: s("package_version_equal_command"),
            noverify_regex: s("package_noverify_regex"),
            noverify_returncode: int("package_noverify_returncode"),
            file_repositories: b.list("package_file_repositories"),
            useshell: b
                .scalar("package_commands_useshell")
                .and_then(crate::values::number::parse_bool)
                .unwrap_or(true),
            changes: match b.scalar("package_changes") {
                Some("individual") => ChangesPolicy::Individual,
                Some("bulk") => ChangesPolicy::Bulk,
                _ => ChangesPolicy::Unset,
            },
        }
    }

    /// The list command the installed packages are kept under (cf-agent's
    /// manager name); empty without one.
    pub fn manager(&self) -> &str {
        self.list_command.as_deref().unwrap_or("")
    }
}

/// A promise's wishes: the promise's own attributes.
pub struct Wish<'p> {
    pub promise: &'p ExpandedPromise,
    pub body: MethodBody,
    pub action: Action,
    pub select: Select,
    pub version: Option<String>,
    pub architectures: Vec<String>,
}

/// One operation scheduled for a manager.
#[derive(Debug, Clone)]
pub struct Item {
    pub name: String,
    pub promise: ExpandedPromise,
    pub body: MethodBody,
}

/// The operations of one command (cf-agent's scheduled package manager).
#[derive(Debug, Clone)]
pub struct Scheduled {
    pub command: String,
    pub action: Action,
    pub changes: ChangesPolicy,
    /// Newest first, as cf-agent prepends them.
    pub items: Vec<Item>,
}

/// What the promise may use of the run while it decides.
pub struct Decide<'a> {
    pub host: &'a Host,
    pub changes: &'a mut Changes,
    pub lists: &'a mut LegacyLists,
    pub regex: &'a mut dyn FnMut(&str) -> Option<Arc<Regex>>,
    /// How many of the promise's checks ended without cf-agent reporting
    /// an outcome (an operation scheduled: the command's exit code
    /// reports it later).
    pub unreported: usize,
    /// The outcomes reported, when some check reported none.
    pub reported: Vec<Outcome>,
}

fn sanity_fail(msg: &str, at: &str) -> bool {
    crate::error!("{msg} {at}");
    false
}

/// cf-agent's PackageSanityCheck.
pub fn sane(w: &Wish<'_>, at: &str) -> bool {
    let b = &w.body;
    if b.list_name_regex.is_none() {
        return sanity_fail(
            "You must supply a method for determining the name of existing packages e.g. use the standard library generic package_method",
            at,
        );
    }
    if b.list_version_regex.is_none() {
        return sanity_fail(
            "You must supply a method for determining the version of existing packages e.g. use the standard library generic package_method",
            at,
        );
    }
    if !b.useshell
        && let Some(c) = &b.list_command
        && !executable(c)
    {
        return sanity_fail(
            &format!("The proposed package list command '{c}' was not executable"),
            at,
        );
    }
    if b.list_command.is_none() && b.file_repositories.is_empty() {
        return sanity_fail(
            "You must supply a method for determining the list of existing packages (a command or repository list) e.g. use the standard library generic package_method",
            at,
        );
    }
    let has_version = w.version.is_some();
    let has_archs = !w.architectures.is_empty();
    if b.name_regex.is_some() || b.version_regex.is_some() || b.arch_regex.is_some() {
        if b.name_regex.is_none() {
            return sanity_fail(
                "You must supply name regex if you supplied version or arch regex for parsing promiser string",
                at,
            );
        }
        let all = b.version_regex.is_some() && b.arch_regex.is_some();
        let both = has_version && has_archs;
        let either = has_version || has_archs;
        if if all { either } else { both } {
            return sanity_fail(
                "You must either supply all regexs for (name,version,arch) or a separate version number and architecture",
                at,
            );
        }
        if b.version_regex.is_some() && has_version {
            return sanity_fail(
                "You must either supply version regex or a separate version number",
                at,
            );
        }
        if b.arch_regex.is_some() && has_archs {
            return sanity_fail(
                "You must either supply arch regex or a separate architecture",
                at,
            );
        }
    }
    if b.installed_regex.is_none() {
        return sanity_fail("!! Package installed regex undefined", at);
    }
    if w.action == Action::Verify {
        if b.verify_command.is_none() {
            return sanity_fail(
                "!! Package verify policy is used, but no package_verify_command is defined",
                at,
            );
        }
        if b.noverify_returncode.is_none() && b.noverify_regex.is_none() {
            return sanity_fail(
                "!! Package verify policy is used, but no definition of verification failiure is set (package_noverify_returncode or packages.package_noverify_regex)",
                at,
            );
        }
    }
    if b.noverify_returncode.is_some() && b.noverify_regex.is_some() {
        return sanity_fail(
            "!! Both package_noverify_returncode and package_noverify_regex are defined, pick one of them",
            at,
        );
    }
    let conflict = |used: &str, defined: &str| {
        sanity_fail(
            &format!("!! Dependency conflict: {used} is not used, but {defined} is defined."),
            at,
        )
    };
    if b.delete_command.is_none() && b.delete_convention.is_some() {
        return conflict("package_delete_command", "package_delete_convention");
    }
    if b.list_command.is_none() {
        // cf-agent names two of them after the promise's attributes.
        for (set, name) in [
            (b.installed_regex.is_some(), "package_installed_regex"),
            (b.list_arch_regex.is_some(), "package_arch_regex"),
            (b.list_name_regex.is_some(), "package_name_regex"),
            (b.list_version_regex.is_some(), "package_version_regex"),
        ] {
            if set {
                return conflict("package_list_command", name);
            }
        }
    }
    if b.patch_command.is_none() {
        for (set, name) in [
            (b.patch_arch_regex.is_some(), "package_patch_arch_regex"),
            (b.patch_name_regex.is_some(), "package_patch_name_regex"),
            (
                b.patch_version_regex.is_some(),
                "package_patch_version_regex",
            ),
        ] {
            if set {
                return conflict("package_patch_command", name);
            }
        }
    }
    if b.patch_list_command.is_none() && b.patch_installed_regex.is_some() {
        return conflict(
            "package_patch_list_command",
            "package_patch_installed_regex",
        );
    }
    if b.verify_command.is_none() {
        if b.noverify_regex.is_some() {
            return conflict("package_verify_command", "package_noverify_regex");
        }
        if b.noverify_returncode.is_some() {
            return conflict("package_verify_command", "package_noverify_returncode");
        }
    }
    true
}

/// Whether a command line's program is executable (cf-agent's
/// IsExecutable(CommandArg0(...))).
fn executable(command: &str) -> bool {
    let words = split_command_line(command);
    words
        .first()
        .is_some_and(|p| crate::host::exec::check_executable(p).is_ok())
}

/// cf-agent's GetDefaultArch: the first line the command prints,
/// "default" without one; `None` when it cannot be had.
pub fn default_arch(host: &Host, command: Option<&str>) -> Option<String> {
    let Some(command) = command else {
        return Some("default".into());
    };
    crate::debug!("Obtaining default architecture for package manager '{command}'");
    let r = host
        .run(&CommandSpec {
            argv: vec![command.to_string()],
            shell: true,
            output: OutputSelect::Both,
            ..CommandSpec::default()
        })
        .ok()?;
    let text = r.output_text();
    let line = text.lines().next()?.to_string();
    crate::debug!("Default architecture for package manager is '{line}'");
    Some(line)
}

/// Runs a command line as the body says (through a shell or not).
pub fn run_command(
    host: &Host,
    command: &str,
    shell: bool,
    output: OutputSelect,
) -> std::io::Result<crate::host::exec::CommandResult> {
    host.run(&CommandSpec {
        argv: if shell {
            vec![command.to_string()]
        } else {
            split_command_line(command)
        },
        shell,
        output,
        ..CommandSpec::default()
    })
}

/// `$(name)`, `$(version)`, `$(arch)` (and the like) of a convention.
fn expand_convention(text: &str, vars: &[(&str, &str)]) -> String {
    let mut out = text.to_string();
    for (k, v) in vars {
        out = out
            .replace(&format!("$({k})"), v)
            .replace(&format!("${{{k}}}"), v);
    }
    out
}

/// The first group of `pattern` in `text`, or cf-agent's "CF_NOMATCH".
fn first_reference(
    regex: &mut dyn FnMut(&str) -> Option<Arc<Regex>>,
    pattern: Option<&str>,
    text: &str,
) -> String {
    pattern
        .and_then(regex)
        .and_then(|r| r.captures(text))
        .and_then(|g| g.get(1).cloned().flatten())
        .unwrap_or_else(|| "CF_NOMATCH".to_string())
}

impl Decide<'_> {
    /// The installed packages of the promise's manager.
    fn installed(&self, b: &MethodBody) -> &[PackageRecord] {
        self.lists.installed_of(b.manager())
    }

    fn compare_versions(&mut self, w: &Wish<'_>, v1: &str, v2: &str, select: Select) -> VerCmp {
        let r = match select {
            Select::Eq | Select::None => self.versions_equal(w, v1, v2),
            Select::Neq => self.versions_equal(w, v1, v2).not(),
            Select::Lt => self.versions_less(w, v1, v2),
            Select::Gt => self.versions_less(w, v2, v1),
            Select::Ge => self.versions_less(w, v1, v2).not(),
            Select::Le => self.versions_less(w, v2, v1).not(),
        };
        crate::debug!(
            "CompareVersions: Checked whether package version {v1} {} {v2}: {}",
            select.symbol(),
            match r {
                VerCmp::Match => "yes",
                VerCmp::NoMatch => "no",
                VerCmp::Error => "Incompatible version format. Can't decide",
            }
        );
        r
    }

    fn versions_less(&mut self, w: &Wish<'_>, v1: &str, v2: &str) -> VerCmp {
        match &w.body.version_less_command {
            Some(c) => self.cmp_command(w, c, v1, v2),
            None => compare_internal(v1, v2, Select::Lt),
        }
    }

    fn versions_equal(&mut self, w: &Wish<'_>, v1: &str, v2: &str) -> VerCmp {
        if let Some(c) = &w.body.version_equal_command {
            return self.cmp_command(w, c, v1, v2);
        }
        if w.body.version_less_command.is_some() {
            return self
                .versions_less(w, v1, v2)
                .not()
                .and(self.versions_less(w, v2, v1).not());
        }
        compare_internal(v1, v2, Select::Eq)
    }

    fn cmp_command(&mut self, w: &Wish<'_>, command: &str, v1: &str, v2: &str) -> VerCmp {
        let line = expand_convention(command, &[("v1", v1), ("v2", v2)]);
        crate::debug!("Executing '{line}'");
        match run_command(self.host, &line, w.body.useshell, OutputSelect::Inherit) {
            Ok(r) => {
                crate::debug!("returned: {}", r.code.unwrap_or(-1));
                if r.code == Some(0) {
                    VerCmp::Match
                } else {
                    VerCmp::NoMatch
                }
            }
            Err(e) => {
                crate::error!(
                    "Can not start package version comparison command '{line}'. (cf_popen: {e}) {}",
                    w.promise.located()
                );
                VerCmp::Error
            }
        }
    }

    /// cf-agent's PackageMatch (and PatchMatch over the patch list).
    fn package_match(&mut self, w: &Wish<'_>, n: &str, v: &str, a: &str, patch: bool) -> VerCmp {
        let list: Vec<PackageRecord> = if patch {
            self.lists.patches_of(w.body.manager()).to_vec()
        } else {
            self.installed(&w.body).to_vec()
        };
        for pi in &list {
            if patch && (self.regex)(n).is_some_and(|r| r.is_full_match(&pi.name)) {
                return VerCmp::Match;
            }
            if n != pi.name {
                continue;
            }
            if a != "*" && a != pi.arch {
                continue;
            }
            if v == "*" {
                return VerCmp::Match;
            }
            let r = self.compare_versions(w, &pi.version, v, Select::Eq);
            if r != VerCmp::NoMatch {
                return r;
            }
        }
        VerCmp::NoMatch
    }

    /// cf-agent's IsNewerThanInstalled: whether an installed package of
    /// the name (and arch) is older than `v`; its version and arch too.
    fn newer_than_installed(
        &mut self,
        w: &Wish<'_>,
        n: &str,
        v: &str,
        a: &str,
    ) -> (bool, String, String) {
        let found = self
            .installed(&w.body)
            .iter()
            .find(|pi| pi.name == n && (a == "*" || a == pi.arch))
            .cloned();
        match found {
            Some(pi) => {
                let newer = self.compare_versions(w, &pi.version, v, Select::Lt) == VerCmp::Match;
                (newer, pi.version, pi.arch)
            }
            None => {
                crate::debug!("Package ({n},{a}) [name,arch] is not installed");
                (false, String::new(), String::new())
            }
        }
    }

    /// cf-agent's VerifyPromisedPackage.
    pub fn verify_package(&mut self, w: &Wish<'_>) -> Outcome {
        let promiser = w.promise.promiser.as_str();
        let mut checks: Vec<(String, String, String, bool)> = Vec::new();
        if let Some(version) = &w.version {
            if w.architectures.is_empty() {
                checks.push((promiser.into(), version.clone(), "*".into(), false));
            }
            for arch in &w.architectures {
                checks.push((promiser.into(), version.clone(), arch.clone(), false));
            }
        } else if w.body.version_regex.is_some() {
            let version = first_reference(self.regex, w.body.version_regex.as_deref(), promiser);
            let name = first_reference(self.regex, w.body.name_regex.as_deref(), promiser);
            let mut arch = first_reference(self.regex, w.body.arch_regex.as_deref(), promiser);
            if arch.is_empty() || arch == "CF_NOMATCH" {
                arch = "*".into();
            }
            checks.push((name, version, arch, false));
        } else {
            if w.architectures.is_empty() {
                checks.push((promiser.into(), "*".into(), "*".into(), true));
            }
            for arch in &w.architectures {
                checks.push((promiser.into(), "*".into(), arch.clone(), true));
            }
        }
        let mut result = Outcome::Kept;
        for (name, version, arch, no_version) in checks {
            let before = self.unreported;
            let o = self.check_state(w, &name, &version, &arch, no_version);
            if self.unreported == before {
                self.reported.push(o);
            }
            result = result.worst(o);
        }
        result
    }

    /// Whether a patch of this name is installed, and whether one matches
    /// version and arch too; `None` (said) when versions cannot be compared.
    fn patch_matches(
        &mut self,
        w: &Wish<'_>,
        name: &str,
        version: &str,
        arch: &str,
    ) -> Option<(bool, bool)> {
        let installed = self.package_match(w, name, "*", "*", true);
        let matches = self.package_match(w, name, version, arch, true);
        if installed == VerCmp::Error || matches == VerCmp::Error {
            crate::error!(
                "Failure trying to compare package versions {}",
                w.promise.located()
            );
            return None;
        }
        Some((installed == VerCmp::Match, matches == VerCmp::Match))
    }

    /// cf-agent's VerifyPromisedPatch.
    pub fn verify_patch(&mut self, w: &Wish<'_>) -> Outcome {
        let promiser = w.promise.promiser.clone();
        let (mut installed, mut matches) = (0, 0);
        let (name, version, arch, no_version);
        if w.version.is_some() || w.body.version_regex.is_none() {
            no_version = w.version.is_none();
            let v = w.version.clone().unwrap_or_else(|| "*".into());
            let archs: Vec<String> = if w.architectures.is_empty() {
                vec!["*".into()]
            } else {
                w.architectures.clone()
            };
            let mut last = "*".to_string();
            for a in archs {
                let Some((i, m)) = self.patch_matches(w, &promiser, &v, &a) else {
                    return Outcome::Failed;
                };
                installed += i as usize;
                matches += m as usize;
                last = a;
            }
            (name, version, arch) = (promiser.clone(), v, last);
        } else {
            no_version = false;
            version = first_reference(self.regex, w.body.version_regex.as_deref(), &promiser);
            name = first_reference(self.regex, w.body.name_regex.as_deref(), &promiser);
            arch = first_reference(self.regex, w.body.arch_regex.as_deref(), &promiser);
            let Some((i, m)) = self.patch_matches(w, &name, &version, &arch) else {
                return Outcome::Failed;
            };
            installed = i as usize;
            matches = m as usize;
        }
        crate::debug!("{installed} patch(es) matching the name '{name}' already installed");
        crate::debug!("{matches} patch(es) match the promise body's criteria fully");
        // cf-agent's patch promise is kept whatever it scheduled.
        let _ = self.schedule_op(
            w,
            &name,
            &version,
            &arch,
            installed > 0,
            matches > 0,
            no_version,
        );
        Outcome::Kept
    }

    /// cf-agent's CheckPackageState.
    fn check_state(
        &mut self,
        w: &Wish<'_>,
        name: &str,
        version: &str,
        arch: &str,
        no_version: bool,
    ) -> Outcome {
        let installed = self.package_match(w, name, "*", arch, false);
        if installed == VerCmp::Error {
            crate::error!(
                "Failure trying to compare installed package versions {}",
                w.promise.located()
            );
            return Outcome::Failed;
        }
        let matches = self.package_match(w, name, version, arch, false);
        if matches == VerCmp::Error {
            crate::error!(
                "Failure trying to compare available package versions {}",
                w.promise.located()
            );
            return Outcome::Failed;
        }
        let (installed, matches) = (installed == VerCmp::Match, matches == VerCmp::Match);
        let promiser = &w.promise.promiser;
        let schedule = match w.action {
            Action::Delete => {
                if !(matches && installed) {
                    crate::debug!("Package {promiser} to be deleted does not exist anywhere");
                }
                matches && installed
            }
            Action::Reinstall => {
                if !(matches && installed) {
                    crate::debug!("Package '{promiser}' already installed and matches criteria");
                }
                matches && installed
            }
            _ => {
                if matches && installed {
                    crate::debug!("Package '{promiser}' already installed and matches criteria");
                }
                !(matches && installed)
            }
        };
        if !schedule {
            return Outcome::Kept;
        }
        self.schedule_op(w, name, version, arch, installed, matches, no_version)
    }

    /// cf-agent's SchedulePackageOp.
    #[allow(clippy::too_many_arguments)]
    fn schedule_op(
        &mut self,
        w: &Wish<'_>,
        name: &str,
        version: &str,
        arch: &str,
        installed: bool,
        matched: bool,
        no_version: bool,
    ) -> Outcome {
        let b = &w.body;
        let at = w.promise.located();
        crate::debug!(
            "Checking if package ({name},{version},{arch}) [name,version,arch] is at the desired state (installed={},matched={})",
            installed as i32,
            matched as i32
        );
        let vars = [("name", name), ("version", version), ("arch", arch)];
        let mut id = match (&b.delete_convention, &b.name_convention) {
            (Some(d), _) if w.action == Action::Delete => expand_convention(d, &vars),
            (_, Some(n)) => expand_convention(n, &vars),
            _ => name.to_string(),
        };
        crate::debug!("Package promises to refer to itself as '{id}' to the manager");
        let in_range = matches!(
            w.select,
            Select::Eq | Select::Ge | Select::Le | Select::None
        );
        let action = match w.action {
            Action::AddUpdate if installed => Action::Update,
            Action::AddUpdate => Action::Add,
            a => a,
        };
        let fail = |msg: &str| {
            crate::error!("{msg} {at}");
            Outcome::Failed
        };
        match action {
            Action::Add => {
                if installed {
                    crate::debug!(
                        "Package '{}' already installed, so we never add it again",
                        w.promise.promiser
                    );
                    return Outcome::Kept;
                }
                if !b.file_repositories.is_empty() {
                    match self.largest_in_repositories(w, name, version, arch) {
                        Some((file, _)) => id = file,
                        None => {
                            crate::debug!(
                                "No package in file repositories satisfy version constraint"
                            );
                            self.unreported += 1;
                            return Outcome::Kept;
                        }
                    }
                }
                let Some(add) = &b.add_command else {
                    return fail("Package add command undefined");
                };
                self.add_to_schedule(w, add, Action::Add, &id, false)
            }
            Action::Delete => {
                if !((matched && in_range) || (installed && no_version)) {
                    crate::debug!("Package deletion is as promised -- no match");
                    return Outcome::Kept;
                }
                let Some(delete) = &b.delete_command else {
                    return fail("Package delete command undefined");
                };
                if !b.file_repositories.is_empty()
                    && let Some(rest) = id.strip_prefix("$(firstrepo)")
                {
                    match prefix_local_repository(&b.file_repositories, rest) {
                        Some(p) => id = p,
                        None => crate::error!(
                            "Package '{rest}' can't be found in any of the listed repositories"
                        ),
                    }
                }
                self.add_to_schedule(w, delete, Action::Delete, &id, false)
            }
            Action::Reinstall => {
                let Some(delete) = &b.delete_command else {
                    return fail("Package delete command undefined");
                };
                if no_version {
                    return fail(
                        "Package reinstallation cannot be promised -- insufficient version info or no match",
                    );
                }
                let Some(add) = &b.add_command else {
                    return fail("Package add command undefined");
                };
                let mut result = Outcome::Kept;
                if (matched && in_range) || (installed && no_version) {
                    result = self.add_to_schedule(w, delete, Action::Delete, &id, false);
                }
                result.worst(self.add_to_schedule(w, add, Action::Add, &id, false))
            }
            Action::Update => {
                let largest = if b.file_repositories.is_empty() {
                    version.to_string()
                } else {
                    match self.largest_in_repositories(w, name, version, arch) {
                        Some((file, v)) => {
                            id = file;
                            v
                        }
                        None => {
                            crate::debug!(
                                "No package in file repositories satisfy version constraint"
                            );
                            self.unreported += 1;
                            return Outcome::Kept;
                        }
                    }
                };
                let (mut inst_ver, mut inst_arch) = (String::new(), String::new());
                if installed {
                    let (newer, v, a) = self.newer_than_installed(w, name, &largest, arch);
                    (inst_ver, inst_arch) = (v, a);
                    if !newer {
                        crate::debug!(
                            "Installed packaged '{}' is up to date, not updating",
                            w.promise.promiser
                        );
                        return Outcome::Kept;
                    }
                }
                if !(installed || (matched && in_range && !no_version)) {
                    return fail(&format!(
                        "Package '{}' cannot be updated -- no match or not installed",
                        w.promise.promiser
                    ));
                }
                match &b.update_command {
                    Some(update) => self.add_to_schedule(w, update, Action::Update, &id, false),
                    None => {
                        let id_del = match &b.delete_convention {
                            Some(d) => {
                                let v = if inst_ver.is_empty() { "*" } else { &inst_ver };
                                let a = if inst_arch.is_empty() {
                                    "*"
                                } else {
                                    &inst_arch
                                };
                                expand_convention(d, &[("name", name), ("version", v), ("arch", a)])
                            }
                            None => id.clone(),
                        };
                        let Some(add) = &b.add_command else {
                            return fail("Package add command undefined");
                        };
                        let Some(delete) = &b.delete_command else {
                            return fail("Package delete command undefined");
                        };
                        self.add_to_schedule(w, delete, Action::Delete, &id_del, false)
                            .worst(self.add_to_schedule(w, add, Action::Add, &id, false))
                    }
                }
            }
            Action::Patch => {
                if matched && !installed {
                    let command = b.patch_command.clone().unwrap_or_default();
                    self.add_to_schedule(w, &command, Action::Patch, &id, true)
                } else {
                    crate::debug!(
                        "Package patch state of '{}' is as promised -- already installed",
                        w.promise.promiser
                    );
                    Outcome::Kept
                }
            }
            Action::Verify => {
                if (matched && in_range) || (installed && no_version) {
                    let command = b.verify_command.clone().unwrap_or_default();
                    self.add_to_schedule(w, &command, Action::Verify, &id, false)
                } else {
                    crate::info!(
                        "Package '{}' cannot be verified -- no match {at}",
                        w.promise.promiser
                    );
                    Outcome::Failed
                }
            }
            Action::AddUpdate => unreachable!("addupdate is add or update by now"),
        }
    }

    /// cf-agent's FindLargestVersionAvail: the file of the largest version
    /// of the package in the file repositories, and that version.
    fn largest_in_repositories(
        &mut self,
        w: &Wish<'_>,
        name: &str,
        version: &str,
        arch: &str,
    ) -> Option<(String, String)> {
        let convention = w.body.name_convention.clone().unwrap_or_default();
        let any = expand_convention(
            &convention,
            &[("name", name), ("version", "(.*)"), ("arch", arch)],
        );
        let pattern = escape_except(&any, "(.*)");
        let re = (self.regex)(&pattern)?;
        let mut best_version = if version.is_empty() || version == "*" {
            String::new()
        } else {
            version.to_string()
        };
        let mut best = None;
        for dir in &w.body.file_repositories {
            let entries = match crate::host::local::list_dir(dir) {
                Ok(e) => e
                    .iter()
                    .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .collect::<Vec<_>>(),
                Err(e) => {
                    crate::error!("Can't open local directory '{dir}'. (opendir: {e})");
                    continue;
                }
            };
            for file in entries {
                if !re.is_full_match(&file) {
                    continue;
                }
                let v = re
                    .captures(&file)
                    .and_then(|g| g.get(1).cloned().flatten())
                    .unwrap_or_default();
                if self.compare_versions(w, &v, &best_version, w.select) == VerCmp::Match {
                    best_version = v;
                    best = Some(file);
                }
            }
        }
        best.map(|f| (f, best_version))
    }

    /// cf-agent's AddPackageToSchedule: a warning when only warning is
    /// promised, else the operation goes on the schedule.
    fn add_to_schedule(
        &mut self,
        w: &Wish<'_>,
        command: &str,
        action: Action,
        id: &str,
        patch: bool,
    ) -> Outcome {
        let promiser = &w.promise.promiser;
        let change = Change::new("package", id)
            .should(format!(
                "Should repair promise '{promiser}' by '{}' package '{id}'",
                w.action.gerund()
            ))
            .should_when_warning(format!(
                "Need to repair promise '{promiser}' by '{}' package '{id}'",
                action.gerund()
            ))
            .without_suffix()
            // cf-agent schedules the operation under a dry run too, and
            // says so ("Deleting bash..."); only the command is not run.
            .previewed();
        match self.changes.plan(&change) {
            Decision::Make => {}
            // Only warning promised: a warning, nothing scheduled.
            Decision::Withheld {
                outcome,
                as_if_made,
            } => {
                if as_if_made {
                    self.unreported += 1;
                }
                return outcome;
            }
        }
        self.unreported += 1;
        self.changes.record(change, format!("scheduled {id}"));
        let _ = patch;
        self.lists.schedule(Scheduled {
            command: command.to_string(),
            action,
            changes: w.body.changes,
            items: vec![Item {
                name: id.to_string(),
                promise: w.promise.clone(),
                body: w.body.clone(),
            }],
        });
        Outcome::Repaired
    }
}

/// A pattern that matches `text` literally, but for `keep` (cf-agent's
/// EscapeSpecialChars with an exception).
fn escape_except(text: &str, keep: &str) -> String {
    text.split(keep)
        .map(escape_regex)
        .collect::<Vec<_>>()
        .join(keep)
}

/// `text` as a pattern that matches it literally.
fn escape_regex(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// cf-agent's PrefixLocalRepository: the quoted path of a package file in
/// the first repository that has it.
fn prefix_local_repository(repositories: &[String], package: &str) -> Option<String> {
    repositories.iter().find_map(|r| {
        let path = if r.ends_with('/') {
            format!("{r}{package}")
        } else {
            format!("{r}/{package}")
        };
        crate::host::local::exists(&path).then(|| format!("\"{path}\""))
    })
}

/// cf-agent's ComparePackageVersionsInternal: versions split into
/// alphanumeric parts and separators; the separators must agree, the
/// parts compare as text.
pub fn compare_internal(v1: &str, v2: &str, cmp: Select) -> VerCmp {
    let (n1, s1) = parse_version(&v1.replace(',', "_"));
    let (n2, s2) = parse_version(&v2.replace(',', "_"));
    let mut compatible = true;
    for (i, (a, b)) in s1.iter().zip(&s2).enumerate() {
        if a != b {
            compatible = false;
            break;
        }
        if i + 1 == s1.len() && i + 1 == s2.len() {
            break;
        }
    }
    if !compatible {
        crate::debug!("Versioning models for ({v1},{v2}) were incompatible");
        return VerCmp::Error;
    }
    let equal = v1 == v2;
    let mut matched = VerCmp::NoMatch;
    let mut stopped = false;
    let common = n1.len().min(n2.len());
    for (a, b) in n1.iter().zip(&n2) {
        let c = a.cmp(b);
        let mut stop = false;
        match cmp {
            Select::Eq | Select::None => {
                if equal {
                    matched = VerCmp::Match;
                }
            }
            Select::Neq => {
                if !equal {
                    matched = VerCmp::Match;
                }
            }
            Select::Gt => match c {
                std::cmp::Ordering::Greater => matched = VerCmp::Match,
                std::cmp::Ordering::Less => stop = true,
                _ => {}
            },
            Select::Lt => match c {
                std::cmp::Ordering::Less => matched = VerCmp::Match,
                std::cmp::Ordering::Greater => stop = true,
                _ => {}
            },
            Select::Ge => {
                if c == std::cmp::Ordering::Greater || equal {
                    matched = VerCmp::Match;
                } else if c == std::cmp::Ordering::Less {
                    stop = true;
                }
            }
            Select::Le => {
                if c == std::cmp::Ordering::Less || equal {
                    matched = VerCmp::Match;
                } else if c == std::cmp::Ordering::Greater {
                    stop = true;
                }
            }
        }
        if matched == VerCmp::Match || stop {
            stopped = true;
            break;
        }
    }
    if !stopped {
        if n1.len() > common && matches!(cmp, Select::Gt | Select::Ge) {
            matched = VerCmp::Match;
        }
        if n2.len() > common && matches!(cmp, Select::Lt | Select::Le) {
            matched = VerCmp::Match;
        }
    }
    matched
}

/// A version's alphanumeric parts (at most 29 characters each, as
/// cf-agent reads them) and the separators between them.
fn parse_version(v: &str) -> (Vec<String>, Vec<String>) {
    let (mut nums, mut seps) = (Vec::new(), Vec::new());
    let chars: Vec<char> = v.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let start = i;
        while i < chars.len() && chars[i].is_ascii_alphanumeric() && i - start < 29 {
            i += 1;
        }
        nums.push(chars[start..i].iter().collect());
        if i >= chars.len() {
            break;
        }
        if !chars[i].is_ascii_alphanumeric() {
            seps.push(chars[i].to_string());
        } else {
            seps.push(String::new());
        }
        i += 1;
    }
    (nums, seps)
}

/// What the schedule's commands came to for one promise.
pub struct Reported {
    pub promise: ExpandedPromise,
    pub outcomes: Vec<Outcome>,
}

/// cf-agent's ExecuteScheduledPackages: the operations the bundle's
/// package promises scheduled, deletions first; then the lists of the
/// pass are forgotten. `dry_run`: nothing is run.
pub fn execute_schedule(
    host: &Host,
    workdir: &std::path::Path,
    lists: &mut LegacyLists,
    dry_run: bool,
) -> Vec<Reported> {
    let schedule = lists.take_schedule();
    lists.forget_installed();
    if schedule.is_empty() {
        return Vec::new();
    }
    let mut reported = Vec::new();
    for action in [
        Action::Delete,
        Action::Add,
        Action::Update,
        Action::Patch,
        Action::Verify,
    ] {
        for pm in schedule.iter().filter(|pm| pm.action == action) {
            execute_one(host, pm, dry_run, &mut reported);
        }
    }
    // cf-agent marks the inventory out of date after any schedule (its
    // run of the deletions does it even when there are none), under a dry
    // run too.
    legacy::invalidate_inventory(workdir);
    reported
}

fn execute_one(host: &Host, pm: &Scheduled, dry_run: bool, reported: &mut Vec<Reported>) {
    let Some(first) = pm.items.first() else {
        return;
    };
    let b = &first.body;
    let pp = &first.promise;
    let short: String = pp.promiser.chars().take(39).collect();
    match pm.action {
        Action::Add => crate::info!("Installing {short}..."),
        Action::Delete => crate::info!("Deleting {short}..."),
        Action::Update => crate::info!("Updating {short}..."),
        _ => {}
    }
    let verify = pm.action == Action::Verify;
    let mut report = |promise: &ExpandedPromise, outcomes: Vec<Outcome>| {
        if !outcomes.is_empty() {
            reported.push(Reported {
                promise: promise.clone(),
                outcomes,
            });
        }
    };
    if let Some(command) = pm.command.strip_suffix('$') {
        crate::debug!("Command does not allow arguments");
        let (ok, outcomes) = exec_package_command(host, command, verify, b, pp, dry_run);
        if ok {
            crate::debug!("Package schedule execution ok (outcome cannot be promised by cf-agent)");
        } else {
            crate::error!("Package schedule execution failed");
        }
        report(pp, outcomes);
        return;
    }
    let prefix = format!("{} ", pm.command);
    let repos = matches!(pm.action, Action::Add | Action::Update);
    // cf-agent's patch schedule passes names as they are, and runs each
    // for the first promise.
    let patch = pm.action == Action::Patch;
    let word = |item: &Item| -> Option<String> {
        if patch {
            Some(item.name.clone())
        } else if repos && !item.body.file_repositories.is_empty() {
            prefix_local_repository(&item.body.file_repositories, &item.name)
        } else if item.body.useshell {
            Some(format!("'{}'", item.name.replace('\'', "\\'")))
        } else {
            Some(item.name.clone())
        }
    };
    if pm.changes == ChangesPolicy::Unset {
        crate::debug!(
            "No package_changes: the scheduled command is not run, as cf-agent runs it not"
        );
        return;
    }
    if pm.changes == ChangesPolicy::Individual {
        for item in &pm.items {
            let Some(w) = word(item) else { continue };
            let line = format!("{prefix}{w}");
            let owner = if patch { first } else { item };
            let (ok, outcomes) =
                exec_package_command(host, &line, verify, &owner.body, &owner.promise, dry_run);
            if ok {
                crate::debug!(
                    "Package schedule execution ok for '{}' (outcome cannot be promised by cf-agent)",
                    item.name
                );
            } else {
                crate::error!("Package schedule execution failed for '{}'", item.name);
            }
            report(&owner.promise, outcomes);
        }
        return;
    }
    let mut line = prefix;
    for item in &pm.items {
        let Some(w) = word(item) else { break };
        line.push_str(&w);
        line.push(' ');
    }
    let (ok, outcomes) = exec_package_command(host, &line, verify, b, pp, dry_run);
    for item in &pm.items {
        if ok {
            crate::debug!(
                "Bulk package schedule execution ok for '{}' (outcome cannot be promised by cf-agent)",
                item.name
            );
        } else {
            crate::error!(
                "Bulk package schedule execution failed somewhere - unknown outcome for '{}'",
                item.name
            );
        }
    }
    report(pp, outcomes);
}

/// The command line from its program's file name on (cf-agent's label of
/// a package command's output).
fn short_name(command: &str) -> &str {
    let first_end = command.find(' ').unwrap_or(command.len());
    let from = command[..first_end].rfind('/').map_or(0, |i| i + 1);
    &command[from..]
}

/// Runs a package command and quotes what it printed, a line at a time,
/// as cf-agent does.
pub fn run_quoted(
    host: &Host,
    command: &str,
    shell: bool,
) -> std::io::Result<crate::host::exec::CommandResult> {
    if shell {
        crate::debug!("Running {command} in shell");
    }
    let r = run_command(host, command, shell, OutputSelect::Both)?;
    crate::debug!(
        "Executing {}...",
        command.chars().take(60).collect::<String>()
    );
    let cmd: String = short_name(command).chars().take(20).collect();
    for line in r.output_text().lines() {
        crate::info!("Q:{cmd:>20} ...:{line}");
    }
    Ok(r)
}

/// cf-agent's ExecPackageCommand: runs a scheduled command, quotes its
/// output and judges it (by `package_noverify_*` when verifying, else by
/// its exit code and the classes body's return codes).
fn exec_package_command(
    host: &Host,
    command: &str,
    verify: bool,
    b: &MethodBody,
    pp: &ExpandedPromise,
    dry_run: bool,
) -> (bool, Vec<Outcome>) {
    let at = pp.located();
    let at_verbose = pp.located_when_verbose();
    if !b.useshell && !executable(command) {
        crate::error!("The proposed package schedule command '{command}' was not executable {at}");
        return (false, vec![Outcome::Failed]);
    }
    if dry_run {
        return (true, Vec::new());
    }
    let r = match run_quoted(host, command, b.useshell) {
        Ok(r) => r,
        Err(e) => {
            let short: String = command.chars().take(20).collect();
            crate::error!("Couldn't start command '{short}'. (cf_popen: {e}) {at}");
            return (false, vec![Outcome::Failed]);
        }
    };
    let mut ok = true;
    let mut outcomes = Vec::new();
    let noverify = b.noverify_regex.as_deref().and_then(|p| Regex::new(p).ok());
    if verify && let Some(re) = &noverify {
        let tail = short_name(command);
        let c40: String = tail.chars().take(40).collect();
        for line in r.output_text().lines() {
            if !line.is_empty() && re.is_full_match(line) {
                crate::info!("Package verification error in {c40} ... :{line}");
                outcomes.push(Outcome::Failed);
                ok = false;
            }
        }
    }
    let code = r.code.unwrap_or(-1);
    if verify && let Some(expected) = b.noverify_returncode {
        if i64::from(code) == expected {
            crate::info!("Package verification error (returned {code})");
            outcomes.push(Outcome::Failed);
            ok = false;
        } else {
            crate::info!("Package verification succeeded (returned {code})");
            outcomes.push(Outcome::Kept);
        }
    } else if verify && b.noverify_regex.is_some() {
        if ok {
            crate::info!("Package verification succeeded (no match with package_noverify_regex)");
            outcomes.push(Outcome::Kept);
        }
    } else {
        let judged =
            super::super::commands::judge(pp.body("classes"), code, &pp.promiser, &at_verbose);
        if judged.contains(&Outcome::Failed) {
            ok = false;
        }
        outcomes.extend(judged);
    }
    (ok, outcomes)
}

/// The installed list and the wishes of an old package promise, then its
/// verdict (cf-agent's HandleOldPackagePromiseType after its lock).
pub fn evaluate(
    host: &Host,
    workdir: &std::path::Path,
    now: i64,
    d: &mut Decide<'_>,
    w: &Wish<'_>,
) -> Outcome {
    let at = w.promise.located();
    if !sane(w, &at) {
        crate::debug!("Package promise {} failed sanity check", w.promise.promiser);
        return Outcome::Failed;
    }
    let Some(arch) = default_arch(host, w.body.default_arch_command.as_deref()) else {
        crate::error!("Unable to obtain default architecture for package manager - aborting {at}");
        return Outcome::Failed;
    };
    crate::debug!(
        "Default package architecture for promise {} is '{arch}'",
        w.promise.promiser
    );
    let dry_run = matches!(
        d.changes.mode(),
        crate::report::change::Mode::DryRun | crate::report::change::Mode::DryRunWarnOnly
    );
    let listed = legacy::list_method(
        host, workdir, now, d.lists, &w.body, &arch, dry_run, d.regex,
    );
    if !listed {
        crate::error!("Unable to obtain a list of installed packages - aborting {at}");
        return Outcome::Failed;
    }
    if w.action == Action::Patch {
        d.verify_patch(w)
    } else {
        d.verify_package(w)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_as_cf_agent_does() {
        assert_eq!(compare_internal("1.0", "1.0", Select::Eq), VerCmp::Match);
        assert_eq!(compare_internal("1.0", "1.1", Select::Eq), VerCmp::NoMatch);
        assert_eq!(compare_internal("1.0", "1.1", Select::Lt), VerCmp::Match);
        assert_eq!(compare_internal("1.1", "1.0", Select::Lt), VerCmp::NoMatch);
        assert_eq!(compare_internal("1.1", "1.0", Select::Gt), VerCmp::Match);
        assert_eq!(compare_internal("1.0", "1.0.1", Select::Lt), VerCmp::Match);
        assert_eq!(compare_internal("1.0.1", "1.0", Select::Ge), VerCmp::Match);
        // Parts compare as text, as cf-agent's do.
        assert_eq!(compare_internal("1.10", "1.9", Select::Lt), VerCmp::Match);
        // Separators must agree.
        assert_eq!(compare_internal("1.0", "1-0", Select::Eq), VerCmp::Error);
        assert_eq!(compare_internal("2.0", "", Select::Ge), VerCmp::Match);
    }

    #[test]
    fn conventions_expand() {
        assert_eq!(
            expand_convention(
                "$(name)-${version}.$(arch)",
                &[("name", "a"), ("version", "1"), ("arch", "x")]
            ),
            "a-1.x"
        );
    }
}
