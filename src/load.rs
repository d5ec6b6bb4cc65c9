//! Reads policy files from disk and parses them, keeping each file's text
//! so that diagnostics can be rendered later.

use crate::syntax::ast::PolicyFile;
use crate::syntax::{Diagnostic, SourceFile, parse};
use crate::values::hash::FastMap;
use std::path::Path;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum LoadError {
    #[error("cannot read policy file '{path}': {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// cf-agent's words for a policy file its group or others may write.
    #[error("File {path} (owner {uid}) is writable by others (security exception)")]
    WritableByOthers { path: String, uid: u32 },
}

/// A policy file that its group or others may write (after following
/// links) is refused before it is read, as cf-agent refuses it: whoever
/// may write it could otherwise have the agent run what they like, as
/// root when it runs as root. A file that cannot be looked at is left
/// for reading to report.
pub fn refuse_writable_by_others(path: &Path) -> Result<(), LoadError> {
    use crate::host::local::MetadataExt;
    match crate::host::local::metadata(path) {
        Ok(m) if m.mode() & 0o022 != 0 => Err(LoadError::WritableByOthers {
            path: path.display().to_string(),
            uid: m.uid(),
        }),
        _ => Ok(()),
    }
}

/// One file: its text, its tree and what the parser said about it.
#[derive(Debug)]
pub struct LoadedFile {
    pub source: SourceFile,
    pub tree: PolicyFile,
    pub diagnostics: Vec<Diagnostic>,
}

impl LoadedFile {
    pub fn from_text(path: &str, text: String) -> LoadedFile {
        let parsed = parse(path, &text);
        LoadedFile {
            source: SourceFile::with_line_starts(path, text, parsed.line_starts),
            tree: parsed.file,
            diagnostics: parsed.diagnostics,
        }
    }

    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// Validates this file on its own against the schema and keeps what
    /// that finds with the parser's diagnostics. What it references may be
    /// defined in files it does not load, so references are not resolved.
    pub fn validate_alone(&mut self) {
        let found = crate::schema::validate_with(&[&self.tree], crate::schema::Scope::Fragment);
        self.diagnostics.extend(found.into_iter().map(|(_, d)| d));
    }

    /// `bundle agent __main__` is the bundle a file runs when it is the
    /// policy entry, and nothing otherwise (cf-agent 3.12+): it becomes
    /// `main` in the entry file and is left out of every other, so that a
    /// library can carry its own self-test.
    pub fn settle_main(&mut self, is_entry: bool) {
        use crate::syntax::ast::Block;
        self.tree.blocks.retain_mut(|block| match block {
            Block::Bundle(b) if b.name.name == "__main__" && b.namespace == "default" => {
                if is_entry {
                    b.name.name = "main".into();
                }
                is_entry
            }
            _ => true,
        });
    }

    /// Every diagnostic rendered, in source order.
    pub fn render_diagnostics(&self) -> String {
        crate::syntax::diagnostic::render_all(&self.diagnostics, &self.source)
    }
}

/// Reads and parses one file. Invalid UTF-8 is replaced, not fatal: a
/// policy with a stray Latin-1 byte in a comment still loads.
pub fn load_file(path: &Path) -> Result<LoadedFile, LoadError> {
    let bytes = crate::host::local::read(path).map_err(|source| LoadError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    Ok(LoadedFile::from_text(&path.display().to_string(), text))
}

/// Validates files together against the schema (duplicates and
/// references are looked for across all of them); the diagnostics of
/// each file, in the order of `files`.
pub fn validate_together(
    files: &[&LoadedFile],
    scope: crate::schema::Scope,
) -> Vec<Vec<Diagnostic>> {
    let trees: Vec<&PolicyFile> = files.iter().map(|f| &f.tree).collect();
    let mut per_file = vec![Vec::new(); files.len()];
    for (i, d) in crate::schema::validate_with(&trees, scope) {
        per_file[i].push(d);
    }
    per_file
}

/// The entry file's validation, run on a second thread while the policy
/// is pre-evaluated. When the policy turns out to be that file alone,
/// checked in the scope guessed at the start, its result is taken instead
/// of validating again; otherwise it is waited for and dropped.
pub struct EarlyValidation {
    file: std::sync::Arc<LoadedFile>,
    scope: crate::schema::Scope,
    found: std::thread::JoinHandle<Vec<Vec<Diagnostic>>>,
}

impl EarlyValidation {
    /// Below this the thread costs more than it saves. Measured on a
    /// 2-vCPU virtual machine, where starting a thread and waking the
    /// second CPU takes ~0.1 ms: a 220 KB file's check took 0.11 ms
    /// longer with it (2.20 ms against 2.09), a 530 KB one's 0.7 ms less
    /// (bundles-many), a 5 MB one's 5.5 ms less (parse-big).
    const MIN_TEXT: usize = 256 * 1024;

    pub fn start(policy: &PolicySet, scope: crate::schema::Scope) -> Option<EarlyValidation> {
        let [file] = policy.files.as_slice() else {
            return None;
        };
        if file.source.text.len() < Self::MIN_TEXT {
            return None;
        }
        let own = std::sync::Arc::clone(file);
        // The validator's depth limit is sized for the main thread's stack.
        let found = std::thread::Builder::new()
            .stack_size(8 << 20)
            .spawn(move || validate_together(&[&own], scope))
            .ok()?;
        Some(EarlyValidation {
            file: std::sync::Arc::clone(file),
            scope,
            found,
        })
    }

    /// What `validate_together(files, scope)` would return, if that is
    /// what was validated.
    pub fn result_for(
        self,
        files: &[&LoadedFile],
        scope: crate::schema::Scope,
    ) -> Option<Vec<Vec<Diagnostic>>> {
        let found = self.found.join().ok()?;
        let same =
            scope == self.scope && matches!(files, [only] if std::ptr::eq(*only, &*self.file));
        same.then_some(found)
    }
}

/// All loaded files of one policy, with lookup tables for bundles and
/// bodies by namespace and name.
#[derive(Debug, Default)]
pub struct PolicySet {
    pub files: Vec<std::sync::Arc<LoadedFile>>,
    /// By name: (namespace, file index, block index). Keyed by the name
    /// alone so that a lookup borrows its key instead of building one.
    bundles: FastMap<String, Vec<(String, usize, usize)>>,
    /// By name: (namespace, body type, file index, block index).
    bodies: FastMap<String, Vec<(String, String, usize, usize)>>,
    /// The namespaces that hold a body.
    body_namespaces: Vec<String>,
}

impl PolicySet {
    /// Adds a file; the first definition of a bundle or body wins lookups
    /// (duplicates are the validator's business).
    pub fn add(&mut self, file: LoadedFile) -> usize {
        let idx = self.files.len();
        for (bi, block) in file.tree.blocks.iter().enumerate() {
            match block {
                crate::syntax::ast::Block::Bundle(b) => {
                    let same = self
                        .bundles
                        .entry(b.name.name.as_str().to_owned())
                        .or_default();
                    if !same.iter().any(|(ns, ..)| *ns == b.namespace) {
                        same.push((b.namespace.clone(), idx, bi));
                    }
                }
                crate::syntax::ast::Block::Body(b) => {
                    let same = self
                        .bodies
                        .entry(b.name.name.as_str().to_owned())
                        .or_default();
                    if !same
                        .iter()
                        .any(|(ns, ty, ..)| *ns == b.namespace && *ty == b.body_type.name)
                    {
                        same.push((
                            b.namespace.clone(),
                            b.body_type.name.as_str().to_owned(),
                            idx,
                            bi,
                        ));
                    }
                    if !self.body_namespaces.contains(&b.namespace) {
                        self.body_namespaces.push(b.namespace.clone());
                    }
                }
            }
        }
        self.files.push(std::sync::Arc::new(file));
        idx
    }

    /// Adds the policy's entry file, the first (`__main__` becomes `main`).
    pub fn add_entry(&mut self, mut file: LoadedFile) {
        file.settle_main(true);
        self.add(file);
    }

    /// Whether some body is defined in namespace `ns`.
    pub fn has_bodies_in(&self, ns: &str) -> bool {
        self.body_namespaces.iter().any(|n| n == ns)
    }

    /// Whether a file with exactly this text is loaded.
    pub fn contains_text(&self, text: &str) -> bool {
        self.files.iter().any(|f| f.source.text == text)
    }

    /// A bundle by (namespace, name); `name` may carry its own `ns:` prefix.
    pub fn bundle(
        &self,
        ns: &str,
        name: &str,
    ) -> Option<(&std::sync::Arc<LoadedFile>, &crate::syntax::ast::Bundle)> {
        let (ns, name) = split_ns(ns, name);
        let &(_, fi, bi) = self.bundles.get(name)?.iter().find(|(n, ..)| n == ns)?;
        let file = &self.files[fi];
        match &file.tree.blocks[bi] {
            crate::syntax::ast::Block::Bundle(b) => Some((file, b)),
            _ => None,
        }
    }

    /// A body by (namespace, type, name); `name` may carry `ns:`. Bodies of
    /// the default namespace are found from any namespace.
    pub fn body(
        &self,
        ns: &str,
        body_type: &str,
        name: &str,
    ) -> Option<(&std::sync::Arc<LoadedFile>, &crate::syntax::ast::Body)> {
        let (ns, name) = split_ns(ns, name);
        let same = self.bodies.get(name)?;
        let find = |want: &str| same.iter().find(|(n, ty, ..)| n == want && ty == body_type);
        let &(_, _, fi, bi) = find(ns).or_else(|| find("default"))?;
        let file = &self.files[fi];
        match &file.tree.blocks[bi] {
            crate::syntax::ast::Block::Body(b) => Some((file, b)),
            _ => None,
        }
    }

    pub fn bundles(
        &self,
    ) -> impl Iterator<Item = (&std::sync::Arc<LoadedFile>, &crate::syntax::ast::Bundle)> {
        self.files
            .iter()
            .flat_map(|f| f.tree.bundles().map(move |b| (f, b)))
    }

    pub fn bodies(
        &self,
    ) -> impl Iterator<Item = (&std::sync::Arc<LoadedFile>, &crate::syntax::ast::Body)> {
        self.files
            .iter()
            .flat_map(|f| f.tree.bodies().map(move |b| (f, b)))
    }
}

/// `("ns", "x:b")` → `("x", "b")`; `("ns", "b")` → `("ns", "b")`.
/// The directory part of a policy file's path as cf-agent takes it: the
/// text before the last `/`, as written (`/a/./b.cf` is `/a/.`, where
/// `Path::parent` would drop the `.`); `/` for a file at the root, empty
/// for a bare name. `this.promise_dirname` and the base of relative
/// `inputs` are this.
pub fn dirname_text(path: &Path) -> std::path::PathBuf {
    let text = path.to_string_lossy();
    match text.rfind('/') {
        Some(0) => "/".into(),
        Some(i) => text[..i].into(),
        None => std::path::PathBuf::new(),
    }
}

pub fn split_ns<'a>(ns: &'a str, name: &'a str) -> (&'a str, &'a str) {
    match name.split_once(':') {
        Some((n, b)) => (n, b),
        None => (ns, name),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::ast::Block;

    fn bundles(f: &LoadedFile) -> Vec<String> {
        f.tree
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::Bundle(b) => Some(b.name.name.as_str().to_owned()),
                Block::Body(_) => None,
            })
            .collect()
    }

    #[test]
    fn dirname_is_the_text_before_the_last_slash() {
        let d = |p: &str| dirname_text(Path::new(p)).display().to_string();
        assert_eq!(d("/tmp/t/./k.cf"), "/tmp/t/.");
        assert_eq!(d("/a/./b/../up.cf"), "/a/./b/..");
        assert_eq!(d("/x.cf"), "/");
        assert_eq!(d("x.cf"), "");
    }

    #[test]
    fn main_bundles_run_only_from_the_entry() {
        let text = "bundle agent lib { }\nbundle agent __main__ { }\n";
        let mut entry = LoadedFile::from_text("e.cf", text.to_string());
        entry.settle_main(true);
        assert_eq!(bundles(&entry), ["lib", "main"]);
        let mut input = LoadedFile::from_text("i.cf", text.to_string());
        input.settle_main(false);
        assert_eq!(bundles(&input), ["lib"]);
    }
}
