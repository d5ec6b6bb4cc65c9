//! Diagnostics: what went wrong, where, and what would have been right.
//! Rendering to text happens here and nowhere else.

use super::source::{SourceFile, Span};
use std::fmt::Write as _;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    Warning,
    Error,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Diagnostic {
    pub severity: Severity,
    pub message: String,
    pub span: Span,
    /// A suggestion such as "did you mean 'content'?".
    pub help: Option<String>,
}

impl Diagnostic {
    pub fn error(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Error,
            message: message.into(),
            span,
            help: None,
        }
    }

    pub fn warning(span: Span, message: impl Into<String>) -> Diagnostic {
        Diagnostic {
            severity: Severity::Warning,
            message: message.into(),
            span,
            help: None,
        }
    }

    pub fn with_help(mut self, help: impl Into<String>) -> Diagnostic {
        self.help = Some(help.into());
        self
    }

    pub fn is_error(&self) -> bool {
        self.severity == Severity::Error
    }

    /// `file:line:col: error: message`, the source line, a caret under the
    /// span, and the help line if there is one.
    pub fn render(&self, file: &SourceFile) -> String {
        let (line, col) = file.line_col(self.span.start);
        let mut out = format!(
            "{}:{}:{}: {}: {}\n",
            file.path,
            line,
            col,
            self.severity.as_str(),
            self.message
        );
        let text = file.line_text(line);
        let gutter = line.to_string();
        let pad = " ".repeat(gutter.len());
        let _ = writeln!(out, "{pad} |");
        // The caret covers the span's part on this line, at least one column.
        let (end_line, end_col) = file.line_col(self.span.end);
        let width = if end_line == line && end_col > col {
            end_col - col
        } else {
            1
        };
        // A very long line is shown as a window around the caret.
        let chars: Vec<char> = text.chars().collect();
        let (from, to) = if chars.len() > SHOWN_LINE_CHARS {
            let from = (col - 1).saturating_sub(SHOWN_LINE_CHARS / 2);
            (from, (from + SHOWN_LINE_CHARS).min(chars.len()))
        } else {
            (0, chars.len())
        };
        let lead = if from > 0 { "..." } else { "" };
        let tail = if to < chars.len() { "..." } else { "" };
        let shown: String = chars[from..to].iter().collect();
        let _ = writeln!(out, "{gutter} | {lead}{}{tail}", shown.replace('\t', " "));
        let caret_col = col - 1 - from + lead.len();
        let width = width.min((to + lead.len()).saturating_sub(caret_col).max(1));
        let _ = writeln!(
            out,
            "{pad} | {}{}",
            " ".repeat(caret_col),
            "^".repeat(width)
        );
        if let Some(help) = &self.help {
            let _ = writeln!(out, "{pad} = help: {help}");
        }
        out
    }
}

/// How much of a long source line a diagnostic shows.
const SHOWN_LINE_CHARS: usize = 120;

/// How many diagnostics of one file are shown; a file that is not policy
/// at all would otherwise print one per token.
pub const SHOWN_PER_FILE: usize = 100;

/// The diagnostics of one file rendered, at most [`SHOWN_PER_FILE`] of
/// them, then how many more there are.
pub fn render_all<'a>(
    diags: impl IntoIterator<Item = &'a Diagnostic>,
    file: &SourceFile,
) -> String {
    let mut out = String::new();
    let mut more = 0;
    for (i, d) in diags.into_iter().enumerate() {
        if i < SHOWN_PER_FILE {
            out.push_str(&d.render(file));
        } else {
            more += 1;
        }
    }
    if more > 0 {
        let _ = writeln!(
            out,
            "{}: {more} more errors and warnings not shown",
            file.path
        );
    }
    out
}

/// The nearest candidate to `name` by edit distance, if it is near enough to
/// be a plausible typo.
pub fn suggest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let limit = (name.chars().count() / 3).clamp(1, 3);
    candidates
        .into_iter()
        .map(|c| (edit_distance(name, c), c))
        .filter(|&(d, c)| d <= limit && c != name)
        .min_by_key(|&(d, c)| (d, c))
        .map(|(_, c)| c)
}

/// Levenshtein distance over characters, with adjacent transpositions
/// counted as one edit (a common typo).
pub fn edit_distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev2: Vec<usize> = vec![0; b.len() + 1];
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(prev2[j - 2] + 1);
            }
            cur[j] = v;
        }
        std::mem::swap(&mut prev2, &mut prev);
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(edit_distance("content", "contnet"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("create", "craete"), 1);
        assert_eq!(
            suggest("contnet", ["content", "create", "comment"]),
            Some("content")
        );
        assert_eq!(suggest("zzzz", ["content"]), None);
    }

    #[test]
    fn render_points_at_column() {
        let f = SourceFile::new("p.cf", "bundle agent x\n{\n  varz:\n}\n");
        let d = Diagnostic::error(Span::new(19, 24), "unknown promise type 'varz'")
            .with_help("did you mean 'vars'?");
        let text = d.render(&f);
        assert!(text.starts_with("p.cf:3:3: error: unknown promise type 'varz'\n"));
        assert!(text.contains("3 |   varz:\n"));
        assert!(text.contains("  |   ^^^^^\n"));
        assert!(text.contains("did you mean 'vars'?"));
    }

    /// A fuzzer-found file was one 28 KB line of `;`: each of its errors
    /// printed the whole line (1.2 GB in all).
    #[test]
    fn long_lines_show_a_window_around_the_caret() {
        let line = format!("{}X{}", "a".repeat(500), "b".repeat(500));
        let f = SourceFile::new("p.cf", format!("{line}\n"));
        let text = Diagnostic::error(Span::new(500, 501), "here").render(&f);
        let shown = text.lines().nth(2).unwrap();
        let caret = text.lines().nth(3).unwrap();
        assert!(
            shown.starts_with("1 | ...") && shown.ends_with("..."),
            "{shown}"
        );
        assert!(shown.len() < 140, "{shown}");
        let x = shown.find('X').unwrap();
        assert_eq!(caret.find('^'), Some(x), "{text}");
    }

    #[test]
    fn a_file_shows_its_first_hundred_diagnostics() {
        let f = SourceFile::new("p.cf", ";".repeat(150));
        let diags: Vec<Diagnostic> = (0..150)
            .map(|i| Diagnostic::error(Span::new(i, i + 1), "unexpected ';'"))
            .collect();
        let text = render_all(&diags, &f);
        assert_eq!(
            text.matches("error: unexpected ';'").count(),
            SHOWN_PER_FILE
        );
        assert!(
            text.ends_with("p.cf: 50 more errors and warnings not shown\n"),
            "{text}"
        );
    }
}
