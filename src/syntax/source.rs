//! Source text, byte spans and line/column lookup.
//!
//! Spans are byte ranges into one file's text; line and column are only
//! computed when something is printed, so the parser never pays for them.

use serde::Serialize;

/// A half-open byte range `[start, end)` into a source file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct Span {
    pub start: u32,
    pub end: u32,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            start: start as u32,
            end: end as u32,
        }
    }

    /// The smallest span covering both `self` and `other`.
    pub fn to(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }

    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.end as usize
    }
}

/// One policy file's name and text, with the byte offsets of its line starts.
#[derive(Debug, Clone)]
pub struct SourceFile {
    pub path: String,
    pub text: String,
    line_starts: Vec<u32>,
}

/// Where each line of `text` starts. memchr finds the line ends a word at
/// a time (a filter over the bytes took a step per byte: 3% of a 5 MB
/// check), and counting them first sizes the table exactly: a file's
/// table lives as long as the run.
pub fn line_starts(text: &str) -> Vec<u32> {
    let bytes = text.as_bytes();
    let mut starts = Vec::with_capacity(crate::scan::memchr_count(b'\n', bytes) + 1);
    starts.push(0);
    crate::scan::for_each_position(b'\n', bytes, |i| starts.push((i + 1) as u32));
    starts
}

impl SourceFile {
    pub fn new(path: impl Into<String>, text: impl Into<String>) -> SourceFile {
        let text = text.into();
        let line_starts = line_starts(&text);
        SourceFile::with_line_starts(path, text, line_starts)
    }

    /// A source whose line table is made already (the parser's).
    pub fn with_line_starts(
        path: impl Into<String>,
        text: String,
        line_starts: Vec<u32>,
    ) -> SourceFile {
        SourceFile {
            path: path.into(),
            text,
            line_starts,
        }
    }

    /// 1-based line number of a byte offset.
    pub fn line_of(&self, offset: u32) -> usize {
        match self.line_starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }

    /// 1-based line and column (in characters) of a byte offset.
    pub fn line_col(&self, offset: u32) -> (usize, usize) {
        let line = self.line_of(offset);
        let start = self.line_starts[line - 1] as usize;
        let end = (offset as usize).min(self.text.len());
        let col = self
            .text
            .get(start..end)
            .map(|s| s.chars().count())
            .unwrap_or(end - start);
        (line, col + 1)
    }

    /// The text of a 1-based line, without its line terminator.
    pub fn line_text(&self, line: usize) -> &str {
        if line == 0 || line > self.line_starts.len() {
            return "";
        }
        let start = self.line_starts[line - 1] as usize;
        let end = self
            .line_starts
            .get(line)
            .map(|&e| e as usize)
            .unwrap_or(self.text.len());
        let s = &self.text[start..end];
        s.trim_end_matches('\n').trim_end_matches('\r')
    }

    pub fn slice(&self, span: Span) -> &str {
        self.text.get(span.range()).unwrap_or("")
    }

    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column() {
        let f = SourceFile::new("x.cf", "ab\r\ncdé\nf");
        assert_eq!(f.line_col(0), (1, 1));
        assert_eq!(f.line_col(4), (2, 1));
        assert_eq!(f.line_col(8), (2, 4));
        assert_eq!(f.line_text(1), "ab");
        assert_eq!(f.line_text(2), "cdé");
        assert_eq!(f.line_text(3), "f");
        assert_eq!(f.line_of(9), 3);
    }
}
