//! `body agent control`: the run-wide settings of the agent, resolved once
//! before the bundlesequence runs (class guards and variables are
//! evaluated as in cf-agent, so `any::` / `debian::` sections work).

use super::EvalContext;
use super::Frame;
use crate::load::PolicySet;
use crate::syntax::ast::BodyKind;
use crate::values::Value;

/// The settings of `body agent control` that change what we do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentControl {
    /// `editfilesize`: the largest file edit_line may edit, in bytes
    /// (0: no limit); a promise's `edit_defaults` `max_file_size` wins.
    pub editfilesize: Option<u64>,
    /// `ifelapsed`: the default lock time of every promise, in minutes.
    pub ifelapsed: Option<u64>,
    /// `expireafter`: the default time after which a promise an agent
    /// began and never finished may be taken up again, in minutes.
    pub expireafter: Option<u64>,
    /// `abortclasses`: regexes; when a class matching one is defined the
    /// run stops (cf-agent's "Fatal CFEngine error: cfengine aborted").
    pub abortclasses: Vec<String>,
    /// `abortbundleclasses`: regexes; when a class matching one is
    /// defined the current bundle stops.
    pub abortbundleclasses: Vec<String>,
    /// `files_auto_define`: regexes of copied files that define
    /// `auto_<canonified path>`.
    pub files_auto_define: Vec<String>,
    /// `copyfrom_restrict_keys`: the key digests (`MD5=...`) of the only
    /// servers copies may come from (empty: any trusted server).
    pub copyfrom_restrict_keys: Vec<String>,
    /// `hashupdates`: whether a `changes` body without `update_hashes`
    /// replaces a changed digest in the records (default no).
    pub hashupdates: bool,
    /// `default_repository`: where files promises move the backups they
    /// make, unless a promise names its own `repository`.
    pub default_repository: Option<String>,
    /// `files_single_copy`: regexes of destinations a run copies to at
    /// most once (later copies to them are skipped).
    pub files_single_copy: Vec<String>,
    /// `defaultcopytype`: the `compare` of a `copy_from` body that names
    /// none (else `mtime`).
    pub defaultcopytype: Option<String>,
    /// `checksum_alert_time`: how many minutes `checksum_alerts` stays
    /// defined after a changes body found a change (else 10).
    pub checksum_alert_time: Option<u64>,
    /// `allclassesreport`: the run ends by listing every class defined
    /// then in the state directory's `allclasses.txt`.
    pub allclassesreport: bool,
    /// `suspiciousnames`: names of files (regular files and links) that
    /// depth searches, copies and regex promisers skip, warning.
    pub suspiciousnames: Vec<String>,
    /// `childlibpath`: the `LD_LIBRARY_PATH` of every command run.
    pub childlibpath: Option<String>,
    /// `environment`: `NAME=value` entries cf-agent puts in its own
    /// environment, so every command after sees them (and `getenv`).
    pub environment: Vec<String>,
    /// `agentaccess`: the users who may run the policy (empty: anyone).
    pub agentaccess: Vec<String>,
    /// `dryrun`: the run changes nothing, as with `--dry-run`.
    pub dryrun: bool,
    /// `evaluation_order` (CFEngine 3.27): `top_down` runs each bundle's
    /// promises in the order written; body agent control's wins over body
    /// common control's, and a file's `body file control` over both.
    pub top_down: Option<bool>,
    /// `default_directory_create_mode` (CFEngine 3.27), as written; the
    /// agent reads it into `default_dir_mode`.
    pub default_directory_create_mode: Option<String>,
    /// The mode of the directories the agent makes, when
    /// `default_directory_create_mode` changed cf-agent's 0700.
    pub default_dir_mode: Option<u32>,
    /// `select_end_match_eof`: a `select_region` whose end is not found
    /// runs to the end of the file, unless its own body says otherwise.
    pub select_end_match_eof: bool,
}

impl AgentControl {
    /// Whether newly defined classes must be checked against abort lists.
    pub fn watches_classes(&self) -> bool {
        !self.abortclasses.is_empty() || !self.abortbundleclasses.is_empty()
    }

    /// Reads the default namespace's `body agent control` of the policy.
    pub fn resolve(ctx: &mut EvalContext, policy: &PolicySet) -> AgentControl {
        let common = control_evaluation_order(ctx, policy, "common");
        let mut out = AgentControl {
            top_down: control_evaluation_order(ctx, policy, "agent").or(common),
            ..AgentControl::default()
        };
        let Some((_, body)) = policy
            .body("default", "agent", "control")
            .filter(|(_, b)| b.kind == BodyKind::Body)
        else {
            return out;
        };
        ctx.push_frame(Frame::new(&body.namespace, "control_agent", "agent"));
        for a in &body.attributes {
            let guard = ctx.expand(&a.guard.expr).text;
            if !ctx.eval_class_expr(guard.trim()).unwrap_or(false) {
                continue;
            }
            let Ok(e) = ctx.eval_rval(&a.attr.value) else {
                continue;
            };
            let int = |v: &Value| match v {
                Value::Scalar(s) => crate::values::number::parse_int(s)
                    .ok()
                    .map(|n| n.max(0) as u64),
                _ => None,
            };
            let list = |v: Value| match v {
                Value::Scalar(s) => vec![s],
                Value::List(l) => l,
                Value::Data(_) => Vec::new(),
            };
            match a.attr.name.name.as_str() {
                "editfilesize" => out.editfilesize = int(&e.value),
                "ifelapsed" => out.ifelapsed = int(&e.value),
                "expireafter" => out.expireafter = int(&e.value),
                "checksum_alert_time" => out.checksum_alert_time = int(&e.value),
                "agentaccess" => out.agentaccess = list(e.value),
                "suspiciousnames" => out.suspiciousnames = list(e.value),
                "allclassesreport" => {
                    out.allclassesreport = e
                        .value
                        .as_scalar()
                        .and_then(crate::values::number::parse_bool)
                        .unwrap_or(false)
                }
                "childlibpath" => out.childlibpath = e.value.as_scalar().map(str::to_string),
                "environment" => out.environment = list(e.value),
                "defaultcopytype" => out.defaultcopytype = e.value.as_scalar().map(str::to_string),
                "abortclasses" => out.abortclasses = list(e.value),
                "abortbundleclasses" => out.abortbundleclasses = list(e.value),
                "files_auto_define" => out.files_auto_define = list(e.value),
                "files_single_copy" => out.files_single_copy = list(e.value),
                "default_directory_create_mode" => {
                    out.default_directory_create_mode = e.value.as_scalar().map(str::to_string)
                }
                "default_repository" => {
                    out.default_repository = e.value.as_scalar().map(str::to_string)
                }
                "dryrun" => {
                    out.dryrun = e
                        .value
                        .as_scalar()
                        .and_then(crate::values::number::parse_bool)
                        .unwrap_or(false)
                }
                "copyfrom_restrict_keys" => out.copyfrom_restrict_keys = list(e.value),
                "select_end_match_eof" => {
                    out.select_end_match_eof = e
                        .value
                        .as_scalar()
                        .and_then(crate::values::number::parse_bool)
                        .unwrap_or(false)
                }
                "hashupdates" => {
                    out.hashupdates = e
                        .value
                        .as_scalar()
                        .and_then(crate::values::number::parse_bool)
                        .unwrap_or(false)
                }
                // Classes defined for the whole run, as cf-agent defines
                // them before any bundle.
                "addclasses" => {
                    for class in list(e.value) {
                        let info = crate::eval::classes::ClassInfo::soft(
                            crate::values::value::Origin::Agent,
                            vec!["source=agent".into()],
                        );
                        ctx.define_class(
                            &crate::values::canon::canonify_class(&class),
                            false,
                            info,
                        );
                    }
                }
                // What -I and -v do, from the policy (never lowering them).
                "inform" | "verbose" => {
                    let on = e
                        .value
                        .as_scalar()
                        .and_then(crate::values::number::parse_bool);
                    if on == Some(true) {
                        crate::report::log::raise_level(if a.attr.name.name == "inform" {
                            crate::config::LogLevel::Info
                        } else {
                            crate::config::LogLevel::Verbose
                        });
                    }
                }
                _ => {}
            }
        }
        ctx.pop_frame();
        out
    }
}

/// Whether a control body of the default namespace asks for `top_down`
/// evaluation (`Some(false)`: `classic`; `None`: it does not say).
fn control_evaluation_order(
    ctx: &mut EvalContext,
    policy: &PolicySet,
    component: &str,
) -> Option<bool> {
    let (_, body) = policy
        .body("default", component, "control")
        .filter(|(_, b)| b.kind == BodyKind::Body)?;
    let mut found = None;
    ctx.push_frame(Frame::new(
        &body.namespace,
        &format!("control_{component}"),
        component,
    ));
    for a in body.attributes_named("evaluation_order") {
        let guard = ctx.expand(&a.guard.expr).text;
        if !ctx.eval_class_expr(guard.trim()).unwrap_or(false) {
            continue;
        }
        if let Ok(e) = ctx.eval_rval(&a.attr.value)
            && let Some(v) = e.value.as_scalar()
        {
            found = Some(v == "top_down");
        }
    }
    ctx.pop_frame();
    found
}

/// A file's own `body file control` `evaluation_order` for a bundle
/// written after it (`None`: the file does not say).
pub fn file_evaluation_order(
    tree: &crate::syntax::ast::PolicyFile,
    bundle: &crate::syntax::ast::Bundle,
) -> Option<bool> {
    use crate::syntax::ast::Rval;
    let mut found = None;
    for b in tree.bodies() {
        if b.body_type.name != "file"
            || b.name.name != "control"
            || b.span.start > bundle.span.start
        {
            continue;
        }
        for a in b.attributes_named("evaluation_order") {
            if let Rval::String(s) = &a.attr.value {
                found = Some(s.value == "top_down");
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::PolicySet;

    fn control_of(src: &str) -> AgentControl {
        let mut set = PolicySet::default();
        set.add(crate::load::LoadedFile::from_text("t.cf", src.to_string()));
        let mut ctx = EvalContext::default();
        let hard = crate::eval::classes::ClassInfo {
            hard: true,
            ..crate::eval::classes::ClassInfo::soft(crate::values::Origin::Agent, Vec::new())
        };
        ctx.classes.define("linux", hard);
        AgentControl::resolve(&mut ctx, &set)
    }

    #[test]
    fn reads_guarded_settings() {
        let c = control_of(
            "body agent control {\n  any:: editfilesize => \"0\"; ifelapsed => \"5\";\n  windows:: ifelapsed => \"60\";\n  linux:: abortclasses => { \"stop_.*\" };\n}\n",
        );
        assert_eq!(c.editfilesize, Some(0));
        assert_eq!(c.ifelapsed, Some(5));
        assert_eq!(c.abortclasses, vec!["stop_.*".to_string()]);
    }

    #[test]
    fn no_control_body_means_defaults() {
        assert_eq!(
            control_of("bundle agent main { reports: \"x\"; }\n"),
            AgentControl::default()
        );
    }
}
