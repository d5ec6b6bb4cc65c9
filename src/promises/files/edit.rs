//! `edit_line`: the file is read once into lines, the edit bundle's
//! promises change the lines in memory (each promise type in edit-line
//! normal order, up to three passes), and the file is written once,
//! atomically, only if the lines changed.

use super::super::{ActContext, AttrValue, ExpandedPromise, ResolvedBody};
use super::Verdict;
use crate::eval::agent::expand_attributes;
use crate::eval::context::Frame;
use crate::eval::regex::Regex;
use crate::eval::rval::iteration_texts;
use crate::eval::value::{DataType, Origin, Value};
use crate::eval::vars::Variable;
use crate::syntax::ast::{Bundle, Promise};
use std::path::Path;
use std::sync::Arc;

/// Edit bundles' promise types in the order they run.
pub const EDIT_ORDER: &[&str] = &[
    "meta",
    "vars",
    "defaults",
    "classes",
    "delete_lines",
    "field_edits",
    "insert_lines",
    "replace_patterns",
    "reports",
];

/// cf-agent refuses to edit files larger than this unless told otherwise
/// (`edit_defaults`' `max_file_size`, else agent control's `editfilesize`;
/// 0 for no limit).
pub const DEFAULT_MAX_FILE_SIZE: u64 = 100_000;

/// The lines of a file being edited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lines {
    pub lines: Vec<String>,
    /// Whether the file ended with a newline (kept as it was).
    pub trailing_newline: bool,
}

impl Lines {
    pub fn parse(text: &str) -> Lines {
        if text.is_empty() {
            return Lines {
                lines: Vec::new(),
                trailing_newline: true,
            };
        }
        let trailing_newline = text.ends_with('\n');
        let body = text.strip_suffix('\n').unwrap_or(text);
        Lines {
            lines: body.split('\n').map(str::to_string).collect(),
            trailing_newline,
        }
    }

    pub fn render(&self) -> String {
        if self.lines.is_empty() {
            return String::new();
        }
        let mut s = self.lines.join("\n");
        // A file we add lines to ends with a newline, as cf-agent writes it.
        s.push('\n');
        s
    }
}

/// Edits the file a files promise names, with its edit_line bundle.
pub(crate) fn edit_file(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    v: &mut Verdict,
) {
    let defaults = p.body("edit_defaults");
    let max = defaults
        .and_then(|d| d.scalar("max_file_size"))
        .and_then(|m| crate::eval::promises::parse_int(m).ok())
        .map(|m| m.max(0) as u64)
        .or(act.ctx.agent_control.editfilesize)
        .unwrap_or(DEFAULT_MAX_FILE_SIZE);
    let meta = match act.host.stat(target) {
        Ok(Some(m)) => m,
        _ => {
            tracing::error!(
                "File '{}' was marked for editing but could not be opened",
                p.promiser
            );
            v.failed();
            return;
        }
    };
    if max > 0 && meta.size > max {
        tracing::error!(
            "File '{}' is {} bytes, larger than the edit limit of {max} bytes (max_file_size in edit_defaults; 0 means no limit); not editing it",
            p.promiser,
            meta.size
        );
        v.failed();
        return;
    }
    let original = match act.host.read(target) {
        Ok(b) => String::from_utf8_lossy(&b).into_owned(),
        Err(e) => {
            tracing::error!("Could not read '{}' for editing: {e}", p.promiser);
            v.failed();
            return;
        }
    };
    let mut lines = Lines::parse(&original);
    if defaults
        .and_then(|d| d.scalar("empty_file_before_editing"))
        .and_then(super::super::parse_bool)
        == Some(true)
    {
        lines.lines.clear();
    }
    if let Some(AttrValue::Bundle { name, args }) = p.attrs.get("edit_line") {
        let ns = p.namespace.clone();
        let Some((file, bundle)) = act.policy.bundle(&ns, name) else {
            tracing::error!(
                "edit_line bundle '{name}' of files promise '{}' is not defined",
                p.promiser
            );
            v.failed();
            return;
        };
        let (file, bundle) = (file.clone(), bundle.clone());
        if bundle.params.len() != args.len() {
            tracing::error!(
                "edit_line bundle '{name}' takes {} arguments, files promise '{}' gives {}",
                bundle.params.len(),
                p.promiser,
                args.len()
            );
            v.failed();
            return;
        }
        let mut editor = Editor {
            lines: &mut lines,
            filename: p.promiser.clone(),
            changed_any: false,
            failed: false,
            warned: false,
            done: Default::default(),
        };
        editor.run_bundle(act, &file, &bundle, args);
        if editor.failed {
            v.failed();
        }
        if editor.warned {
            v.warned();
        }
    }
    let new_text = lines.render();
    if new_text == original {
        return;
    }
    super::show_diff(act, target, original.as_bytes(), new_text.as_bytes());
    if act.dry_run {
        v.warned();
        return;
    }
    let backup = defaults
        .and_then(|d| d.scalar("edit_backup"))
        .unwrap_or("true");
    if backup != "false" {
        let b = backup_path(target, backup);
        if let Err(e) = act.host.copy_atomic(target, &b, meta.mode) {
            tracing::error!(
                "Could not back up '{}' to '{}': {e}",
                p.promiser,
                b.display()
            );
            v.failed();
            return;
        }
    }
    match act
        .host
        .write_atomic(target, new_text.as_bytes(), meta.mode)
    {
        Ok(()) => {
            tracing::info!("Edited file '{}'", p.promiser);
            v.repaired();
        }
        Err(e) => {
            tracing::error!("Could not write the edited '{}': {e}", p.promiser);
            v.failed();
        }
    }
}

/// Where the copy made before editing goes: `file.cf-before-edit`, or
/// with a time stamp when asked.
fn backup_path(target: &Path, policy: &str) -> std::path::PathBuf {
    let mut name = target.as_os_str().to_os_string();
    if policy == "timestamp" {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0);
        name.push(format!("_{now}"));
    }
    name.push(".cf-before-edit");
    name.into()
}

struct Editor<'l> {
    lines: &'l mut Lines,
    filename: String,
    changed_any: bool,
    failed: bool,
    warned: bool,
    /// The edit promises already verified in this edit of the file: as
    /// in cf-agent, each acts once per run, whatever the later passes see.
    done: std::collections::HashSet<String>,
}

impl Editor<'_> {
    fn run_bundle(
        &mut self,
        act: &mut ActContext<'_>,
        file: &Arc<crate::load::LoadedFile>,
        bundle: &Bundle,
        args: &[Value],
    ) {
        let ctx = &mut *act.ctx;
        for (param, value) in bundle.params.iter().zip(args) {
            let var = Variable::new(value.clone(), value.natural_type(), Origin::Agent)
                .with_tags(vec!["source=promise".into()]);
            ctx.vars
                .put(&bundle.namespace, &bundle.name.name, &param.name, var);
        }
        ctx.vars.put(
            "default",
            "edit",
            "filename",
            Variable::new(
                Value::str(self.filename.clone()),
                DataType::String,
                Origin::Agent,
            ),
        );
        ctx.push_frame(Frame::new(
            &bundle.namespace,
            &bundle.name.name,
            "edit_line",
        ));
        for _pass in 0..crate::eval::agent::MAX_PASSES {
            let before = self.lines.clone();
            for t in EDIT_ORDER {
                for section in bundle.sections.iter().filter(|s| s.promise_type.name == *t) {
                    for promise in &section.promises {
                        self.promise(act, file, bundle, t, promise);
                    }
                }
            }
            if *self.lines == before {
                break;
            }
        }
        act.ctx.pop_frame();
    }

    fn promise(
        &mut self,
        act: &mut ActContext<'_>,
        file: &Arc<crate::load::LoadedFile>,
        bundle: &Bundle,
        ptype: &str,
        promise: &Promise,
    ) {
        match ptype {
            "vars" => {
                act.ctx.eval_vars_promise(file, promise);
                return;
            }
            "classes" => {
                act.ctx.eval_classes_promise(file, promise, false);
                return;
            }
            "meta" | "defaults" | "reports" => return,
            _ => {}
        }
        act.ctx.enter_promise(file, promise);
        let mut texts = vec![promise.promiser.value.as_str()];
        for a in &promise.attributes {
            iteration_texts(&a.value, &mut texts);
        }
        let policy = act.policy;
        let line = file.source.line_of(promise.promiser.span.start);
        let mut work = Vec::new();
        act.ctx.for_each_iteration(&texts, &mut |ctx| {
            if ctx.promise_condition(promise) != Some(true) {
                return;
            }
            let promiser = ctx.expand(&promise.promiser.value);
            if promiser.unresolved {
                return;
            }
            if let Ok(attrs) = expand_attributes(ctx, policy, promise) {
                work.push(ExpandedPromise {
                    promise_type: ptype.to_string(),
                    promiser: promiser.text,
                    attrs,
                    bundle: bundle.name.name.clone(),
                    namespace: bundle.namespace.clone(),
                    file: file.source.path.clone(),
                    line,
                    handle: None,
                });
            }
        });
        for ep in work {
            let key = format!(
                "{ptype}\u{1}{}\u{1}{}",
                ep.promiser,
                crate::eval::agent::attrs_key(&ep.attrs)
            );
            if !self.done.insert(key) {
                continue;
            }
            let Some((start, end)) = self.region(act, &ep) else {
                continue;
            };
            let result = match ptype {
                "insert_lines" => self.insert(act, &ep, start, end),
                "delete_lines" => self.delete(act, &ep, start, end),
                "replace_patterns" => self.replace(act, &ep, start, end),
                "field_edits" => self.field_edit(act, &ep, start, end),
                _ => Ok(false),
            };
            match result {
                Ok(true) => {
                    self.changed_any = true;
                    tracing::info!("{ptype} promise '{}' repaired", ep.promiser);
                }
                Ok(false) => {}
                Err(msg) => {
                    tracing::error!("{msg}");
                    self.failed = true;
                }
            }
        }
    }

    /// The lines a promise may touch, `[start, end)`: the whole file, or
    /// the region its `select_region` body selects (`None` when the region
    /// is not in the file).
    fn region(&mut self, act: &mut ActContext<'_>, ep: &ExpandedPromise) -> Option<(usize, usize)> {
        let n = self.lines.lines.len();
        let Some(body) = ep.body("select_region") else {
            return Some((0, n));
        };
        let start_re = compile(act, body.scalar("select_start")?).ok()?;
        let include_start = flag(body, "include_start_delimiter", false);
        let include_end = flag(body, "include_end_delimiter", false);
        let start_line = self
            .lines
            .lines
            .iter()
            .position(|l| start_re.is_full_match(l))?;
        let from = if include_start {
            start_line
        } else {
            start_line + 1
        };
        let end = match body.scalar("select_end") {
            Some(e) => {
                let end_re = compile(act, e).ok()?;
                match self.lines.lines[start_line + 1..]
                    .iter()
                    .position(|l| end_re.is_full_match(l))
                {
                    Some(i) => {
                        let end_line = start_line + 1 + i;
                        if include_end { end_line + 1 } else { end_line }
                    }
                    None if flag(body, "select_end_match_eof", false) => n,
                    None => return None,
                }
            }
            None => n,
        };
        Some((from.min(end), end))
    }

    fn insert(
        &mut self,
        act: &mut ActContext<'_>,
        ep: &ExpandedPromise,
        start: usize,
        end: usize,
    ) -> Result<bool, String> {
        let policy = ep
            .value("whitespace_policy")
            .map(list_of)
            .unwrap_or_default();
        let same = |a: &str, b: &str| lines_equal(a, b, &policy);
        let new_lines: Vec<String> = match ep.scalar("insert_type").unwrap_or("literal") {
            "preserve_block" | "file_preserve_block" | "preserve_all_lines" => {
                vec![ep.promiser.clone()]
            }
            _ => ep.promiser.split('\n').map(str::to_string).collect(),
        };
        let region = &self.lines.lines[start..end];
        let missing: Vec<String> = new_lines
            .into_iter()
            .filter(|l| !region.iter().any(|r| same(r, l)))
            .collect();
        if missing.is_empty() {
            return Ok(false);
        }
        let mut at = match ep.body("location") {
            None => end,
            Some(loc) => {
                let after = loc.scalar("before_after").unwrap_or("after") != "before";
                match loc.scalar("select_line_matching") {
                    None => {
                        let first = loc.scalar("first_last") == Some("first");
                        match (first, after) {
                            (true, true) => start.min(end).saturating_add(usize::from(end > start)),
                            (true, false) => start,
                            (false, true) => end,
                            (false, false) => end.saturating_sub(1).max(start),
                        }
                    }
                    Some(pattern) => {
                        let re = compile(act, pattern)?;
                        let first = loc.scalar("first_last").unwrap_or("last") == "first";
                        let region = &self.lines.lines[start..end];
                        let found = if first {
                            region.iter().position(|l| re.is_full_match(l))
                        } else {
                            region.iter().rposition(|l| re.is_full_match(l))
                        };
                        let Some(i) = found else {
                            return Err(format!(
                                "Promised to insert '{}' into '{}' relative to a line matching '{pattern}', but there is no such line",
                                ep.promiser, self.filename
                            ));
                        };
                        if after { start + i + 1 } else { start + i }
                    }
                }
            }
        };
        for l in missing {
            if act.dry_run {
                tracing::warn!(
                    "Should insert line '{l}' into '{}' after locator",
                    self.filename
                );
                self.warned = true;
                continue;
            }
            tracing::info!(
                "Inserted the promised line '{l}' into '{}' after locator",
                self.filename
            );
            self.lines.lines.insert(at, l);
            at += 1;
        }
        Ok(!act.dry_run)
    }

    fn delete(
        &mut self,
        act: &mut ActContext<'_>,
        ep: &ExpandedPromise,
        start: usize,
        end: usize,
    ) -> Result<bool, String> {
        let re = compile(act, &ep.promiser)?;
        let not_matching = ep.flag("not_matching").unwrap_or(false);
        let mut i = start;
        let mut end = end;
        let mut changed = false;
        while i < end {
            let matches = re.is_full_match(&self.lines.lines[i]);
            if matches != not_matching {
                if act.dry_run {
                    tracing::warn!(
                        "Should delete line '{}' from '{}'",
                        self.lines.lines[i],
                        self.filename
                    );
                    self.warned = true;
                    i += 1;
                    continue;
                }
                let removed = self.lines.lines.remove(i);
                tracing::info!(
                    "Deleted the promised line {} '{removed}' from {}",
                    i + 1,
                    self.filename
                );
                end -= 1;
                changed = true;
            } else {
                i += 1;
            }
        }
        Ok(changed)
    }

    fn replace(
        &mut self,
        act: &mut ActContext<'_>,
        ep: &ExpandedPromise,
        start: usize,
        end: usize,
    ) -> Result<bool, String> {
        let re = compile(act, &ep.promiser)?;
        let Some(with) = ep.body("replace_with") else {
            return Err(format!(
                "replace_patterns promise '{}' has no replace_with body",
                ep.promiser
            ));
        };
        let template = with.scalar("replace_value").unwrap_or("").to_string();
        let first_only = with.scalar("occurrences") == Some("first");
        let mut changed = false;
        for i in start..end {
            let line = self.lines.lines[i].clone();
            let all = re.captures_all(&line);
            if all.is_empty() {
                continue;
            }
            let mut out = String::with_capacity(line.len());
            let mut last = 0;
            for caps in all.iter().take(if first_only { 1 } else { usize::MAX }) {
                let Some((s, e)) = caps[0] else { continue };
                out.push_str(&line[last..s]);
                out.push_str(&expand_match(act, &template, &line, caps));
                last = e;
            }
            out.push_str(&line[last..]);
            if out == line {
                continue;
            }
            if re.is_match(&out) && !first_only {
                tracing::warn!(
                    "Promised replacement '{}' on line '{line}' of '{}' still matches the pattern '{}' after replacing; the edit does not converge",
                    out,
                    self.filename,
                    ep.promiser
                );
            }
            if act.dry_run {
                tracing::warn!(
                    "Should replace line '{line}' with '{out}' in '{}'",
                    self.filename
                );
                self.warned = true;
                continue;
            }
            tracing::info!("Replaced pattern '{}' in '{}'", ep.promiser, self.filename);
            self.lines.lines[i] = out;
            changed = true;
        }
        Ok(changed)
    }

    fn field_edit(
        &mut self,
        act: &mut ActContext<'_>,
        ep: &ExpandedPromise,
        start: usize,
        end: usize,
    ) -> Result<bool, String> {
        let re = compile(act, &ep.promiser)?;
        let Some(body) = ep.body("edit_field") else {
            return Err(format!(
                "field_edits promise '{}' has no edit_field body",
                ep.promiser
            ));
        };
        let sep_pattern = body.scalar("field_separator").unwrap_or("\\s+").to_string();
        let sep = compile(act, &sep_pattern)?;
        let from_zero = flag(body, "start_fields_from_zero", false);
        let index: usize = body
            .scalar("select_field")
            .and_then(|s| s.parse::<usize>().ok())
            .map(|n| if from_zero { n } else { n.saturating_sub(1) })
            .unwrap_or(0);
        let value = body.scalar("field_value").unwrap_or("").to_string();
        let operation = body.scalar("field_operation").unwrap_or("none").to_string();
        let value_sep = body.scalar("value_separator").unwrap_or(",").to_string();
        let extend = flag(body, "extend_fields", false);
        let mut changed = false;
        for i in start..end {
            let line = self.lines.lines[i].clone();
            if !re.is_full_match(&line) {
                continue;
            }
            // Split on the separator, keeping the separators to rebuild the line.
            let mut fields = Vec::new();
            let mut seps = Vec::new();
            let mut last = 0;
            for (s, e) in sep.find_all(&line) {
                fields.push(line[last..s].to_string());
                seps.push(line[s..e].to_string());
                last = e;
            }
            fields.push(line[last..].to_string());
            if index >= fields.len() {
                if !extend {
                    continue;
                }
                let filler = seps
                    .last()
                    .cloned()
                    .unwrap_or_else(|| literal_separator(&sep_pattern));
                while fields.len() <= index {
                    seps.push(filler.clone());
                    fields.push(String::new());
                }
            }
            let cur = fields[index].clone();
            let mut parts: Vec<String> = if cur.is_empty() {
                Vec::new()
            } else {
                cur.split(&value_sep).map(str::to_string).collect()
            };
            let new = match operation.as_str() {
                "set" | "none" => value.clone(),
                "delete" => {
                    parts.retain(|p| p != &value);
                    parts.join(&value_sep)
                }
                "append" => {
                    if !parts.contains(&value) {
                        parts.push(value.clone());
                    }
                    parts.join(&value_sep)
                }
                "prepend" => {
                    if !parts.contains(&value) {
                        parts.insert(0, value.clone());
                    }
                    parts.join(&value_sep)
                }
                "alphanum" => {
                    if !parts.contains(&value) {
                        parts.push(value.clone());
                    }
                    parts.sort();
                    parts.join(&value_sep)
                }
                other => {
                    return Err(format!(
                        "unknown field_operation '{other}' in edit_field body '{}'",
                        body.name
                    ));
                }
            };
            if new == cur {
                continue;
            }
            fields[index] = new;
            let mut rebuilt = String::new();
            for (k, f) in fields.iter().enumerate() {
                rebuilt.push_str(f);
                if let Some(s) = seps.get(k) {
                    rebuilt.push_str(s);
                }
            }
            if act.dry_run {
                tracing::warn!(
                    "Should edit field {} of line '{line}' in '{}'",
                    index + 1,
                    self.filename
                );
                self.warned = true;
                continue;
            }
            tracing::info!("Edited field inside line '{line}' of '{}'", self.filename);
            self.lines.lines[i] = rebuilt;
            changed = true;
        }
        Ok(changed)
    }
}

/// A separator pattern used literally when fields must be added and the
/// line has no separator to copy (`:` for `:`, a space for `\s+`).
fn literal_separator(pattern: &str) -> String {
    match pattern {
        "\\s+" | "\\s*" | "\\s" | " +" => " ".to_string(),
        p => p.replace('\\', ""),
    }
}

/// `replace_value` with `$(match.N)` bound to this match's groups.
fn expand_match(
    act: &mut ActContext<'_>,
    template: &str,
    line: &str,
    caps: &[Option<(usize, usize)>],
) -> String {
    if !template.contains("$(match.") && !template.contains("${match.") {
        return template.to_string();
    }
    for (n, g) in caps.iter().enumerate() {
        let text = g.map(|(s, e)| line[s..e].to_string()).unwrap_or_default();
        act.ctx.vars.put(
            "default",
            "match",
            &n.to_string(),
            Variable::new(Value::str(text), DataType::String, Origin::Agent),
        );
    }
    act.ctx.expand(template).text
}

fn compile(act: &mut ActContext<'_>, pattern: &str) -> Result<Arc<Regex>, String> {
    act.ctx.regexes.get(pattern).map_err(|e| e.to_string())
}

fn flag(body: &ResolvedBody, name: &str, default: bool) -> bool {
    body.scalar(name)
        .and_then(super::super::parse_bool)
        .unwrap_or(default)
}

fn list_of(v: &Value) -> Vec<String> {
    match v {
        Value::Scalar(s) => vec![s.clone()],
        Value::List(l) => l.clone(),
        Value::Data(_) => Vec::new(),
    }
}

/// Line comparison under a `whitespace_policy`.
fn lines_equal(a: &str, b: &str, policy: &[String]) -> bool {
    if policy.is_empty() || policy.iter().any(|p| p == "exact_match") {
        return a == b;
    }
    let norm = |s: &str| {
        let mut s = s.to_string();
        if policy.iter().any(|p| p == "ignore_leading") {
            s = s.trim_start().to_string();
        }
        if policy.iter().any(|p| p == "ignore_trailing") {
            s = s.trim_end().to_string();
        }
        if policy.iter().any(|p| p == "ignore_embedded") {
            s = s.split_whitespace().collect::<Vec<_>>().join(" ");
        }
        s
    };
    norm(a) == norm(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_round_trip() {
        assert_eq!(Lines::parse("a\nb\n").render(), "a\nb\n");
        assert_eq!(Lines::parse("a\nb").lines, vec!["a", "b"]);
        assert_eq!(Lines::parse("").lines.len(), 0);
        assert!(lines_equal(
            "  a  b ",
            "a b",
            &[
                "ignore_leading".into(),
                "ignore_trailing".into(),
                "ignore_embedded".into()
            ]
        ));
        assert!(!lines_equal(" a", "a", &[]));
    }
}
