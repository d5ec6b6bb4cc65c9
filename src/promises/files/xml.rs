//! `edit_xml`: the file is parsed once into a document, the edit_xml
//! bundle's promises change the document in memory (in cf-agent's order
//! for edit_xml bundles, three passes, each promise acting at most once per
//! run), and the file is written once, atomically, only if its serialised
//! form changed.
//!
//! The document, its parser and XPath 1.0 come from `sxd-document` and
//! `sxd-xpath` (pure Rust; XPath 1.0 is the language libxml2 gives
//! cf-agent's `select_xpath`). `build_xpath` is not XPath evaluation: as in
//! cf-agent, the path is cut into segments (`name[ @attr = value | child =
//! text ]`) and the missing tail is created below the deepest segment that
//! selects a unique node. Trees and text are compared as cf-agent compares
//! them (an element "contains" a tree when a child has its tag, its
//! attributes, its first child's text as a substring and, exactly, its
//! child elements). The saved file is written as libxml2's `xmlSaveFile`
//! writes it: a declaration, each top-level node on its own line, no
//! reformatting.

use super::super::{ActContext, BundleCall};
use super::edit::Res;
use super::{Verdict, bytes};
use crate::eval::expanded::{AttrValue, ExpandedPromise};
use crate::eval::vars::Variable;
use crate::report::Outcome;
use crate::report::change::{Change, Decision};
use crate::values::regex::Regex;
use crate::values::value::{DataType, Origin, Value};
use std::collections::HashSet;
use std::path::Path;
use std::sync::{Arc, LazyLock};
use sxd_document::Package;
use sxd_document::dom::{ChildOfElement, ChildOfRoot, Document, Element};

/// edit_xml bundles' promise types in the order they run.
pub const XML_ORDER: &[&str] = &[
    "vars",
    "classes",
    "build_xpath",
    "delete_tree",
    "insert_tree",
    "delete_attribute",
    "set_attribute",
    "delete_text",
    "set_text",
    "insert_text",
    "reports",
];

/// Edits the file a files promise names with its edit_xml bundle.
pub(crate) fn edit_xml(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    v: &mut Verdict,
) {
    let Some(AttrValue::Bundle { name, args }) = p.attrs.get("edit_xml") else {
        crate::error!(
            "edit_xml of files promise '{}' does not name a bundle",
            p.promiser
        );
        v.failed();
        return;
    };
    let Some((file, bundle)) = act.policy.bundle(&p.namespace, name) else {
        crate::error!(
            "edit_xml bundle '{name}' of files promise '{}' is not defined",
            p.promiser
        );
        v.failed();
        return;
    };
    let (file, bundle) = (file.clone(), Arc::new(bundle.clone()));
    if bundle.params.len() != args.len() {
        crate::error!(
            "edit_xml bundle '{name}' takes {} arguments, files promise '{}' gives {}",
            bundle.params.len(),
            p.promiser,
            args.len()
        );
        v.failed();
        return;
    }
    let Some(meta) = super::edit::stat_editable(act, p, target, v) else {
        return;
    };
    let Some((original, read_stamp)) = super::edit::read_editable(act, p, target, &meta, v) else {
        return;
    };
    let empty_first = p
        .body("edit_defaults")
        .and_then(|d| d.scalar("empty_file_before_editing"))
        .and_then(crate::values::number::parse_bool)
        .unwrap_or(false);
    let text = bytes::decode(&original);
    let on_disk = match load(&text) {
        Ok(pk) => pk,
        Err(e) => {
            crate::error!("Document '{}' not parsed successfully: {e}", p.promiser);
            v.failed();
            return;
        }
    };
    // sxd-document reads past a document type declaration; it is kept
    // as written, as libxml2 keeps it.
    let doctype = doctype_of(&text);
    let encoding = if original.is_empty() {
        None
    } else {
        declared_encoding(&text)
    };
    let working = if empty_first {
        Package::new()
    } else {
        match load(&text) {
            Ok(pk) => pk,
            Err(_) => unreachable!("parsed above"),
        }
    };
    let doc = working.as_document();
    let mut editor = XmlEditor {
        doc,
        filename: p.promiser.clone(),
        done: HashSet::new(),
        pending: Vec::new(),
        edits: 0,
    };
    let filename = Variable::new(
        Value::str(p.promiser.clone()),
        DataType::String,
        Origin::Agent,
    )
    .with_tags(vec!["source=promise".into()]);
    let call = BundleCall {
        file: &file,
        bundle: &bundle,
        args,
        frame_type: "edit_xml",
        order: XML_ORDER,
        inherit: false,
        promiser_acts: &["reports"],
        vars: vec![("edit", "filename".to_string(), filename)],
    };
    let runner = act.bundles;
    runner.run(act, &call, &mut |act, ep| editor.visit(act, ep));
    if editor.edits == 0 {
        // cf-agent: no edit changes to the file need saving.
        v.kept_step();
        return;
    }
    let old = if original.is_empty() {
        None
    } else {
        Some(serialize(
            on_disk.as_document(),
            encoding.as_deref(),
            doctype.as_deref(),
        ))
    };
    let kept_doctype = if empty_first {
        None
    } else {
        doctype.as_deref()
    };
    let new = serialize(doc, encoding.as_deref(), kept_doctype);
    if old.as_deref() == Some(new.as_str()) {
        crate::debug!("No edit changes to xml file '{}' need saving", p.promiser);
        v.kept_step();
        return;
    }
    let data = bytes::encode(&new);
    let change = Change::new("edit", &p.promiser)
        .content(&original, &data)
        .done(format!("Edited xml file '{}'", p.promiser))
        .should_when_warning(format!(
            "Should edit file '{}', but only warning promised",
            p.promiser
        ));
    match act.changes.plan(&change) {
        Decision::Make => {
            for c in std::mem::take(&mut editor.pending) {
                act.changes.made(c);
            }
            if super::edit::write_with_backup(act, p, target, meta.mode, &data, read_stamp, v) {
                act.changes.made(change);
                v.repaired();
            }
        }
        Decision::Withheld { as_if_made, .. } => {
            if as_if_made {
                act.host.simulate_file(target, &data, meta.mode);
            }
            v.warned();
        }
    }
}

/// The document in a file's text; an empty file is an empty document.
fn load(text: &str) -> Result<Package, sxd_document::parser::Error> {
    if text.is_empty() {
        return Ok(Package::new());
    }
    sxd_document::parser::parse(text)
}

/// A document's type declaration (`<!DOCTYPE ...>`, with its internal
/// subset), as written.
fn doctype_of(text: &str) -> Option<String> {
    let start = text.find("<!DOCTYPE")?;
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    for (i, c) in text[start..].char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, '[') => depth += 1,
            (None, ']') => depth = depth.saturating_sub(1),
            (None, '>') if depth == 0 => return Some(text[start..start + i + 1].to_string()),
            _ => {}
        }
    }
    None
}

/// The encoding a document's declaration names, kept when it is saved.
fn declared_encoding(text: &str) -> Option<String> {
    static DECL: LazyLock<Regex> =
        LazyLock::new(|| re(r#"\A\s*<\?xml[^>]*?\sencoding\s*=\s*["']([^"']+)["']"#));
    DECL.captures(text)
        .and_then(|c| c.into_iter().nth(1).flatten())
}

/// One promise's iteration being kept: what it is and how it went.
struct Sub<'e> {
    ep: &'e ExpandedPromise,
    ptype: &'static str,
    result: Res,
    /// The run's edit locks.
    locks: &'e mut HashSet<String>,
    /// The files promise's changes.
    changes: &'e mut crate::report::change::Changes,
    /// A lock it needed was taken: it acted earlier in the run.
    locked: bool,
}

impl Sub<'_> {
    fn set(&mut self, r: Res) {
        self.result.update(r);
    }

    fn select_xpath(&self) -> Option<&str> {
        self.ep.scalar("select_xpath")
    }

    fn build_xpath(&self) -> Option<&str> {
        self.ep.scalar("build_xpath")
    }

    /// Takes cf-agent's lock for an operation on the file; false (and
    /// `locked`) when it was taken earlier in the run.
    fn lock(&mut self, op: &str, filename: &str) -> bool {
        let key = format!(
            "{op}-{}-{filename}\u{1}{}\u{1}{:?}",
            self.ep.promiser, self.ptype, self.ep.attrs
        );
        if self.locks.insert(key) {
            return true;
        }
        self.locked = true;
        false
    }

    /// Fails the promise with an error.
    fn fail(&mut self, msg: String) {
        crate::error!("{msg}");
        self.set(Res::Fail);
    }
}

struct XmlEditor<'d> {
    doc: Document<'d>,
    filename: String,
    /// Promises that acted: each acts once per run.
    done: HashSet<String>,
    /// What the promises did, said once the file is saved.
    pending: Vec<Change>,
    /// How many promises changed the document.
    edits: usize,
}

impl<'d> XmlEditor<'d> {
    fn visit(&mut self, act: &mut ActContext<'_>, ep: &ExpandedPromise) -> Option<Outcome> {
        let ptype = XML_ORDER
            .iter()
            .copied()
            .find(|t| *t == &*ep.promise_type)?;
        if ptype == "vars" || ptype == "classes" {
            return None;
        }
        if ptype == "reports" {
            super::edit::report_once(&mut self.done, act, ep);
            return None;
        }
        let mut sub = Sub {
            ep,
            ptype,
            result: Res::Noop,
            locks: act.ctx.edit_locks(),
            changes: &mut act.changes,
            locked: false,
        };
        let summary = match ptype {
            "build_xpath" => {
                if let Some(edited) = self.verify_build(&mut sub) {
                    self.count(edited);
                }
                true
            }
            "delete_tree" => self.delete_tree(&mut sub),
            "insert_tree" => self.insert_tree(&mut sub),
            "delete_attribute" => self.delete_attribute(&mut sub),
            "set_attribute" => self.set_attribute(&mut sub),
            "delete_text" | "set_text" | "insert_text" => self.text(&mut sub),
            _ => false,
        };
        if sub.locked && sub.result == Res::Noop && ptype != "build_xpath" {
            // It acted earlier in the run; cf-agent says nothing of it,
            // except of a build_xpath promise, which it reports kept.
            return None;
        }
        if summary {
            match sub.result {
                Res::Noop => {
                    crate::debug!("No changes done for the {ptype} promise '{}'", ep.promiser)
                }
                Res::Change => self.pending.push(
                    Change::new("edit_promise", &ep.promiser)
                        .done(format!("{ptype} promise '{}' repaired", ep.promiser)),
                ),
                Res::Warn => crate::warn!(
                    "Warnings encountered when actuating {ptype} promise '{}'",
                    ep.promiser
                ),
                Res::Fail | Res::Interrupted => crate::error!(
                    "Errors encountered when actuating {ptype} promise '{}'",
                    ep.promiser
                ),
            }
        }
        Some(sub.result.outcome())
    }

    fn count(&mut self, edited: bool) {
        if edited {
            self.edits += 1;
        }
    }

    /// Records a change the promise made to the document. The document is
    /// edited in memory whatever the mode; the message is held until the
    /// file is written, or under a dry run the promise says at once what
    /// it would do. A promise that only warns says nothing here: the
    /// file's warning does.
    fn changed(&mut self, sub: &mut Sub<'_>, msg: String) {
        let change = Change::new("edit_xml", &self.filename)
            .should(format!("Should {}", would(&msg)))
            .done(msg)
            .silent_when_warning();
        match sub.changes.plan(&change) {
            Decision::Withheld {
                as_if_made: true, ..
            } => sub.set(Res::Warn),
            Decision::Withheld { .. } => sub.set(Res::Change),
            Decision::Make => {
                self.pending.push(change);
                sub.set(Res::Change);
            }
        }
    }

    fn root_element(&self) -> Option<Element<'d>> {
        self.doc
            .root()
            .children()
            .into_iter()
            .find_map(|c| match c {
                ChildOfRoot::Element(e) => Some(e),
                _ => None,
            })
    }

    /// The unique element `xpath` selects; `None` (with cf-agent's failure,
    /// if any) when there is none.
    fn select(&self, xpath: &str, sub: &mut Sub<'_>) -> Option<Element<'d>> {
        if !convergent(xpath) {
            sub.fail(format!(
                "select_xpath expression '{xpath}', is NOT convergent"
            ));
            return None;
        }
        let compiled = match sxd_xpath::Factory::new().build(xpath) {
            Ok(Some(x)) => Ok(x),
            Ok(None) => Err("no XPath".to_string()),
            Err(e) => Err(e.to_string()),
        };
        let value = match compiled.and_then(|x| {
            x.evaluate(&sxd_xpath::Context::new(), self.doc.root())
                .map_err(|e| e.to_string())
        }) {
            Ok(v) => v,
            Err(e) => {
                sub.fail(format!(
                    "Unable to evaluate XPath expression '{xpath}': {e}"
                ));
                return None;
            }
        };
        let sxd_xpath::Value::Nodeset(nodes) = value else {
            return None;
        };
        let size = nodes.size();
        if size == 0 {
            return None;
        }
        if size > 1 {
            sub.fail(format!(
                "Current select_xpath expression '{xpath}' returns {size} edit nodes in XML document '{}', unique edit node required",
                self.filename
            ));
            return None;
        }
        match nodes.document_order_first() {
            Some(sxd_xpath::nodeset::Node::Element(e)) => Some(e),
            _ => {
                sub.fail(format!(
                    "The promised XPath pattern '{xpath}' was NOT found when selecting an edit node in XML document '{}'",
                    self.filename
                ));
                None
            }
        }
    }

    /// `build_xpath`, as a promise or as another promise's attribute:
    /// `None` when the build was refused, else whether it edited.
    fn verify_build(&mut self, sub: &mut Sub<'_>) -> Option<bool> {
        let raw = sub.build_xpath().unwrap_or(&sub.ep.promiser).to_string();
        let sane = if sub.ptype == "build_xpath" && sub.build_xpath().is_some() {
            crate::error!("Attribute: build_xpath is not allowed within bundle: build_xpath");
            false
        } else if sub.select_xpath().is_some() && sub.build_xpath().is_none() {
            crate::error!("XPath build does not require select_xpath to be specified");
            false
        } else if !convergent(&raw) {
            crate::error!("Promiser expression ({raw}) is not convergent");
            sub.set(Res::Interrupted);
            false
        } else if !BUILD_SYNTAX.is_match(&raw) {
            crate::error!(
                "Promiser expression '{raw}' contains syntax that is not supported for xpath_build. Please refer to users manual for supported syntax specifications."
            );
            sub.set(Res::Interrupted);
            false
        } else {
            true
        };
        if !sane {
            sub.fail(format!(
                "The promised XPath build '{raw}' breaks its own promises"
            ));
            return None;
        }
        if !sub.lock("buildxpath", &self.filename) {
            return None;
        }
        Some(match self.root_element() {
            None => self.build_in_file(&raw, sub),
            Some(_) => self.build_in_node(&raw, sub),
        })
    }

    fn segment(&self, segment: &str, sub: &mut Sub<'_>) -> Option<Element<'d>> {
        let node = segment_node(self.doc, segment);
        if node.is_none() {
            sub.fail(format!("Could not extract node '{segment}'"));
        }
        node
    }

    fn build_in_file(&mut self, raw: &str, sub: &mut Sub<'_>) -> bool {
        let Some(root) = self.segment(head_segment(raw), sub) else {
            sub.fail(format!(
                "Unable to extract root node from XPath '{raw}', to be inserted into an empty XML document '{}'",
                self.filename
            ));
            return false;
        };
        self.doc.root().append_child(root);
        let mut node = root;
        let mut rest = remove_head(raw);
        while !rest.is_empty() {
            let Some(head) = self.segment(head_segment(&rest), sub) else {
                break;
            };
            node.append_child(head);
            node = head;
            rest = remove_head(&rest);
        }
        self.changed(
            sub,
            format!(
                "Built XPath '{raw}' into an empty XML document '{}'",
                self.filename
            ),
        );
        true
    }

    fn build_in_node(&mut self, raw: &str, sub: &mut Sub<'_>) -> bool {
        let mut path = raw.to_string();
        let mut found = None;
        let mut tail: Option<Element<'d>> = None;
        while !path.is_empty() {
            if let Some(e) = self.select(&path, sub) {
                found = Some(e);
                break;
            }
            let head = if has_tail(&path) {
                let n = self.segment(&tail_segment(&path), sub);
                path = remove_tail(&path);
                n
            } else {
                let n = self.segment(head_segment(&path), sub);
                path = remove_head(&path);
                n
            };
            if let (Some(h), Some(t)) = (head, tail) {
                h.append_child(t);
            }
            tail = head;
        }
        let parent = found.or_else(|| self.root_element());
        if let (Some(parent), Some(t)) = (parent, tail) {
            parent.append_child(t);
        }
        self.changed(
            sub,
            format!("Built XPath '{raw}' in XML document '{}'", self.filename),
        );
        true
    }

    /// The build a promise asks for with its `build_xpath` attribute,
    /// failing with `msg` when it is refused; false when it was.
    fn build_first(&mut self, sub: &mut Sub<'_>, msg: impl FnOnce(&Self) -> String) -> bool {
        if sub.build_xpath().is_none() {
            return true;
        }
        match self.verify_build(sub) {
            Some(edited) => {
                self.count(edited);
                true
            }
            None => {
                let m = msg(self);
                sub.fail(m);
                false
            }
        }
    }

    /// The element a promise's `select_xpath` selects.
    fn edit_node(&self, sub: &mut Sub<'_>) -> Option<Element<'d>> {
        let xpath = sub.select_xpath()?.to_string();
        self.select(&xpath, sub)
    }

    /// A promise's required, convergent `select_xpath`; else cf-agent's
    /// complaint.
    fn needs_select(sub: &Sub<'_>, missing: &str) -> bool {
        match sub.select_xpath() {
            None => {
                crate::error!("{missing}");
                false
            }
            Some(x) => convergent(x),
        }
    }

    fn delete_tree(&mut self, sub: &mut Sub<'_>) -> bool {
        let p = sub.ep.promiser.clone();
        if !Self::needs_select(sub, "Tree deletion requires select_xpath to be specified") {
            sub.fail(format!("The promised tree deletion '{p}' is inconsistent"));
            return false;
        }
        if sub.build_xpath().is_some() && self.verify_build(sub).map(|e| self.count(e)).is_none() {
            return false;
        }
        let select = sub.select_xpath().unwrap_or_default().to_string();
        let Some(node) = self.edit_node(sub) else {
            crate::error!(
                "The promised XPath pattern '{select}', was NOT successful when selecting an edit node, in XML document '{})",
                self.filename
            );
            sub.set(Res::Interrupted);
            return false;
        };
        if !sub.lock("deletetree", &self.filename) {
            return false;
        }
        let chunk = match parse_tree(&p) {
            Ok(c) => c,
            Err(e) => {
                sub.fail(format!(
                    "Tree to be deleted '{p}' at XPath '{select}' in XML document '{}' was not parsed successfully: {e}",
                    self.filename
                ));
                return true;
            }
        };
        let Some(tree) = first_element(chunk.as_document()) else {
            sub.fail(format!(
                "Tree to be deleted '{p}' at XPath '{select}' in XML document '{}' was not parsed successfully",
                self.filename
            ));
            return true;
        };
        let Some(found) = child_with_subset(tree, node) else {
            crate::debug!(
                "The promised tree to be deleted '{p}' does not exist at XPath '{select}' in XML document '{}'",
                self.filename
            );
            return true;
        };
        found.remove_from_parent();
        self.changed(
            sub,
            format!(
                "Deleted tree '{p}' at XPath '{select}' in XML document '{}'",
                self.filename
            ),
        );
        self.edits += 1;
        true
    }

    fn insert_tree(&mut self, sub: &mut Sub<'_>) -> bool {
        let p = sub.ep.promiser.clone();
        let has_select = sub.select_xpath().is_some();
        let has_build = sub.build_xpath().is_some();
        let sane = if has_select && !has_build && self.root_element().is_none() {
            crate::error!(
                "Tree insertion into an empty file, using select_xpath, does not make sense"
            );
            false
        } else if !has_select && has_build {
            crate::error!(
                "Tree insertion requires select_xpath to be specified, unless inserting into an empty file"
            );
            false
        } else {
            sub.select_xpath().is_none_or(convergent)
        };
        if !sane {
            sub.fail(format!(
                "The promised tree insertion '{p}' breaks its own promises"
            ));
            return false;
        }
        let fname = self.filename.clone();
        if !self.build_first(sub, |_| {
            format!("Failed to build XPath for tree insertion '{p}'")
        }) {
            return false;
        }
        let select = sub.select_xpath().unwrap_or_default().to_string();
        let node = if has_select {
            let Some(n) = self.edit_node(sub) else {
                sub.fail(format!(
                    "Failed to select edit node in the XML document '{fname}' using the XPath '{select}'"
                ));
                return false;
            };
            Some(n)
        } else {
            None
        };
        if !sub.lock("inserttree", &self.filename) {
            return false;
        }
        let chunk = match parse_tree(&p) {
            Ok(c) => c,
            Err(e) => {
                sub.fail(format!(
                    "Failed to parse the tree '{p}' (to be inserted into the XML document '{fname}'): {e}"
                ));
                return true;
            }
        };
        let Some(tree) = first_element(chunk.as_document()) else {
            sub.fail(format!(
                "The tree '{p}' (to be inserted into the XML document '{fname}') is empty"
            ));
            return true;
        };
        match node {
            None => {
                if let Some(root) = self.root_element() {
                    if !nodes_compare(tree, root) {
                        sub.fail(format!(
                            "The tree '{p}' requested to be inserted into the XML document '{fname}', however XML document is not empty and tree to be inserted does not match existing content"
                        ));
                        crate::info!(
                            "Specify select_xpath expression insert into a non-empty XML document"
                        );
                    } else {
                        crate::debug!(
                            "The promised XML document '{fname}' already exists and contains the correct root element"
                        );
                    }
                    return true;
                }
                let copy = import(self.doc, tree);
                self.doc.root().append_child(copy);
                self.changed(
                    sub,
                    format!("Inserted tree '{p}' into an empty XML document '{fname}'"),
                );
            }
            Some(node) => {
                if child_with_subset(tree, node).is_some() {
                    crate::debug!(
                        "The tree '{p}' already exists at XPath '{select}' in XML document '{fname}'"
                    );
                    return true;
                }
                // Only the tree: cf-agent 3.21 also saves what follows it
                // in the promiser (a trailing newline, CFE-3860), an
                // upstream bug fixed here (the suite's CFE-3806).
                node.append_child(import(self.doc, tree));
                self.changed(
                    sub,
                    format!("Inserted tree '{p}' at XPath '{select}' in XML document '{fname}'"),
                );
            }
        }
        self.edits += 1;
        true
    }

    fn delete_attribute(&mut self, sub: &mut Sub<'_>) -> bool {
        let p = sub.ep.promiser.clone();
        let fname = self.filename.clone();
        if !Self::needs_select(
            sub,
            "Attribute deletion requires select_xpath to be specified",
        ) {
            sub.fail(format!(
                "The promised attribute deletion '{p}', is inconsistent"
            ));
            return false;
        }
        if !self.build_first(sub, |_| {
            format!("Failed to build XPath for attribute deletion '{p}'")
        }) {
            return false;
        }
        let select = sub.select_xpath().unwrap_or_default().to_string();
        let Some(node) = self.edit_node(sub) else {
            sub.fail(format!(
                "The promised XPath pattern '{select}', was NOT successful when selecting an edit node, in XML document '{fname}'"
            ));
            return false;
        };
        if !sub.lock("deleteattribute", &self.filename) {
            return false;
        }
        if node.attribute(p.as_str()).is_none() {
            crate::debug!(
                "Attribute '{p}' (to be deleted at XPath '{select}' in the XML document '{fname}') does not exist"
            );
            return true;
        }
        node.remove_attribute(p.as_str());
        self.changed(
            sub,
            format!("Deleted attribute '{p}' at XPath '{select}' in the XML document '{fname}'"),
        );
        self.edits += 1;
        true
    }

    fn set_attribute(&mut self, sub: &mut Sub<'_>) -> bool {
        let p = sub.ep.promiser.clone();
        let fname = self.filename.clone();
        if !Self::needs_select(
            sub,
            "Attribute insertion requires select_xpath to be specified",
        ) {
            sub.fail(format!(
                "The promised attribute set '{p}', breaks its own promises"
            ));
            return false;
        }
        if !self.build_first(sub, |_| {
            format!("Failed to build XPath for setting attribute '{p}'")
        }) {
            return false;
        }
        let select = sub.select_xpath().unwrap_or_default().to_string();
        let Some(node) = self.edit_node(sub) else {
            sub.fail(format!(
                "No node to edit selected by XPath '{select}' in the XML document '{fname}'"
            ));
            return false;
        };
        if !sub.lock("setattribute", &self.filename) {
            return false;
        }
        let value = sub
            .ep
            .scalar("attribute_value")
            .unwrap_or_default()
            .to_string();
        if node.attribute_value(p.as_str()) == Some(value.as_str()) {
            crate::debug!(
                "Attribute with name '{p}' and value '{value}' already exists at XPath '{select}' in XML document '{fname}'"
            );
            return true;
        }
        node.set_attribute_value(p.as_str(), &value);
        self.changed(
            sub,
            format!(
                "Set attribute with name '{p}' to value '{value}' at XPath '{select}' in XML document '{fname}'"
            ),
        );
        self.edits += 1;
        true
    }

    /// `delete_text`, `set_text` and `insert_text`: they act on the text
    /// an element starts with.
    fn text(&mut self, sub: &mut Sub<'_>) -> bool {
        let p = sub.ep.promiser.clone();
        let fname = self.filename.clone();
        let what = match sub.ptype {
            "delete_text" => "text deletion",
            "set_text" => "text set",
            _ => "text insertion",
        };
        if !Self::needs_select(sub, "Tree insertion requires select_xpath to be specified") {
            let verb = if sub.ptype == "delete_text" {
                "is inconsistent"
            } else {
                "breaks its own promises"
            };
            sub.fail(format!("The promised {what} '{p}' {verb}"));
            return false;
        }
        let ptype = sub.ptype;
        if !self.build_first(sub, |s| match ptype {
            "delete_text" => format!(
                "Failed to build XPath for text deletion in '{}'",
                s.filename
            ),
            "set_text" => format!("Failed to build XPath for changing text in '{p}'"),
            _ => format!(
                "Failed to build XPath for text insertion into '{}'",
                s.filename
            ),
        }) {
            return false;
        }
        let select = sub.select_xpath().unwrap_or_default().to_string();
        let Some(node) = self.edit_node(sub) else {
            let the = if ptype == "set_text" { "the " } else { "" };
            sub.fail(format!(
                "No node selected by XPath '{select}' in {the}XML document '{fname}'"
            ));
            return false;
        };
        let op = ptype.replace('_', "");
        if !sub.lock(&op, &self.filename) {
            return false;
        }
        let current = first_child_text(node);
        let present = match ptype {
            "set_text" => current.as_deref() == Some(p.as_str()),
            _ => current.as_deref().is_some_and(|c| c.contains(p.as_str())),
        };
        let (done, msg) = match ptype {
            "delete_text" => (
                !present,
                format!("Deleted text '{p}' at XPath '{select}' in the XML document '{fname}'"),
            ),
            "set_text" => (
                present,
                format!("Set text '{p}' at XPath '{select}' in XML document '{fname}'"),
            ),
            _ => (
                present,
                format!("Inserted text '{p}' at XPath '{select}' in the XML document '{fname}'"),
            ),
        };
        if done {
            crate::debug!("No {what} needed at XPath '{select}' in '{fname}'");
            return true;
        }
        let children = node.children();
        match children.first() {
            Some(ChildOfElement::Text(t)) => {
                let new = match ptype {
                    "delete_text" => String::new(),
                    "set_text" => p.clone(),
                    _ => format!("{}{p}", t.text()),
                };
                t.set_text(&new);
            }
            _ => {
                // cf-agent keeps the element children (and what follows
                // the first of them) and puts the text before them.
                let keep: Vec<ChildOfElement<'d>> = children
                    .iter()
                    .skip_while(|c| !matches!(c, ChildOfElement::Element(_)))
                    .copied()
                    .collect();
                node.clear_children();
                if ptype != "delete_text" && !p.is_empty() {
                    node.append_child(self.doc.create_text(&p));
                }
                node.append_children(keep);
            }
        }
        self.changed(sub, msg);
        self.edits += 1;
        true
    }
}

/// What cf-agent says an operation would do, from what it says once done
/// ("Set text ..." would "set text ...").
fn would(done: &str) -> String {
    const WORDS: &[(&str, &str)] = &[
        ("Built ", "build "),
        ("Inserted tree '", "insert tree '"),
        ("Deleted tree ", "delete tree "),
        ("Deleted attribute ", "delete the attribute "),
        ("Set ", "set "),
        ("Deleted text ", "delete text "),
        ("Inserted text ", "insert text "),
    ];
    if let Some(rest) = done.strip_prefix("Inserted tree '")
        && rest.contains("' into an empty XML document '")
    {
        return format!("insert the promised tree '{rest}");
    }
    for (from, to) in WORDS {
        if let Some(rest) = done.strip_prefix(from) {
            return format!("{to}{rest}");
        }
    }
    done.to_string()
}

// --- cf-agent's build_xpath syntax ---------------------------------------

/// One of the fixed patterns below, in PCRE as cf-agent matches them;
/// `\A` and `\z` anchor at the ends of the whole text (our patterns are
/// compiled multi-line, where `^` and `$` also match at line breaks).
fn re(pattern: &str) -> Regex {
    Regex::new(pattern).expect("valid pattern")
}

/// The paths build_xpath accepts: `/name[ @attr = value | child = value ]/...`.
static BUILD_SYNTAX: LazyLock<Regex> = LazyLock::new(|| {
    re(concat!(
        r#"\A(/(( |\t)*(\w|-|\.)+( |\t)*)"#,
        r#"(\[( |\t)*@?(\w|-|\.)+( |\t)*=( |\t)*('|")?(\w|-|\.)+('|")?( |\t)*"#,
        r#"(\|( |\t)*@?(\w|-|\.)+( |\t)*=( |\t)*('|")?(\w|-|\.)+('|")?( |\t)*)*\])?)*\z"#
    ))
});

/// cf-agent refuses paths that name a position among siblings
/// (`[2]`, `[last()]`, `position() = 1`, `following-sibling::`...).
fn convergent(xpath: &str) -> bool {
    static POSITIONAL: LazyLock<Regex> = LazyLock::new(|| {
        re(concat!(
            r"\[\s*([^\[\]]*\s*(\||(or)|(and)))?\s*",
            r"((position)\s*\(\s*\)\s*((=)|(!=)|(<)|(<=)|(>)|(>=))\s*)?\s*",
            r"(((\d+)\s*|((last)\s*\(\s*\)\s*))(((\+)|(-)|(\*)|(div)|(mod))\s*(\d+)\s*)*)\s*",
            r"((\||(or)|(and))[^\[\]]*)?\]",
            r"|((following)|(preceding))(-sibling)?\s*(::)"
        ))
    });
    !POSITIONAL.is_match(xpath)
}

fn has_tail(xpath: &str) -> bool {
    static TAIL: LazyLock<Regex> = LazyLock::new(|| {
        re(r"\A\s*/?\s*(\w|-|\.)+(\s*::\s*(\w|-|\.)+\s*)*\s*(\[[^\[\]/]*\])?\s*/")
    });
    TAIL.is_match(xpath)
}

/// The first segment of a path.
fn head_segment(xpath: &str) -> &str {
    xpath.split('/').find(|s| !s.is_empty()).unwrap_or("")
}

/// The path after its first segment (from its next `/`).
fn remove_head(xpath: &str) -> String {
    if !has_tail(xpath) {
        return String::new();
    }
    match xpath.get(1..).and_then(|r| r.find('/')) {
        Some(i) => xpath[i + 1..].to_string(),
        None => String::new(),
    }
}

/// The last segment of a path with more than one.
fn tail_segment(xpath: &str) -> String {
    if !has_tail(xpath) {
        return String::new();
    }
    xpath
        .split('/')
        .filter(|s| !s.is_empty())
        .skip(1)
        .last()
        .unwrap_or("")
        .to_string()
}

/// The path without its last segment.
fn remove_tail(xpath: &str) -> String {
    if !has_tail(xpath) {
        return String::new();
    }
    match xpath.rfind('/') {
        Some(i) => xpath[..i].to_string(),
        None => String::new(),
    }
}

/// The next token of `s` between any of `delims`, skipping empty ones,
/// as `strsep` in a loop gives it.
fn next_token<'a>(s: &mut &'a str, delims: &str) -> &'a str {
    loop {
        if s.is_empty() {
            return "";
        }
        let (tok, rest) = match s.find(|c| delims.contains(c)) {
            Some(i) => {
                let c = s[i..].chars().next().map_or(1, char::len_utf8);
                (&s[..i], &s[i + c..])
            }
            None => (*s, ""),
        };
        *s = rest;
        if !tok.is_empty() {
            return tok;
        }
    }
}

/// The element one segment of a build path stands for: its name, the
/// attributes and the child elements (with their text) its predicate
/// names.
fn segment_node<'d>(doc: Document<'d>, segment: &str) -> Option<Element<'d>> {
    static HAS_NODE: LazyLock<Regex> =
        LazyLock::new(|| re(r"\A(/)?(\w|-|\.)+((\s*::\s*)?(\w|-|\.)+)*"));
    static HAS_PREDICATE: LazyLock<Regex> = LazyLock::new(|| {
        re(concat!(
            r#"\A\s*/?\s*(\w|-|\.)+(\s*::\s*(\w|-|\.)+)*\s*"#,
            r#"\[\s*@?\s*(\w|-|\.)+\s*=\s*("|')?(\w|-|\.)+("|')?\s*(\s*\|\s*)?(\s*@?\s*(\w|-|\.)+\s*=\s*("|')?(\w|-|\.)+("|')?\s*)*\]"#
        ))
    });
    static PRED_TAIL: LazyLock<Regex> =
        LazyLock::new(|| re(r#"\A\s*\[?\s*@?\s*(\w|-|\.)+\s*=\s*("|')?(\w|-|\.)+("|')?\s*\|"#));
    static PRED_ATTR: LazyLock<Regex> = LazyLock::new(|| {
        re(r#"\A\s*\[?\|?(\s*@\s*(\w|-|\.)+\s*=\s*("|')?(\w|-|\.)+("|')?)(\s*(\||\]))?"#)
    });
    static PRED_NODE: LazyLock<Regex> = LazyLock::new(|| {
        re(r#"\A\s*\[?\|?(\s*(\w|-|\.)+\s*=\s*("|')?(\w|-|\.)+("|')?)(\s*(\||\]))?"#)
    });
    if !HAS_NODE.is_match(segment) {
        return None;
    }
    let mut running = segment;
    let name = next_token(&mut running, " []");
    if name.is_empty() {
        return None;
    }
    let node = doc.create_element(name);
    if !HAS_PREDICATE.is_match(segment) {
        return Some(node);
    }
    let mut predicate = next_token(&mut running, "[]").to_string();
    while !predicate.is_empty() {
        if PRED_NODE.is_match(&predicate) {
            let mut r = predicate.as_str();
            let child = next_token(&mut r, "| \"'=");
            let text = next_token(&mut r, " \"'=");
            if !child.is_empty() {
                let c = doc.create_element(child);
                if !text.is_empty() {
                    c.append_child(doc.create_text(text));
                }
                node.append_child(c);
            }
        } else if PRED_ATTR.is_match(&predicate) {
            let mut r = predicate.as_str();
            let attr = next_token(&mut r, "| @\"'=");
            let value = next_token(&mut r, "| @\"'=");
            if !attr.is_empty() {
                node.set_attribute_value(attr, value);
            }
        }
        predicate = if PRED_TAIL.is_match(&predicate) {
            match predicate.get(1..).and_then(|r| r.find('|')) {
                Some(i) => predicate[i + 1..].to_string(),
                None => String::new(),
            }
        } else {
            String::new()
        };
    }
    Some(node)
}

// --- trees ----------------------------------------------------------------

/// A promiser's tree: the nodes of an XML fragment.
fn parse_tree(raw: &str) -> Result<Package, sxd_document::parser::Error> {
    sxd_document::parser::parse(&format!("<cfe-fragment>{raw}</cfe-fragment>"))
}

/// The first node of a parsed fragment, when it is an element.
fn first_element(doc: Document<'_>) -> Option<Element<'_>> {
    let wrapper = doc.root().children().into_iter().find_map(|c| match c {
        ChildOfRoot::Element(e) => Some(e),
        _ => None,
    })?;
    match wrapper.children().first() {
        Some(ChildOfElement::Element(e)) => Some(*e),
        _ => None,
    }
}

/// A copy of `e` (from another document) in `doc`.
fn import<'d>(doc: Document<'d>, e: Element<'_>) -> Element<'d> {
    let copy = doc.create_element(e.name().local_part());
    for a in e.attributes() {
        copy.set_attribute_value(a.name().local_part(), a.value());
    }
    for c in e.children() {
        copy.append_child(import_child(doc, c));
    }
    copy
}

/// A copy of any node (from another document) in `doc`.
fn import_child<'d>(doc: Document<'d>, c: ChildOfElement<'_>) -> ChildOfElement<'d> {
    match c {
        ChildOfElement::Element(child) => import(doc, child).into(),
        ChildOfElement::Text(t) => doc.create_text(t.text()).into(),
        ChildOfElement::Comment(t) => doc.create_comment(t.text()).into(),
        ChildOfElement::ProcessingInstruction(pi) => doc
            .create_processing_instruction(pi.target(), pi.value())
            .into(),
    }
}

fn element_children<'d>(e: Element<'d>) -> Vec<Element<'d>> {
    e.children()
        .into_iter()
        .filter_map(|c| match c {
            ChildOfElement::Element(e) => Some(e),
            _ => None,
        })
        .collect()
}

/// All the text below a node, as libxml2's `xmlNodeGetContent`.
fn content(c: &ChildOfElement<'_>) -> String {
    match c {
        ChildOfElement::Text(t) => t.text().to_string(),
        ChildOfElement::Comment(t) => t.text().to_string(),
        ChildOfElement::ProcessingInstruction(pi) => pi.value().unwrap_or("").to_string(),
        ChildOfElement::Element(e) => e.children().iter().map(content).collect(),
    }
}

/// The text an element starts with, as cf-agent reads it: the content of
/// its first child (`None` when it has none).
fn first_child_text(e: Element<'_>) -> Option<String> {
    e.children().first().map(content)
}

fn same_attribute(e: Element<'_>, name: &str, value: &str) -> bool {
    e.attribute_value(name) == Some(value)
}

/// Whether `a` and `b` have the same tag, attributes, first text and
/// child elements.
fn nodes_compare(a: Element<'_>, b: Element<'_>) -> bool {
    if a.name().local_part() != b.name().local_part() {
        return false;
    }
    let (aa, ba) = (a.attributes(), b.attributes());
    if aa.len() != ba.len()
        || !aa
            .iter()
            .all(|x| same_attribute(b, x.name().local_part(), x.value()))
    {
        return false;
    }
    match (first_child_text(a), first_child_text(b)) {
        (None, None) => {}
        (Some(x), Some(y)) if x == y => {}
        _ => return false,
    }
    let (ac, bc) = (element_children(a), element_children(b));
    ac.len() == bc.len() && ac.iter().all(|x| bc.iter().any(|y| nodes_compare(*x, *y)))
}

/// Whether `b` holds `a`: the same tag, `a`'s attributes, `a`'s first
/// text within its own, and each of `a`'s child elements exactly.
fn nodes_subset(a: Element<'_>, b: Element<'_>) -> bool {
    if a.name().local_part() != b.name().local_part() {
        return false;
    }
    if !a
        .attributes()
        .iter()
        .all(|x| same_attribute(b, x.name().local_part(), x.value()))
    {
        return false;
    }
    if let Some(t) = first_child_text(a) {
        match first_child_text(b) {
            Some(u) if u.contains(&t) => {}
            _ => return false,
        }
    }
    let bc = element_children(b);
    element_children(a)
        .iter()
        .all(|x| bc.iter().any(|y| nodes_compare(*x, *y)))
}

/// The first child element of `node` that holds `tree`.
fn child_with_subset<'d>(tree: Element<'_>, node: Element<'d>) -> Option<Element<'d>> {
    element_children(node)
        .into_iter()
        .find(|c| nodes_subset(tree, *c))
}

// --- saving ---------------------------------------------------------------

/// The document as libxml2's `xmlSaveFile` writes it.
fn serialize(doc: Document<'_>, encoding: Option<&str>, doctype: Option<&str>) -> String {
    let mut s = String::from("<?xml version=\"1.0\"");
    if let Some(enc) = encoding {
        s.push_str(&format!(" encoding=\"{enc}\""));
    }
    s.push_str("?>\n");
    if let Some(d) = doctype {
        s.push_str(d);
        s.push('\n');
    }
    for c in doc.root().children() {
        match c {
            ChildOfRoot::Element(e) => write_element(&mut s, e),
            ChildOfRoot::Comment(t) => {
                s.push_str("<!--");
                s.push_str(t.text());
                s.push_str("-->");
            }
            ChildOfRoot::ProcessingInstruction(pi) => write_pi(&mut s, pi.target(), pi.value()),
        }
        s.push('\n');
    }
    s
}

fn write_pi(s: &mut String, target: &str, value: Option<&str>) {
    s.push_str("<?");
    s.push_str(target);
    if let Some(v) = value {
        s.push(' ');
        s.push_str(v);
    }
    s.push_str("?>");
}

fn qualified(prefix: Option<&str>, local: &str) -> String {
    match prefix {
        Some(p) if !p.is_empty() => format!("{p}:{local}"),
        _ => local.to_string(),
    }
}

fn write_element(s: &mut String, e: Element<'_>) {
    let name = qualified(
        e.name()
            .namespace_uri()
            .and_then(|u| e.prefix_for_namespace_uri(u, e.preferred_prefix())),
        e.name().local_part(),
    );
    s.push('<');
    s.push_str(&name);
    // Namespace declarations made on this element.
    if let Some(uri) = e.default_namespace_uri() {
        s.push_str(" xmlns=\"");
        escape_attr(s, uri);
        s.push('"');
    }
    let parent_ns: Vec<(String, String)> = match e.parent() {
        Some(sxd_document::dom::ParentOfChild::Element(p)) => p
            .namespaces_in_scope()
            .iter()
            .map(|n| (n.prefix().to_string(), n.uri().to_string()))
            .collect(),
        _ => Vec::new(),
    };
    for n in e.namespaces_in_scope() {
        if n.prefix() == "xml"
            || parent_ns
                .iter()
                .any(|(p, u)| p == n.prefix() && u == n.uri())
        {
            continue;
        }
        s.push_str(&format!(" xmlns:{}=\"", n.prefix()));
        escape_attr(s, n.uri());
        s.push('"');
    }
    for a in e.attributes() {
        let aname = qualified(
            a.name()
                .namespace_uri()
                .and_then(|u| e.prefix_for_namespace_uri(u, a.preferred_prefix())),
            a.name().local_part(),
        );
        s.push(' ');
        s.push_str(&aname);
        s.push_str("=\"");
        escape_attr(s, a.value());
        s.push('"');
    }
    let children = e.children();
    if children.is_empty() {
        s.push_str("/>");
        return;
    }
    s.push('>');
    for c in children {
        match c {
            ChildOfElement::Element(child) => write_element(s, child),
            ChildOfElement::Text(t) => escape_text(s, t.text()),
            ChildOfElement::Comment(t) => {
                s.push_str("<!--");
                s.push_str(t.text());
                s.push_str("-->");
            }
            ChildOfElement::ProcessingInstruction(pi) => write_pi(s, pi.target(), pi.value()),
        }
    }
    s.push_str("</");
    s.push_str(&name);
    s.push('>');
}

fn escape_text(s: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => s.push_str("&amp;"),
            '<' => s.push_str("&lt;"),
            '>' => s.push_str("&gt;"),
            '\r' => s.push_str("&#13;"),
            c => s.push(c),
        }
    }
}

fn escape_attr(s: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => s.push_str("&amp;"),
            '<' => s.push_str("&lt;"),
            '>' => s.push_str("&gt;"),
            '"' => s.push_str("&quot;"),
            '\n' => s.push_str("&#10;"),
            '\r' => s.push_str("&#13;"),
            '\t' => s.push_str("&#9;"),
            c => s.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built(xpath: &str) -> String {
        let pk = Package::new();
        let doc = pk.as_document();
        let mut node = None;
        let mut rest = xpath.to_string();
        while !rest.is_empty() {
            let n = segment_node(doc, head_segment(&rest)).expect("segment");
            match node {
                None => doc.root().append_child(n),
                Some(p) => Element::append_child(&p, n),
            }
            node = Some(n);
            rest = remove_head(&rest);
        }
        serialize(doc, None, None)
    }

    #[test]
    fn builds_a_path_with_attributes_and_children() {
        assert_eq!(
            built(r#"/Server/Service/Host[ @name="cfe_host" | Alias = cfe_alias ]"#),
            "<?xml version=\"1.0\"?>\n<Server><Service><Host name=\"cfe_host\"><Alias>cfe_alias</Alias></Host></Service></Server>\n"
        );
    }

    #[test]
    fn keeps_the_document_type_declaration() {
        assert_eq!(
            doctype_of("<?xml version=\"1.0\"?>\n<!DOCTYPE a [ <!ENTITY x \"]>\"> ]>\n<a/>")
                .as_deref(),
            Some("<!DOCTYPE a [ <!ENTITY x \"]>\"> ]>")
        );
        assert_eq!(doctype_of("<a/>"), None);
    }

    #[test]
    fn path_segments() {
        assert_eq!(head_segment("/a/b[@x='1']/c"), "a");
        assert_eq!(remove_head("/a/b/c"), "/b/c");
        assert_eq!(tail_segment("/a/b/c"), "c");
        assert_eq!(remove_tail("/a/b/c"), "/a/b");
        assert_eq!(remove_head("/a"), "");
    }

    #[test]
    fn positional_paths_are_not_convergent() {
        assert!(!convergent("/a/b[2]"));
        assert!(!convergent("/a/b[last()]"));
        assert!(!convergent("/a/following-sibling::b"));
        assert!(convergent("/a/b[@name='x']"));
    }

    #[test]
    fn serialises_as_libxml2_does() {
        let pk = sxd_document::parser::parse(
            "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>\n<!-- c --><a x=\"1\">t &amp; <b/></a>",
        )
        .expect("parses");
        assert_eq!(
            serialize(pk.as_document(), Some("ISO-8859-1"), None),
            "<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?>\n<!-- c -->\n<a x=\"1\">t &amp; <b/></a>\n"
        );
    }
}
