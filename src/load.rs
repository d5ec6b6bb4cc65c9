//! Reads policy files from disk and parses them, keeping each file's text
//! so that diagnostics can be rendered later.

use crate::syntax::ast::PolicyFile;
use crate::syntax::{Diagnostic, SourceFile, parse};
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
            source: SourceFile::new(path, text),
            tree: parsed.file,
            diagnostics: parsed.diagnostics,
        }
    }

    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }

    /// Every diagnostic rendered, in source order.
    pub fn render_diagnostics(&self) -> String {
        self.diagnostics
            .iter()
            .map(|d| d.render(&self.source))
            .collect()
    }
}

/// Reads and parses one file. Invalid UTF-8 is replaced, not fatal: a
/// policy with a stray Latin-1 byte in a comment still loads.
pub fn load_file(path: &Path) -> Result<LoadedFile, LoadError> {
    let bytes = std::fs::read(path).map_err(|source| LoadError::Read {
        path: path.display().to_string(),
        source,
    })?;
    let text = match String::from_utf8(bytes) {
        Ok(t) => t,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    Ok(LoadedFile::from_text(&path.display().to_string(), text))
}
