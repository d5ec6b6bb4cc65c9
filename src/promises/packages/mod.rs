//! `packages`: software present or absent, through package modules, as
//! cf-agent 3.21's package promise does it (`policy`, `version` with
//! `latest`, `architecture`, `options`, `package_module`). What a module
//! says is installed decides, never its exit code: after a change the
//! installed list is asked for again and must show the promise kept.
//!
//! The old promise of `package_method` bodies is [`method`]; its lists are
//! [`legacy`].

pub mod cache;
pub mod legacy;
pub mod method;
pub mod module;

pub use cache::Session;

use super::{ActContext, Actuator};

use crate::eval::expanded::ExpandedPromise;

use crate::report::Outcome;
use crate::values::Value;
use cache::{Env, ListKind};
use module::{
    Module, ModuleBody, PackageInfo, PackageType, log_reply_errors, options_text,
    parse_package_data, triplet,
};

pub struct Packages;

/// Attributes of the new package promise (cf-agent's `NewPackages`).
const NEW_ATTRIBUTES: &[&str] = &["policy", "version", "architecture", "options"];

/// Attributes of the old, `package_method` promise.
const OLD_ATTRIBUTES: &[&str] = &[
    "package_policy",
    "package_method",
    "package_version",
    "package_architectures",
    "package_select",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Policy {
    Present,
    Absent,
}

/// What a promise asks for.
struct Wanted<'p> {
    promiser: &'p str,
    version: Option<&'p str>,
    arch: Option<&'p str>,
    /// The promise's `options`, else the module body's `default_options`.
    options: Vec<String>,
}

impl Actuator for Packages {
    fn evaluate(&self, act: &mut ActContext<'_>, p: &ExpandedPromise) -> Outcome {
        let at = p.located();
        let has = |a: &str| match p.attrs.get(a) {
            Some(crate::eval::expanded::AttrValue::Value(Value::List(l))) => !l.is_empty(),
            Some(_) => true,
            None => false,
        };
        let new = NEW_ATTRIBUTES.iter().any(|a| has(a));
        let old = OLD_ATTRIBUTES.iter().any(|a| has(a));
        if new && old {
            crate::error!(
                "Mixed old and new package promise attributes inside one package promise. {at}"
            );
            return Outcome::Failed;
        }
        if !new {
            // Without a package_method, the policy's `generic` body if it
            // has one (cf-agent's default).
            let body = match p.body("package_method") {
                Some(b) => Some(b.clone()),
                None if old => act.ctx.named_body(act.policy, "package_method", "generic"),
                None => None,
            };
            if let Some(body) = body {
                return old_promise(act, p, &body);
            }
            if old {
                crate::error!("v1 package promise (package_method) failed sanity check. {at}");
            } else {
                crate::error!(
                    "Package promise '{}' has no policy (\"present\" or \"absent\")",
                    p.promiser
                );
                crate::error!("Old package promise failed sanity check. {at}");
            }
            return Outcome::Failed;
        }
        let policy = match p.scalar("policy") {
            Some("present") => Policy::Present,
            Some("absent") => Policy::Absent,
            _ => {
                // cf-agent's words say nothing of the cause; ours first.
                crate::error!(
                    "Package promise '{}' has no policy (\"present\" or \"absent\")",
                    p.promiser
                );
                crate::error!("New package promise failed sanity check. {at}");
                return Outcome::Failed;
            }
        };
        let body = match p.body("package_module") {
            Some(b) => Some(ModuleBody::from_body(b)),
            None => default_module(act),
        };
        let Some(body) = body else {
            crate::error!("Can not find package module body in policy.");
            crate::error!("New package promise failed sanity check. {at}");
            return Outcome::Failed;
        };
        if body.installed_ifelapsed == module::CF_NOINT
            || body.updates_ifelapsed == module::CF_NOINT
        {
            crate::error!(
                "Invalid or missing arguments in package_module body '{}':  query_installed_ifelapsed = {} query_updates_ifelapsed = {}",
                body.name,
                body.installed_ifelapsed,
                body.updates_ifelapsed
            );
            crate::error!("New package promise failed sanity check. {at}");
            return Outcome::Failed;
        }
        let Some(mut env) = env_of(act) else {
            crate::error!("The work directory (sys.workdir) is not known {at}");
            return Outcome::Failed;
        };
        let m = match Module::open(env.host, &body, &env.workdir) {
            Ok(m) => m,
            Err(e) => {
                crate::error!("{e}");
                crate::error!(
                    "Some error occurred while contacting package module for promise '{}' {at}",
                    p.promiser
                );
                return Outcome::Failed;
            }
        };
        let options = match p.value("options") {
            Some(Value::List(l)) if !l.is_empty() => l.clone(),
            Some(Value::Scalar(s)) => vec![s.clone()],
            _ => body.default_options.clone(),
        };
        let wanted = Wanted {
            promiser: &p.promiser,
            version: p.scalar("version"),
            arch: p.scalar("architecture"),
            options,
        };
        // cf-agent's words for how the promise ended.
        let (outcome, failed, done, kept, needs) = match policy {
            Policy::Present => (
                present(&mut env, &m, &body, &wanted),
                "Error installing",
                "Successfully installed",
                "already installed",
                "needs to be installed",
            ),
            Policy::Absent => (
                absent(&mut env, &m, &body, &wanted),
                "Error removing",
                "Successfully removed",
                "was not installed",
                "needs to be removed",
            ),
        };
        let name = &p.promiser;
        match outcome {
            Outcome::Failed => crate::error!("{failed} package '{name}' {at}"),
            Outcome::Repaired => crate::info!("{done} package '{name}'"),
            Outcome::Kept => crate::debug!("Package '{name}' {kept}"),
            _ => crate::debug!("Package '{name}' {needs}, but only warning was promised"),
        }
        outcome
    }
}

/// CFEngine's old package promise, with its `package_method` body.
fn old_promise(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    body: &crate::eval::bodies::ResolvedBody,
) -> Outcome {
    let at = p.located();
    let Some(workdir) = act
        .ctx
        .lookup("sys.workdir")
        .and_then(|v| v.as_scalar().map(std::path::PathBuf::from))
    else {
        crate::error!("The work directory (sys.workdir) is not known {at}");
        return Outcome::Failed;
    };
    for reserved in ["name", "version", "arch", "firstrepo"] {
        if act.ctx.lookup(&format!("this.{reserved}")).is_some() {
            crate::warn!(
                "$({reserved}) variable has a special meaning in packages promises. Things may not work as expected if it is already defined."
            );
        }
    }
    // A policy cf-agent does not know is its default, add.
    let action = method::Action::parse(p.scalar("package_policy")).unwrap_or(method::Action::Add);
    let Some(select) = method::Select::parse(p.scalar("package_select")) else {
        crate::error!(
            "package_select '{}' is not one of ==, !=, <, >, <=, >= {at}",
            p.scalar("package_select").unwrap_or_default()
        );
        return Outcome::Failed;
    };
    let architectures = match p.value("package_architectures") {
        Some(Value::List(l)) => l.clone(),
        Some(Value::Scalar(s)) => vec![s.clone()],
        _ => Vec::new(),
    };
    let wish = method::Wish {
        promise: p,
        body: method::MethodBody::from_body(body),
        action,
        select,
        version: p.scalar("package_version").map(str::to_string),
        architectures,
    };
    let (host, now) = (act.host, act.now);
    let ctx = &mut act.ctx;
    let mut regex = |r: &str| ctx.regex(r).ok();
    let mut decide = method::Decide {
        host,
        changes: &mut act.changes,
        lists: &mut act.packages.legacy,
        regex: &mut regex,
        unreported: 0,
        reported: Vec::new(),
    };
    let outcome = method::evaluate(host, &workdir, now, &mut decide, &wish);
    if decide.unreported > 0 {
        // Only what cf-agent reported sets classes; a scheduled operation
        // sets them when its command has run.
        act.reported_outcomes = Some(std::mem::take(&mut decide.reported));
    }
    outcome
}

/// The package module of body common control's `package_module`, if the
/// policy names one and defines its body.
fn default_module(act: &mut ActContext<'_>) -> Option<ModuleBody> {
    let name = act
        .ctx
        .common_control("package_module")?
        .as_scalar()?
        .to_string();
    named_module(act, &name)
}

fn named_module(act: &mut ActContext<'_>, name: &str) -> Option<ModuleBody> {
    act.ctx
        .named_body(act.policy, "package_module", name)
        .map(|b| ModuleBody::from_body(&b))
}

/// The package promises' view of the run.
fn env_of<'s>(act: &'s mut ActContext<'_>) -> Option<Env<'s>> {
    let workdir = act.ctx.lookup("sys.workdir")?.as_scalar()?.into();
    Some(Env {
        host: act.host,
        workdir,
        changes: &mut act.changes,
        record_locks: act.record_locks,
        no_lock: act.no_lock,
        state: act.state.as_deref_mut(),
        now: act.now,
        session: act.packages,
    })
}

/// `get-package-data`: what the promiser is (a file or a repository
/// package) and its name.
fn package_data(env: &mut Env<'_>, m: &Module, w: &Wanted<'_>) -> Option<PackageInfo> {
    let request = options_text(&w.options) + &triplet("File", w.promiser, w.version, w.arch);
    match m.call(env.host, "get-package-data", &request) {
        Ok(lines) => parse_package_data(&lines),
        Err(_) => {
            crate::info!(
                "Some error occurred while communicating with package module while collecting package data."
            );
            None
        }
    }
}

/// A package file must be what the promise says (cf-agent's
/// CheckPolicyAndPackageInfoMatch).
fn file_matches(w: &Wanted<'_>, info: &PackageInfo) -> bool {
    if w.version == Some("latest") {
        crate::warn!("Unsupported 'latest' version for package promise of type file.");
        return false;
    }
    if let (Some(a), Some(wa)) = (&info.arch, w.arch)
        && a != wa
    {
        crate::warn!("Package arch and one specified in policy doesn't match: {a} -> {wa}");
        return false;
    }
    if let (Some(v), Some(wv)) = (&info.version, w.version)
        && v != wv
    {
        crate::warn!("Package version and one specified in policy doesn't match: {v} -> {wv}");
        return false;
    }
    true
}

fn present(env: &mut Env<'_>, m: &Module, body: &ModuleBody, w: &Wanted<'_>) -> Outcome {
    let Some(mut info) = package_data(env, m, w) else {
        crate::info!("Can not obtain package data for promise: {}", w.promiser);
        return Outcome::Failed;
    };
    match info.kind {
        PackageType::File => {
            if !file_matches(w, &info) {
                crate::error!("Package data and policy doesn't match");
                return Outcome::Failed;
            }
        }
        PackageType::Repo => {
            // Only the name counts for a repository package; the version
            // and architecture are the promise's.
            if info.arch.take().is_some() {
                crate::debug!(
                    "Unexpected package architecture received from package module. Ignoring."
                );
            }
            if info.version.take().is_some() {
                crate::debug!("Unexpected package version received from package module. Ignoring.");
            }
        }
    }
    if info.arch.is_none() {
        info.arch = w.arch.map(str::to_string);
    }
    if info.version.is_none() {
        info.version = w.version.map(str::to_string);
    }
    let in_cache = env.installed(
        m,
        Some(body),
        &info.name,
        info.version.as_deref(),
        info.arch.as_deref(),
    );
    match info.kind {
        PackageType::File => {
            if in_cache {
                crate::debug!("Package exists in cache. Skipping installation.");
                return Outcome::Kept;
            }
            if !env.making_changes(&format!("install file type package: {}", w.promiser)) {
                return Outcome::Warned;
            }
            let o = install(
                env,
                m,
                w,
                PackageType::File,
                &triplet("File", w.promiser, None, None),
            );
            if o == Outcome::Repaired {
                return validate(env, m, w, &info, Policy::Present);
            }
            o
        }
        PackageType::Repo => repo_install(env, m, body, w, &info, in_cache),
    }
}

/// cf-agent's RepoInstall and RepoInstallPackage.
fn repo_install(
    env: &mut Env<'_>,
    m: &Module,
    body: &ModuleBody,
    w: &Wanted<'_>,
    info: &PackageInfo,
    in_cache: bool,
) -> Outcome {
    let latest = info.version.as_deref() == Some("latest");
    if !in_cache {
        // cf-agent looks at the updates first, though it then installs
        // whatever the module chooses.
        if !env.refresh(m, body, ListKind::Updates, false) {
            crate::info!("Can not update packages cache.");
        }
        if !env.making_changes(&format!("install repo type package: {}", info.name)) {
            return Outcome::Warned;
        }
        let version = info.version.as_deref().filter(|_| !latest);
        let request = triplet("Name", &info.name, version, info.arch.as_deref());
        let o = install(env, m, w, PackageType::Repo, &request);
        if o == Outcome::Repaired {
            return validate(env, m, w, info, Policy::Present);
        }
        return o;
    }
    if !latest {
        crate::debug!("Package '{}' already installed", info.name);
        return Outcome::Kept;
    }
    let Some(updates) = env.updates_of(m, body, &info.name) else {
        crate::debug!(
            "Package '{}' is already in the latest version. Skipping installation.",
            info.name
        );
        return Outcome::Kept;
    };
    let mut result = Outcome::Kept;
    let mut request = String::new();
    let mut to_verify: Vec<PackageInfo> = Vec::new();
    for (version, arch) in updates {
        // Only updates of the promised architecture, when it names one.
        if info.arch.as_deref().is_some_and(|a| a != arch) {
            continue;
        }
        if env.installed(m, Some(body), &info.name, Some(&version), Some(&arch)) {
            crate::debug!(
                "Package version from updates matches one installed. Skipping package installation."
            );
            continue;
        }
        if !env.making_changes(&format!("install repo type package: {}", info.name)) {
            result = result.worst(Outcome::Warned);
            continue;
        }
        // All updates go to the module at once, so that packages of
        // several architectures are installed together.
        request.push_str(&triplet("Name", &info.name, Some(&version), Some(&arch)));
        to_verify.push(PackageInfo {
            kind: PackageType::Repo,
            name: info.name.clone(),
            version: Some(version),
            arch: Some(arch),
        });
    }
    if request.is_empty() {
        return result;
    }
    let mut result = install(env, m, w, PackageType::Repo, &request);
    for v in &to_verify {
        result = result.worst(validate(env, m, w, v, Policy::Present));
    }
    result
}

/// `file-install` or `repo-install` of a request's packages.
fn install(
    env: &mut Env<'_>,
    m: &Module,
    w: &Wanted<'_>,
    kind: PackageType,
    packages: &str,
) -> Outcome {
    let command = match kind {
        PackageType::File => "file-install",
        PackageType::Repo => "repo-install",
    };
    let request = options_text(&w.options) + packages;
    match m.call(env.host, command, &request) {
        Err(_) => {
            crate::info!(
                "Some error occurred while communicating with package module while installing package."
            );
            Outcome::Failed
        }
        // The reply must be empty: anything said is an error.
        Ok(lines) if !lines.is_empty() => {
            log_reply_errors(&lines);
            Outcome::Failed
        }
        Ok(_) => Outcome::Repaired,
    }
}

fn absent(env: &mut Env<'_>, m: &Module, body: &ModuleBody, w: &Wanted<'_>) -> Outcome {
    if w.version == Some("latest") {
        crate::error!("Package version 'latest' not supported forabsent package promise");
        return Outcome::Failed;
    }
    if !env.installed(m, Some(body), w.promiser, w.version, w.arch) {
        crate::trace!("Package '{}' not installed. Skipping removing.", w.promiser);
        return Outcome::Kept;
    }
    if !env.making_changes(&format!("remove package '{}'", w.promiser)) {
        return Outcome::Warned;
    }
    let request = options_text(&w.options) + &triplet("Name", w.promiser, w.version, w.arch);
    let o = match m.call(env.host, "remove", &request) {
        Err(_) => {
            crate::info!("Error communicating package module while removing package.");
            Outcome::Failed
        }
        Ok(lines) if !lines.is_empty() => {
            log_reply_errors(&lines);
            Outcome::Failed
        }
        Ok(_) => Outcome::Repaired,
    };
    if o != Outcome::Repaired {
        return o;
    }
    let info = PackageInfo {
        kind: PackageType::Repo,
        name: w.promiser.to_string(),
        version: w.version.map(str::to_string),
        arch: w.arch.map(str::to_string),
    };
    validate(env, m, w, &info, Policy::Absent)
}

/// cf-agent's ValidateChangedPackage: after a change, the lists are asked
/// for again and must show the package as promised.
fn validate(
    env: &mut Env<'_>,
    m: &Module,
    w: &Wanted<'_>,
    info: &PackageInfo,
    policy: Policy,
) -> Outcome {
    if !env.update(m, &w.options, ListKind::Installed) {
        crate::info!("Can not update installed packages cache after package installation");
        return Outcome::Failed;
    }
    if !env.update(m, &w.options, ListKind::LocalUpdates) {
        crate::info!("Can not update available updates cache after package installation");
        return Outcome::Failed;
    }
    let there = env.installed(
        m,
        None,
        &info.name,
        info.version.as_deref(),
        info.arch.as_deref(),
    );
    match (policy, there) {
        (Policy::Present, true) | (Policy::Absent, false) => Outcome::Repaired,
        _ => Outcome::Failed,
    }
}

/// At the end of a run, as cf-agent: the caches of the modules that body
/// common control's `package_inventory` names are refreshed (when their
/// locks allow), so that `packagesmatching` and `packageupdatesmatching`
/// see the machine as it is.
pub fn update_inventory(act: &mut ActContext<'_>) {
    let modules: Vec<String> = match act.ctx.common_control("package_inventory") {
        Some(Value::List(l)) => l.clone(),
        Some(Value::Scalar(s)) => vec![s.clone()],
        _ => return,
    };
    for name in modules {
        let Some(body) = named_module(act, &name) else {
            crate::error!("Can not find body for package module: {name}");
            continue;
        };
        let Some(mut env) = env_of(act) else {
            return;
        };
        let m = match Module::open(env.host, &body, &env.workdir) {
            Ok(m) => m,
            Err(e) => {
                crate::error!("{e}");
                crate::error!("Can not set up wrapper for module: {name}");
                continue;
            }
        };
        env.refresh(&m, &body, ListKind::Installed, false);
        env.refresh(&m, &body, ListKind::LocalUpdates, false);
    }
}
