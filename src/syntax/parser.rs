//! The policy parser: recursive descent over the token stream, built so
//! that it never gives up. Every mistake becomes a diagnostic and the parser
//! resynchronises at the next `;`, promise type, class guard, `}` or block
//! keyword, so one missing `;` is reported once.

use super::MAX_NESTING;
use super::ast::*;
use super::diagnostic::Diagnostic;
use super::lexer::{Lexed, Tok, Token, lex, lex_from, unquote};
use super::source::Span;

/// The tree of one file and everything that was wrong with it.
#[derive(Debug, Default)]
pub struct Parsed {
    pub file: PolicyFile,
    pub diagnostics: Vec<Diagnostic>,
    /// Where each line starts, made for the parser's messages and handed
    /// on so that the file's source need not scan its text again.
    pub line_starts: Vec<u32>,
}

impl Parsed {
    pub fn has_errors(&self) -> bool {
        self.diagnostics.iter().any(Diagnostic::is_error)
    }
}

/// Files at least this big are read in two halves, one on a second
/// thread: a thread costs tens of microseconds to start, a quarter of a
/// MiB hundreds to read.
const SPLIT_MIN: usize = 256 * 1024;

/// Parses one file's text. `path` is only recorded in the tree.
pub fn parse(path: &str, src: &str) -> Parsed {
    let line_starts = super::source::line_starts(src);
    let piece = split_point(src)
        .and_then(|at| parse_halves(src, &line_starts, at))
        .unwrap_or_else(|| parse_piece(src, &line_starts, lex(src)));
    let mut diagnostics = piece.diagnostics;
    diagnostics.sort_by_key(|d| d.span.start);
    Parsed {
        file: PolicyFile {
            path: path.to_string(),
            blocks: piece.blocks,
        },
        diagnostics,
        line_starts,
    }
}

/// The blocks of a run of tokens and what was wrong with them.
struct Piece {
    blocks: Vec<Block>,
    diagnostics: Vec<Diagnostic>,
    /// It ends between blocks, outside any string, in the default
    /// namespace and without an error: the text after it reads the same
    /// on its own as after it.
    clean_end: bool,
}

fn parse_piece(src: &str, line_starts: &[u32], lexed: Lexed) -> Piece {
    let mut p = Parser {
        src,
        toks: &lexed.tokens,
        pos: 0,
        depth: 0,
        diags: lexed.diagnostics,
        namespace: "default".to_string(),
        line_starts,
        rval_scratch: Vec::new(),
        attr_scratch: Vec::new(),
        ends_unterminated: lexed
            .tokens
            .last()
            .is_some_and(|t| t.kind == Tok::Unterminated),
    };
    p.check_reference_nesting();
    let blocks = p.file();
    let clean_end = !p.ends_unterminated
        && p.namespace == "default"
        && !p.diags.iter().any(Diagnostic::is_error);
    Piece {
        blocks,
        diagnostics: p.diags,
        clean_end,
    }
}

/// A line in the second half of a big file that starts with a block
/// keyword: where a second thread can start reading, if the first half
/// turns out to end there between blocks.
fn split_point(src: &str) -> Option<usize> {
    if src.len() < SPLIT_MIN {
        return None;
    }
    let bytes = src.as_bytes();
    let mid = src.len() / 2;
    crate::scan::memchr_iter(b'\n', &bytes[mid..])
        .map(|i| mid + i + 1)
        .find(|&at| {
            BLOCK_KEYWORDS.iter().any(|k| {
                bytes[at..].starts_with(k.as_bytes())
                    && matches!(bytes.get(at + k.len()), Some(b' ' | b'\t'))
            })
        })
}

/// Reads the text before `at` here and the rest on a second thread; `None`
/// when the first half does not end cleanly between blocks (then the
/// second half may have been read in the wrong state: the caller reads
/// the whole text in one go).
fn parse_halves(src: &str, line_starts: &[u32], at: usize) -> Option<Piece> {
    std::thread::scope(|s| {
        // The parser's depth limit is sized for the main thread's stack.
        let second = std::thread::Builder::new()
            .stack_size(8 << 20)
            .spawn_scoped(s, || parse_piece(src, line_starts, lex_from(src, at)))
            .ok()?;
        let mut first = parse_piece(src, line_starts, lex(&src[..at]));
        let second = second.join().ok()?;
        if !first.clean_end {
            return None;
        }
        first.blocks.extend(second.blocks);
        first.diagnostics.extend(second.diagnostics);
        Some(Piece {
            clean_end: second.clean_end,
            ..first
        })
    })
}

struct Parser<'a> {
    src: &'a str,
    toks: &'a [Token],
    pos: usize,
    /// How many calls and lists enclose the value being read; at most
    /// [`MAX_NESTING`], so that reading (and everything after it that
    /// walks the tree) stays well inside the stack.
    depth: usize,
    diags: Vec<Diagnostic>,
    /// Set by `body file control { namespace => "..." }` for the blocks after it.
    namespace: String,
    /// The text ends inside a string that is never closed; errors at the
    /// end of the file are consequences of it and are not reported.
    ends_unterminated: bool,
    /// Where each line starts, so that the line of an offset is a binary
    /// search, not a scan of the text before it.
    line_starts: &'a [u32],
    /// The items of the lists and the arguments of the calls being read,
    /// innermost last: each value is collected here and moved out in one
    /// allocation of the right size, instead of a vector grown item by
    /// item and shrunk at the end (three allocations for most values).
    rval_scratch: Vec<Rval>,
    /// The same for the attributes of the promise being read.
    attr_scratch: Vec<Attribute>,
}

const BLOCK_KEYWORDS: [&str; 3] = ["bundle", "body", "promise"];

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<Token> {
        self.toks.get(self.pos).copied()
    }

    fn peek_kind(&self) -> Option<Tok> {
        self.peek().map(|t| t.kind)
    }

    fn peek_at(&self, n: usize) -> Option<Token> {
        self.toks.get(self.pos + n).copied()
    }

    fn bump(&mut self) -> Option<Token> {
        let t = self.peek();
        if t.is_some() {
            self.pos += 1;
        }
        t
    }

    fn text(&self, t: Token) -> &'a str {
        &self.src[t.span.range()]
    }

    fn eof_span(&self) -> Span {
        let n = self.src.len();
        // Point at the last character rather than past the end.
        let start = self.src[..n].char_indices().last().map_or(0, |(i, _)| i);
        Span::new(start, n)
    }

    fn here(&self) -> Span {
        self.peek().map_or_else(|| self.eof_span(), |t| t.span)
    }

    fn is_block_keyword(&self, t: Token) -> bool {
        t.kind == Tok::Word && BLOCK_KEYWORDS.contains(&self.text(t))
    }

    /// The line (from 1) of a byte offset.
    fn line_of(&self, offset: u32) -> usize {
        match self.line_starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }

    /// True when the token is the first on its line: no token ends on its
    /// line before it.
    fn starts_line(&self, t: Token) -> bool {
        let line_start = self.line_starts[self.line_of(t.span.start) - 1];
        let idx = self.toks.partition_point(|x| x.span.start < t.span.start);
        idx == 0 || self.toks[idx - 1].span.end <= line_start
    }

    fn describe(&self, t: Option<Token>) -> String {
        let Some(t) = t else {
            return "end of file".to_string();
        };
        let text = self.text(t);
        let short: String = if text.chars().count() > 40 {
            let mut s: String = text.chars().take(37).collect();
            s.push_str("...");
            s
        } else {
            text.to_string()
        };
        match t.kind {
            Tok::Word => format!("name '{short}'"),
            Tok::PromiseType => format!("promise type '{short}'"),
            Tok::ClassGuard | Tok::QuotedGuard => format!("class guard '{short}'"),
            Tok::Str => format!("string {short}"),
            Tok::NakedVar => format!("variable {short}"),
            Tok::Unterminated => "a string that is never closed".to_string(),
            Tok::Unknown => format!("unexpected character '{}'", short.escape_debug()),
            _ => format!("'{short}'"),
        }
    }

    /// Describes the current token; when the error is reported on an
    /// earlier line than the token, says where the token is.
    fn describe_from(&self, span: Span) -> String {
        let found = self.describe(self.peek());
        let Some(t) = self.peek() else {
            return found;
        };
        let line = self.line_of(t.span.start);
        if self.line_of(span.start) < line {
            format!("{found} on line {line}")
        } else {
            found
        }
    }

    fn error(&mut self, span: Span, msg: impl Into<String>) {
        self.diags.push(Diagnostic::error(span, msg));
    }

    /// Reports "expected X, found Y" at the current token: for a token that
    /// should start something new (a statement, a block), the found token
    /// is the mistake.
    fn expected(&mut self, what: &str) {
        let span = self.here();
        self.expected_at(what, span);
    }

    /// Reports "expected X, found Y" for something that belongs right after
    /// the previous token (a name, a value, a separator, a closing bracket).
    /// When the found token is on a later line, the mistake is at the end
    /// of the previous line, so that is where the error points.
    fn expected_after(&mut self, what: &str) {
        match self.after_previous() {
            Some(span) => self.expected_at(what, span),
            None => self.expected(what),
        }
    }

    /// A zero-width span just after the previous token, when the current
    /// token (or the end of the file) is on a later line.
    fn after_previous(&self) -> Option<Span> {
        let prev = self.toks.get(self.pos.checked_sub(1)?)?;
        let next_start = self
            .peek()
            .map_or(self.src.len(), |t| t.span.start as usize);
        let end = prev.span.end as usize;
        self.src[end..next_start]
            .contains('\n')
            .then(|| Span::new(end, end))
    }

    fn expected_at(&mut self, what: &str, span: Span) {
        if self.peek_kind() == Some(Tok::Unterminated) {
            self.unterminated_here();
            return;
        }
        if self.peek().is_none() && self.ends_unterminated {
            return;
        }
        let found = self.describe_from(span);
        if self.runaway_string(&format!("{what}, found {found}")) {
            return;
        }
        self.error(span, format!("expected {what}, found {found}"));
    }

    /// The current token is a string that runs to the end of the file.
    /// It is reported once, unless an earlier mistake explains it (an
    /// unbalanced quote earlier on pairs the quotes up wrongly).
    fn unterminated_here(&mut self) {
        let span = self.here();
        if !self.diags.iter().any(Diagnostic::is_error) {
            let quote_end = span.start as usize + 1;
            self.diags.push(
                Diagnostic::error(
                    Span::new(span.start as usize, quote_end),
                    "this string is never closed",
                )
                .with_help("add the closing quote; the string runs to the end of the file"),
            );
        }
        // Nothing after an unterminated string can be read.
        self.pos = self.toks.len();
    }

    /// When the token just read is a string that spans lines and what
    /// follows it does not parse, the likeliest mistake is a missing
    /// closing quote at the string's start: the string then ends at the
    /// opening quote of the next string. Reports that instead and returns
    /// true.
    fn runaway_string(&mut self, expected_found: &str) -> bool {
        let Some(prev) = self
            .pos
            .checked_sub(1)
            .and_then(|i| self.toks.get(i))
            .copied()
        else {
            return false;
        };
        let text = self.text(prev);
        if prev.kind != Tok::Str || !text.contains('\n') {
            return false;
        }
        let first_line = text.find('\n').unwrap_or(text.len());
        let start = prev.span.start as usize;
        let end_line = self.line_of(prev.span.end);
        self.diags.push(
            Diagnostic::error(
                Span::new(start, start + first_line),
                format!("this string runs on to line {end_line}; is its closing quote missing?"),
            )
            .with_help(format!(
                "after the string, on line {end_line}, the parser expected {expected_found}"
            )),
        );
        true
    }

    fn ident(&self, t: Token) -> Ident {
        Ident {
            name: self.text(t).into(),
            span: t.span,
        }
    }

    // ---- top level -------------------------------------------------------

    fn file(&mut self) -> Vec<Block> {
        let mut blocks = Vec::new();
        while let Some(t) = self.peek() {
            if self.is_block_keyword(t) {
                if let Some(b) = self.block() {
                    blocks.push(b);
                }
            } else {
                self.expected("'bundle', 'body' or 'promise'");
                self.skip_to_block_keyword();
            }
        }
        blocks
    }

    fn skip_to_block_keyword(&mut self) {
        while let Some(t) = self.peek() {
            if self.is_block_keyword(t) && self.starts_line(t) {
                return;
            }
            self.pos += 1;
        }
    }

    fn block(&mut self) -> Option<Block> {
        let kw = self.bump()?;
        let keyword = self.text(kw);
        let what = match keyword {
            "bundle" => "bundle type (agent, common, edit_line, ...)",
            "promise" => "the agent type 'agent' after 'promise'",
            _ => "body type (perms, classes, ...)",
        };
        let block_type = match self.peek() {
            Some(t) if t.kind == Tok::Word => {
                self.pos += 1;
                self.ident(t)
            }
            _ => {
                self.expected_after(what);
                self.skip_to_block_keyword();
                return None;
            }
        };
        let name = match self.peek() {
            Some(t) if t.kind == Tok::Word => {
                self.pos += 1;
                self.ident(t)
            }
            _ => {
                self.expected_after(&format!("a name for this {keyword}"));
                self.skip_to_block_keyword();
                return None;
            }
        };
        let params = if self.peek_kind() == Some(Tok::LParen) {
            self.params()
        } else {
            Vec::new()
        };
        if self.peek_kind() != Some(Tok::LBrace) {
            self.expected_after(&format!("'{{' to open {keyword} '{}'", name.name));
            self.skip_to_block_keyword();
            return None;
        }
        let open = self.bump()?;
        let namespace = self.namespace.clone();
        if keyword == "bundle" {
            let sections = self.bundle_body(&name);
            let end = self.close_block(open, keyword, &name);
            Some(Block::Bundle(Bundle {
                namespace,
                bundle_type: block_type,
                name,
                params,
                sections,
                span: kw.span.to(end),
            }))
        } else {
            let attributes = self.body_body();
            let end = self.close_block(open, keyword, &name);
            let kind = if keyword == "promise" {
                BodyKind::Promise
            } else {
                BodyKind::Body
            };
            let body = Body {
                kind,
                namespace,
                body_type: block_type,
                name,
                params,
                attributes,
                span: kw.span.to(end),
            };
            if body.kind == BodyKind::Body
                && body.body_type.name == "file"
                && body.name.name == "control"
            {
                self.file_control_namespace(&body);
            }
            Some(Block::Body(body))
        }
    }

    /// `body file control { namespace => "x"; }` switches the namespace of
    /// the blocks that follow it in this file.
    fn file_control_namespace(&mut self, body: &Body) {
        for a in body.attributes_named("namespace") {
            match &a.attr.value {
                Rval::String(s) => self.namespace = s.value.as_str().to_owned(),
                other => self.error(other.span(), "namespace must be a constant quoted string"),
            }
        }
    }

    /// Consumes the closing `}` of a block, or reports it missing: just
    /// after the block's last token when what follows is on a later line
    /// (usually the next block's keyword), else at what was found.
    fn close_block(&mut self, open: Token, keyword: &str, name: &Ident) -> Span {
        if let Some(t) = self.peek().filter(|t| t.kind == Tok::RBrace) {
            self.pos += 1;
            return t.span;
        }
        let last = self
            .toks
            .get(self.pos.saturating_sub(1))
            .map_or(open.span, |t| t.span);
        if self.peek_kind() == Some(Tok::Unterminated) {
            self.unterminated_here();
            return last;
        }
        if self.peek().is_none() && self.ends_unterminated {
            if !self.diags.iter().any(Diagnostic::is_error) {
                // Recovery skipped the string; it still deserves its error.
                self.pos = self.toks.len() - 1;
                self.unterminated_here();
            }
            return last;
        }
        let span = self.after_previous().unwrap_or_else(|| self.here());
        let found = self.describe_from(span);
        let line = self.line_of(open.span.start);
        self.diags.push(
            Diagnostic::error(
                span,
                format!(
                    "expected '}}' to close {keyword} '{}', found {found}",
                    name.name
                ),
            )
            .with_help(format!("the {keyword} was opened on line {line}")),
        );
        last
    }

    fn params(&mut self) -> Vec<Ident> {
        self.pos += 1; // (
        let mut params = Vec::new();
        loop {
            match self.peek() {
                Some(t) if t.kind == Tok::RParen => {
                    self.pos += 1;
                    return params;
                }
                Some(t) if t.kind == Tok::Word => {
                    self.pos += 1;
                    params.push(self.ident(t));
                    match self.peek_kind() {
                        Some(Tok::Comma) => self.pos += 1,
                        Some(Tok::RParen) => {}
                        _ => {
                            self.expected_after("',' or ')' in the parameter list");
                            self.skip_past(Tok::RParen);
                            return params;
                        }
                    }
                }
                _ => {
                    self.expected_after("a parameter name or ')'");
                    self.skip_past(Tok::RParen);
                    return params;
                }
            }
        }
    }

    fn skip_past(&mut self, kind: Tok) {
        while let Some(t) = self.peek() {
            if t.kind == kind {
                self.pos += 1;
                return;
            }
            if matches!(t.kind, Tok::LBrace | Tok::RBrace | Tok::Semi) || self.is_block_keyword(t) {
                return;
            }
            self.pos += 1;
        }
    }

    // ---- bundles ----------------------------------------------------------

    fn bundle_body(&mut self, bundle_name: &Ident) -> Vec<Section> {
        let mut sections: Vec<Section> = Vec::new();
        let mut guard = ClassGuard::any();
        // Once a bundle has been told it lacks a promise type, what follows
        // the same mistake is not reported again.
        let mut typeless_reported = false;
        while let Some(t) = self.peek() {
            match t.kind {
                Tok::RBrace => break,
                Tok::PromiseType => {
                    self.pos += 1;
                    let text = self.text(t);
                    sections.push(Section {
                        promise_type: Ident {
                            name: text[..text.len() - 1].into(),
                            span: Span::new(t.span.start as usize, t.span.end as usize - 1),
                        },
                        promises: Vec::new(),
                        span: t.span,
                    });
                    guard = ClassGuard::any();
                }
                Tok::ClassGuard | Tok::QuotedGuard => {
                    self.pos += 1;
                    let g = self.guard(t);
                    if sections.is_empty() && !typeless_reported {
                        typeless_reported = true;
                        self.error(
                            t.span,
                            format!(
                                "class guard '{}::' before any promise type in bundle '{}'",
                                g.expr, bundle_name.name
                            ),
                        );
                    }
                    guard = g;
                }
                Tok::Str => {
                    let promise = self.promise(guard.clone());
                    match sections.last_mut() {
                        Some(s) => {
                            if let Some(p) = promise {
                                s.span = s.span.to(p.span);
                                s.promises.push(p);
                            }
                        }
                        None if typeless_reported => {}
                        None => {
                            typeless_reported = true;
                            self.diags.push(
                                Diagnostic::error(
                                    t.span,
                                    format!(
                                        "promise before any promise type in bundle '{}'",
                                        bundle_name.name
                                    ),
                                )
                                .with_help("start a section with a promise type, e.g. 'vars:'"),
                            );
                        }
                    }
                }
                _ if self.is_block_keyword(t) && self.starts_line(t) => break,
                _ => {
                    if sections.is_empty() {
                        typeless_reported = true;
                        self.expected("a promise type such as 'vars:'");
                        self.help_promise_type_colon(t);
                    } else {
                        self.expected("a promiser string, a promise type or a class guard");
                    }
                    self.recover_in_bundle();
                }
            }
        }
        // The tree lives as long as the run: no room is kept for growth.
        for s in &mut sections {
            s.promises.shrink_to_fit();
        }
        sections
    }

    /// A name where a promise type belongs is usually a promise type
    /// whose colon is missing or set apart.
    fn help_promise_type_colon(&mut self, t: Token) {
        let name = self.text(t);
        if t.kind != Tok::Word || !name.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_') {
            return;
        }
        if let Some(d) = self.diags.last_mut().filter(|d| d.span == t.span) {
            d.help = Some(format!(
                "a promise type is written with its colon attached: '{name}:'"
            ));
        }
    }

    /// Reads a class guard token; the validator checks its expression.
    fn guard(&self, t: Token) -> ClassGuard {
        let text = self.text(t);
        let body = &text[..text.len() - 2];
        if t.kind == Tok::QuotedGuard {
            ClassGuard {
                // cf-promises takes a quoted guard's text as written.
                expr: body[1..body.len() - 1].into(),
                span: t.span,
                quoted: true,
            }
        } else {
            ClassGuard {
                expr: body.into(),
                span: t.span,
                quoted: false,
            }
        }
    }

    /// Skips to a point where a bundle statement can start again.
    fn recover_in_bundle(&mut self) {
        let mut depth = 0usize;
        let start = self.pos;
        while let Some(t) = self.peek() {
            match t.kind {
                Tok::Semi if depth == 0 => {
                    self.pos += 1;
                    return;
                }
                Tok::LBrace => depth += 1,
                Tok::RBrace if depth == 0 => return,
                Tok::RBrace => depth -= 1,
                Tok::PromiseType | Tok::ClassGuard | Tok::QuotedGuard if depth == 0 => return,
                Tok::Str if depth == 0 && self.pos > start && self.starts_line(t) => return,
                _ if self.is_block_keyword(t) && self.starts_line(t) => return,
                _ => {}
            }
            self.pos += 1;
        }
    }

    fn promise(&mut self, guard: ClassGuard) -> Option<Promise> {
        let t = self.bump()?;
        let promiser = self.string_lit(t);
        let mut promisee = None;
        if self.peek_kind() == Some(Tok::ThinArrow) {
            self.pos += 1;
            promisee = self.rval(RvalContext::Promisee);
            if promisee.is_none() {
                self.recover_in_bundle();
                return None;
            }
        }
        self.attr_scratch.clear();
        let mut end = promisee.as_ref().map_or(promiser.span, Rval::span);
        loop {
            match self.peek() {
                Some(t) if t.kind == Tok::Semi => {
                    self.pos += 1;
                    end = t.span;
                    break;
                }
                Some(t)
                    if t.kind == Tok::Word
                        && self.peek_at(1).map(|n| n.kind) == Some(Tok::FatArrow) =>
                {
                    let Some(attr) = self.attribute() else {
                        // A promise that lost an attribute would mislead
                        // the validator; it is left out of the tree.
                        self.recover_in_bundle();
                        return None;
                    };
                    end = attr.span;
                    self.attr_scratch.push(attr);
                    match self.peek_kind() {
                        Some(Tok::Comma) => {
                            let comma = self.bump()?;
                            let next_is_attr = self.peek().is_some_and(|n| {
                                n.kind == Tok::Word
                                    && self.peek_at(1).map(|m| m.kind) == Some(Tok::FatArrow)
                            });
                            if !next_is_attr {
                                self.diags.push(
                                    Diagnostic::error(
                                        self.here(),
                                        format!(
                                            "expected another attribute after ',', found {}",
                                            self.describe(self.peek())
                                        ),
                                    )
                                    .with_help(format!(
                                        "remove the ',' on line {} or add an attribute",
                                        self.line_of(comma.span.start)
                                    )),
                                );
                                if self.peek_kind() == Some(Tok::Semi) {
                                    self.pos += 1;
                                } else {
                                    self.recover_in_bundle();
                                }
                                break;
                            }
                        }
                        Some(Tok::Semi) => {}
                        _ => {
                            self.missing_semicolon(end);
                            break;
                        }
                    }
                }
                Some(t) if t.kind == Tok::Word => {
                    let what = format!("'=>' after the attribute name '{}'", self.text(t));
                    let found = self.describe(self.peek_at(1));
                    if !self.runaway_string(&format!("{what}, found {found}")) {
                        self.pos += 1;
                        self.expected_after(&what);
                    }
                    self.recover_in_bundle();
                    return None;
                }
                _ => {
                    if self.attr_scratch.is_empty() {
                        self.missing_semicolon_after(end, "the promiser");
                    } else {
                        self.missing_semicolon(end);
                    }
                    break;
                }
            }
        }
        // Moved out in one copy, into a vector of the exact size.
        let mut attributes = Vec::with_capacity(self.attr_scratch.len());
        attributes.append(&mut self.attr_scratch);
        Some(Promise {
            guard,
            promiser,
            promisee: promisee.map(Box::new),
            attributes,
            span: t.span.to(end),
        })
    }

    fn missing_semicolon(&mut self, after: Span) {
        self.missing_semicolon_after(after, "the last attribute");
    }

    /// A promise ended without `;`: report it once at the end of what was
    /// read, then recover where the next statement plausibly starts.
    fn missing_semicolon_after(&mut self, after: Span, what: &str) {
        let next = self.peek();
        if next.is_some_and(|t| t.kind == Tok::Unterminated) {
            self.unterminated_here();
            return;
        }
        if next.is_none() && self.ends_unterminated {
            return;
        }
        let found = self.describe(next);
        if !self.runaway_string(&format!("';' after {what}, found {found}")) {
            let at = if (after.end as usize) < self.src.len() {
                Span::new(after.end as usize, after.end as usize)
            } else {
                after
            };
            self.diags.push(
                Diagnostic::error(at, format!("expected ';' after {what}, found {found}"))
                    .with_help("every promise ends with ';'"),
            );
        }
        // When the next token begins a new statement, resume there without
        // skipping; otherwise skip the garbage.
        let resumable = match next {
            None => true,
            Some(t) => {
                matches!(
                    t.kind,
                    Tok::Str | Tok::PromiseType | Tok::ClassGuard | Tok::QuotedGuard | Tok::RBrace
                ) || self.is_block_keyword(t)
            }
        };
        if !resumable {
            self.recover_in_bundle();
        }
    }

    fn attribute(&mut self) -> Option<Attribute> {
        let name_tok = self.bump()?;
        let name = self.ident(name_tok);
        self.pos += 1; // =>
        let value = self.rval(RvalContext::Attribute)?;
        let span = name.span.to(value.span());
        Some(Attribute { name, value, span })
    }

    fn string_lit(&self, t: Token) -> StringLit {
        let raw = self.text(t);
        let quote = match raw.as_bytes()[0] {
            b'\'' => Quote::Single,
            b'`' => Quote::Backtick,
            _ => Quote::Double,
        };
        StringLit {
            value: unquote(raw),
            quote,
            span: t.span,
        }
    }

    // ---- values -----------------------------------------------------------

    fn rval(&mut self, ctx: RvalContext) -> Option<Rval> {
        let Some(t) = self.peek() else {
            self.expected_after("a value");
            return None;
        };
        match t.kind {
            Tok::Str => {
                self.pos += 1;
                Some(Rval::String(self.string_lit(t)))
            }
            // A bundle or body named by a variable: `$(handler)(args)`.
            Tok::NakedVar if self.peek_at(1).map(|n| n.kind) == Some(Tok::LParen) => {
                self.pos += 1;
                self.call(t)
            }
            Tok::NakedVar => {
                self.pos += 1;
                Some(Rval::NakedVar {
                    text: self.text(t).to_string(),
                    span: t.span,
                })
            }
            Tok::Word => {
                self.pos += 1;
                if self.peek_kind() == Some(Tok::LParen) {
                    self.call(t)
                } else {
                    Some(Rval::Symbol(self.ident(t)))
                }
            }
            Tok::LBrace if ctx != RvalContext::Argument => self.list(ctx),
            Tok::LBrace => {
                self.error(
                    t.span,
                    "a list cannot be a function argument; pass a variable such as @(mylist)",
                );
                // Keep it as the argument, so that the call still has as
                // many arguments as were written.
                self.list(RvalContext::Attribute)
            }
            _ => {
                self.expected_after("a value (a quoted string, a list, a function call or a name)");
                None
            }
        }
    }

    /// Variable references nested deeper than [`MAX_NESTING`] in a string
    /// (`"$($($(...)))"`) are an error where the first one too many opens:
    /// expanding them is recursive.
    fn check_reference_nesting(&mut self) {
        for t in self.toks {
            if !matches!(
                t.kind,
                Tok::Str | Tok::NakedVar | Tok::QuotedGuard | Tok::ClassGuard
            ) {
                continue;
            }
            if let Some(at) = super::reference_too_deep(self.text(*t)) {
                let start = t.span.start as usize + at;
                self.diags.push(
                    Diagnostic::error(
                        Span::new(start, start + 2),
                        format!(
                            "variable references nested too deeply: expected at most {MAX_NESTING} levels of '$(' inside '$(', found more"
                        ),
                    )
                    .with_help(
                        "the agent refuses deeper nesting rather than exhaust its stack; build the name in steps, with variables",
                    ),
                );
            }
        }
    }

    /// Reports a call or list opened at `open` one level deeper than
    /// [`MAX_NESTING`]. The caller gives up on the value; the brackets
    /// around it are skipped without recursion.
    fn too_deep(&mut self, open: Span) {
        self.diags.push(
            Diagnostic::error(
                open,
                format!(
                    "nested too deeply: expected at most {MAX_NESTING} levels of function calls and lists, found more"
                ),
            )
            .with_help(
                "the agent refuses deeper nesting rather than exhaust its stack; put inner values in variables of their own",
            ),
        );
    }

    fn list(&mut self, ctx: RvalContext) -> Option<Rval> {
        let open = self.peek()?;
        if ctx == RvalContext::ListItem {
            // One error for the inner list, whatever it holds; its items
            // are not read (they cannot be used), so that `{{{...}}}` is
            // neither an error per level nor a recursion per level.
            self.pos += 1;
            self.error(
                open.span,
                "lists cannot be nested; use a data container for nested structures",
            );
            let end = self.skip_bracketed(Tok::RBrace).unwrap_or(open.span);
            return Some(Rval::List {
                items: Vec::new(),
                span: open.span.to(end),
            });
        }
        if self.depth >= MAX_NESTING {
            self.too_deep(open.span);
            return None;
        }
        self.depth += 1;
        let r = self.list_items();
        self.depth -= 1;
        r
    }

    fn list_items(&mut self) -> Option<Rval> {
        let open = self.bump()?;
        let start = self.rval_scratch.len();
        // One error per list: after a missing or doubled ',' the items go
        // on being read as if it were right.
        let mut reported = false;
        loop {
            match self.peek() {
                Some(t) if t.kind == Tok::RBrace => {
                    self.pos += 1;
                    let items = take_from(&mut self.rval_scratch, start);
                    return Some(Rval::List {
                        items,
                        span: open.span.to(t.span),
                    });
                }
                Some(t) if t.kind == Tok::Comma => {
                    if !reported {
                        self.expected_after(
                            "a value (a quoted string, a list, a function call or a name)",
                        );
                        reported = true;
                    }
                    self.pos += 1;
                }
                Some(_) => {
                    let Some(item) = self.rval(RvalContext::ListItem) else {
                        let items = take_from(&mut self.rval_scratch, start);
                        return Some(self.partial_list(open, items));
                    };
                    self.rval_scratch.push(item);
                    match self.peek_kind() {
                        Some(Tok::Comma) => self.pos += 1,
                        Some(Tok::RBrace) => {}
                        Some(k) if starts_value(k) => {
                            if !reported {
                                self.expected_after("',' or '}' in the list");
                                reported = true;
                            }
                        }
                        _ => {
                            if !reported {
                                self.expected_after("',' or '}' in the list");
                            }
                            let items = take_from(&mut self.rval_scratch, start);
                            return Some(self.partial_list(open, items));
                        }
                    }
                }
                None => {
                    self.expected_after("'}' to close the list");
                    self.rval_scratch.truncate(start);
                    return None;
                }
            }
        }
    }

    fn call(&mut self, name_tok: Token) -> Option<Rval> {
        if self.depth >= MAX_NESTING {
            self.too_deep(self.here());
            return None;
        }
        self.depth += 1;
        let r = self.call_args(name_tok);
        self.depth -= 1;
        r
    }

    fn call_args(&mut self, name_tok: Token) -> Option<Rval> {
        let name = self.ident(name_tok);
        self.pos += 1; // (
        let start = self.rval_scratch.len();
        // One error per call: after a missing or doubled ',' the arguments
        // go on being read, so that the call keeps the arguments written.
        let mut reported = false;
        loop {
            match self.peek() {
                Some(t) if t.kind == Tok::RParen => {
                    self.pos += 1;
                    let args = take_from(&mut self.rval_scratch, start);
                    return Some(Rval::Call(Box::new(FnCall {
                        span: name.span.to(t.span),
                        name,
                        args,
                    })));
                }
                Some(t) if t.kind == Tok::Comma => {
                    if !reported {
                        self.expected_after(
                            "a value (a quoted string, a list, a function call or a name)",
                        );
                        reported = true;
                    }
                    self.pos += 1;
                }
                Some(_) => {
                    let Some(arg) = self.rval(RvalContext::Argument) else {
                        return Some(self.partial_call_from(name, start));
                    };
                    self.rval_scratch.push(arg);
                    match self.peek_kind() {
                        // One trailing ',' before ')' is CFEngine 3.28's
                        // syntax (CFE-664); 3.21 refused it.
                        Some(Tok::Comma) => self.pos += 1,
                        Some(Tok::RParen) => {}
                        Some(k) if starts_value(k) => {
                            if !reported {
                                self.expected_after(&format!(
                                    "',' or ')' in the call to '{}'",
                                    name.name
                                ));
                                reported = true;
                            }
                        }
                        _ => {
                            if !reported {
                                self.expected_after(&format!(
                                    "',' or ')' in the call to '{}'",
                                    name.name
                                ));
                            }
                            return Some(self.partial_call_from(name, start));
                        }
                    }
                }
                None => {
                    self.expected_after(&format!("')' to close the call to '{}'", name.name));
                    self.rval_scratch.truncate(start);
                    return None;
                }
            }
        }
    }

    /// After a mistake inside a list: skips to its `}` and returns what was
    /// read, so that the promise around it is not reported again.
    fn partial_list(&mut self, open: Token, items: Vec<Rval>) -> Rval {
        let end = self.skip_bracketed(Tok::RBrace).unwrap_or(open.span);
        Rval::List {
            items,
            span: open.span.to(end),
        }
    }

    /// `partial_call` with the arguments read so far, from `start` of the
    /// scratch values.
    fn partial_call_from(&mut self, name: Ident, start: usize) -> Rval {
        let args = take_from(&mut self.rval_scratch, start);
        self.partial_call(name, args)
    }

    /// After a mistake inside a call's arguments: skips to its `)`.
    fn partial_call(&mut self, name: Ident, args: Vec<Rval>) -> Rval {
        let end = self.skip_bracketed(Tok::RParen).unwrap_or(name.span);
        Rval::Call(Box::new(FnCall {
            span: name.span.to(end),
            name,
            args,
        }))
    }

    /// Skips to the bracket `close` that matches one already open and
    /// consumes it, returning its span. Stops without consuming at what
    /// cannot be inside a value: `;`, a bracket closing something outer, a
    /// promise type, a class guard or a block keyword that starts a line.
    fn skip_bracketed(&mut self, close: Tok) -> Option<Span> {
        let mut depth = 0usize;
        while let Some(t) = self.peek() {
            match t.kind {
                Tok::LBrace | Tok::LParen => depth += 1,
                k if k == close && depth == 0 => {
                    self.pos += 1;
                    return Some(t.span);
                }
                Tok::RBrace | Tok::RParen if depth == 0 => return None,
                Tok::RBrace | Tok::RParen => depth -= 1,
                Tok::Semi | Tok::PromiseType | Tok::ClassGuard | Tok::QuotedGuard => return None,
                Tok::Word if self.is_block_keyword(t) && self.starts_line(t) => return None,
                _ => {}
            }
            self.pos += 1;
        }
        None
    }

    // ---- bodies -----------------------------------------------------------

    fn body_body(&mut self) -> Vec<BodyAttribute> {
        let mut attrs = Vec::new();
        let mut guard = ClassGuard::any();
        while let Some(t) = self.peek() {
            match t.kind {
                Tok::RBrace => break,
                Tok::ClassGuard | Tok::QuotedGuard => {
                    self.pos += 1;
                    guard = self.guard(t);
                }
                Tok::Word if self.peek_at(1).map(|n| n.kind) == Some(Tok::FatArrow) => {
                    let Some(attr) = self.attribute() else {
                        self.recover_in_body();
                        continue;
                    };
                    let end = attr.span;
                    attrs.push(BodyAttribute {
                        guard: guard.clone(),
                        attr,
                    });
                    match self.peek() {
                        Some(s) if s.kind == Tok::Semi => self.pos += 1,
                        next => {
                            let found = self.describe(next);
                            let at = Span::new(end.end as usize, end.end as usize);
                            self.diags.push(
                                Diagnostic::error(
                                    at,
                                    format!("expected ';' after the attribute, found {found}"),
                                )
                                .with_help("every attribute in a body ends with ';'"),
                            );
                            let resumable = match next {
                                None => true,
                                Some(n) => {
                                    matches!(
                                        n.kind,
                                        Tok::RBrace | Tok::ClassGuard | Tok::QuotedGuard
                                    ) || (n.kind == Tok::Word
                                        && self.peek_at(1).map(|m| m.kind) == Some(Tok::FatArrow))
                                }
                            };
                            if !resumable {
                                self.recover_in_body();
                            }
                        }
                    }
                }
                _ if self.is_block_keyword(t) && self.starts_line(t) => break,
                _ => {
                    self.expected("an attribute ('name => value;'), a class guard or '}'");
                    self.recover_in_body();
                }
            }
        }
        attrs.shrink_to_fit();
        attrs
    }

    fn recover_in_body(&mut self) {
        let mut depth = 0usize;
        while let Some(t) = self.peek() {
            match t.kind {
                Tok::Semi if depth == 0 => {
                    self.pos += 1;
                    return;
                }
                Tok::LBrace => depth += 1,
                Tok::RBrace if depth == 0 => return,
                Tok::RBrace => depth -= 1,
                Tok::ClassGuard | Tok::QuotedGuard if depth == 0 => return,
                _ if self.is_block_keyword(t) && self.starts_line(t) => return,
                _ => {}
            }
            self.pos += 1;
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum RvalContext {
    Attribute,
    Promisee,
    ListItem,
    Argument,
}

/// Whether a token can start a value (for reading on after a missing ',').
fn starts_value(kind: Tok) -> bool {
    matches!(kind, Tok::Str | Tok::Word | Tok::NakedVar | Tok::LBrace)
}

/// The items of `scratch` from `start` on, moved into a vector of their
/// exact size: in one copy when they are all of it (a top-level list or
/// call), where draining moved them one by one.
fn take_from<T>(scratch: &mut Vec<T>, start: usize) -> Vec<T> {
    if start > 0 {
        return scratch.drain(start..).collect();
    }
    let mut items = Vec::with_capacity(scratch.len());
    items.append(scratch);
    items
}

#[cfg(test)]
fn line_col_of(src: &str, offset: u32) -> (usize, usize) {
    let before = &src[..(offset as usize).min(src.len())];
    let line = before.bytes().filter(|&b| b == b'\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(src: &str) -> Vec<String> {
        parse("t.cf", src)
            .diagnostics
            .iter()
            .map(|d| {
                let (l, c) = line_col_of(src, d.span.start);
                format!("{l}:{c}: {}", d.message)
            })
            .collect()
    }

    /// Reading a file in two halves gives what reading it in one go gives,
    /// wherever the second half starts, or is refused.
    #[test]
    fn halves_read_as_the_whole() {
        let tricky = concat!(
            "bundle agent s1\n{\n reports:\n  \"a multi-line string\n",
            "bundle agent inside_a_string\n{\n\";\n}\n",
            "@if minimum_version(3.7)\n",
            "bundle agent enabled\n{\n reports:\n  \"x\";\n}\n",
            "@endif\n",
            "@if minimum_version(99.0)\n",
            "bundle agent disabled\n{\n reports:\n  \"x\";\n}\n",
            "@endif\n",
            "bundle agent broken\n{\n vars:\n  \"x\" string => ;\n}\n",
            "body common control\n{\n bundlesequence => { \"s1\" };\n}\n",
            "body file control\n{\n namespace => \"ns1\";\n}\n",
            "bundle agent in_ns1\n{\n reports:\n  \"$(this.bundle)\";\n}\n",
            "body file control\n{\n namespace => \"default\";\n}\n",
            "body  perms p(m)\n{\n mode => \"$(m)\";\n}\n",
            "promise agent custom\n{\n path => \"/bin/true\";\n}\n",
            "bundle agent unclosed\n{\n reports:\n  \"x\";\n",
            "bundle agent after\n{\n reports:\n  \"y\";\n}\n",
        );
        let texts = [
            [
                include_str!("../../policies/lib/files.cf"),
                include_str!("../../policies/lib/services.cf"),
            ]
            .concat(),
            tricky.to_owned(),
            [include_str!("../../policies/lib/common.cf"), tricky].concat(),
        ];
        let shape = |p: &Piece| {
            let mut diags = p.diagnostics.clone();
            diags.sort_by_key(|d| d.span.start);
            format!("{:?}\n{:?}", p.blocks, diags)
        };
        let (mut read, mut refused) = (0, 0);
        for src in &texts {
            let line_starts = super::super::source::line_starts(src);
            let whole = shape(&parse_piece(src, &line_starts, lex(src)));
            for &at in &line_starts[1..] {
                let at = at as usize;
                if !BLOCK_KEYWORDS.iter().any(|k| src[at..].starts_with(k)) {
                    continue;
                }
                match parse_halves(src, &line_starts, at) {
                    Some(halves) => {
                        read += 1;
                        assert_eq!(shape(&halves), whole, "split at {at}");
                    }
                    None => refused += 1,
                }
            }
        }
        // Both kinds happen: clean block boundaries, and the string, the
        // open `@if`, the other namespace and the error before a split.
        assert!(read > 100 && refused >= 6, "read {read}, refused {refused}");
    }

    #[test]
    fn parses_a_bundle() {
        let p = parse(
            "t.cf",
            "bundle agent main(a, b)\n{\n vars:\n  linux::\n   \"x\" -> { \"me\" } string => concat(\"a\", $(b)), meta => { \"t\", };\n reports:\n   \"hi\";\n}\n",
        );
        assert!(p.diagnostics.is_empty(), "{:?}", p.diagnostics);
        let b = p.file.bundles().next().unwrap();
        assert_eq!(b.name.name, "main");
        assert_eq!(b.params.len(), 2);
        assert_eq!(b.sections.len(), 2);
        let pr = &b.sections[0].promises[0];
        assert_eq!(&*pr.guard.expr, "linux");
        assert_eq!(pr.promiser.value, "x");
        assert!(pr.promisee.is_some());
        assert_eq!(pr.attributes.len(), 2);
        assert_eq!(b.sections[1].promises[0].attributes.len(), 0);
    }

    #[test]
    fn namespace_applies_to_following_blocks() {
        let p = parse(
            "t.cf",
            "bundle agent a {}\nbody file control { namespace => \"ns\"; }\nbundle agent b {}\n",
        );
        let names: Vec<_> = p.file.bundles().map(|b| b.namespace.clone()).collect();
        assert_eq!(names, vec!["default", "ns"]);
    }

    #[test]
    fn one_missing_semicolon_is_one_error() {
        let e = errors(
            "bundle agent x\n{\n vars:\n  \"a\" string => \"b\"\n  \"c\" string => \"d\";\n}\n",
        );
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].starts_with("4:20: expected ';'"), "{e:?}");
    }

    #[test]
    fn rejects_what_cf_promises_rejects() {
        assert_eq!(
            errors("bundle agent x { vars: \"a\" string => \"b\",; }").len(),
            1
        );
        assert_eq!(
            errors("bundle agent x { vars: \"a\" slist => { \"b\", { \"c\" } }; }").len(),
            1
        );
        // One trailing comma in a call is CFEngine 3.28's syntax; two are
        // wrong everywhere.
        assert!(errors("bundle agent x { vars: \"a\" string => f(\"b\", ); }").is_empty());
        assert_eq!(
            errors("bundle agent x { vars: \"a\" string => f(\"b\",, ); }").len(),
            1
        );
        assert_eq!(
            errors("bundle agent x { vars: \"a\" string => f(, ); }").len(),
            1
        );
        assert!(errors("bundle agent x { vars: \"a\" slist => { \"b\", }; }").is_empty());
        assert!(errors("bundle agent x(a,) { }").is_empty());
        assert!(!errors("bundle agent x { \"a\" string => \"b\"; }").is_empty());
        assert!(!errors("body perms p { mode => \"644\" }").is_empty());
    }

    #[test]
    fn missing_brace_reports_opening_line() {
        let e =
            errors("bundle agent x\n{\n vars:\n  \"a\" string => \"b\";\n\nbundle agent y\n{\n}\n");
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("expected '}' to close bundle 'x'"), "{e:?}");
    }
    /// One error, on the given line, for each source.
    fn one_error_on_line(src: &str, line: usize) {
        let e = errors(src);
        let errs: Vec<_> = parse("t.cf", src)
            .diagnostics
            .into_iter()
            .filter(Diagnostic::is_error)
            .collect();
        assert_eq!(errs.len(), 1, "{src:?}: {e:?}");
        assert_eq!(
            line_col_of(src, errs[0].span.start).0,
            line,
            "{src:?}: {e:?}"
        );
    }

    #[test]
    fn a_mistake_inside_a_list_is_one_error() {
        for list in [
            "{ \"a\" \"b\" }",
            "{ , \"a\" }",
            "{ \"a\",, \"b\" }",
            "{ \"a\", f(\"x\" \"y\") }",
        ] {
            one_error_on_line(
                &format!(
                    "bundle agent x\n{{\n vars:\n  \"l\" slist => {list};\n  \"m\" string => \"n\";\n}}\n"
                ),
                4,
            );
        }
        one_error_on_line(
            "bundle agent x\n{\n vars:\n  \"l\" slist => { \"a\";\n  \"m\" string => \"n\";\n}\n",
            4,
        );
        one_error_on_line(
            "bundle agent x\n{\n vars:\n  \"l\" string => f(\"a\";\n  \"m\" string => \"n\";\n}\n",
            4,
        );
    }

    /// The validator counts a call's arguments, so a mistake between them
    /// must not lose any.
    #[test]
    fn calls_keep_their_arguments_after_a_mistake() {
        for call in [
            "f(\"a\" \"b\")",
            "f(\"a\",, \"b\")",
            "f(\"a\", { \"b\" })",
            "f(, \"a\", \"b\")",
        ] {
            let src = format!("bundle agent x {{ vars: \"v\" string => {call}; }}");
            let p = parse("t.cf", &src);
            assert_eq!(p.diagnostics.len(), 1, "{call}: {:?}", p.diagnostics);
            let b = p.file.bundles().next().expect("bundle");
            let Rval::Call(c) = &b.sections[0].promises[0].attributes[0].value else {
                panic!("{call}: not a call");
            };
            assert_eq!(c.args.len(), 2, "{call}");
        }
    }

    /// A promise damaged by a mistake is left out of the tree, so that the
    /// validator does not report what the mistake took away from it.
    #[test]
    fn damaged_promises_are_left_out() {
        for bad in ["string => ;", "string \"b\";", "string = \"b\";"] {
            let src = format!("bundle agent x {{ vars: \"a\" {bad} \"c\" string => \"d\"; }}");
            let p = parse("t.cf", &src);
            assert_eq!(p.diagnostics.len(), 1, "{bad}: {:?}", p.diagnostics);
            let b = p.file.bundles().next().expect("bundle");
            let promisers: Vec<_> = b.sections[0]
                .promises
                .iter()
                .map(|p| p.promiser.value.as_str())
                .collect();
            assert_eq!(promisers, vec!["c"], "{bad}");
        }
    }

    #[test]
    fn missing_promise_type_is_reported_once() {
        one_error_on_line(
            "bundle agent x\n{\n  linux::\n   \"a\" string => \"b\";\n   \"c\" string => \"d\";\n}\n",
            3,
        );
        one_error_on_line(
            "bundle agent x\n{\n vars\n   \"a\" string => \"b\";\n}\n",
            3,
        );
        one_error_on_line(
            "bundle agent x\n{\n vars :\n   \"a\" string => \"b\";\n}\n",
            3,
        );
    }

    #[test]
    fn unterminated_string_is_one_error() {
        for s in ["'b;", "`b;", "{ \"b };", "\"b\\\";"] {
            one_error_on_line(
                &format!("bundle agent x\n{{\n vars:\n   \"a\" string => {s}\n}}\n"),
                4,
            );
        }
    }

    /// A string whose closing quote is missing usually ends at the next
    /// string's opening quote; the error belongs where it started.
    #[test]
    fn runaway_string_is_reported_where_it_starts() {
        one_error_on_line(
            "bundle agent x\n{\n vars:\n   \"a\" string => \"b;\n   \"c\" string => \"d\";\n}\n",
            4,
        );
        one_error_on_line(
            "bundle agent x\n{\n reports:\n  \"linux::\n   \"r\";\n}\n",
            4,
        );
    }

    /// What belongs right after the previous token is reported there, not
    /// on the next line where the parser noticed it.
    #[test]
    fn missing_pieces_are_reported_after_the_previous_token() {
        one_error_on_line("bundle agent\n{\n}\n", 1);
        one_error_on_line("bundle agent x(a, b\n{\n}\n", 1);
        one_error_on_line("bundle agent x\n vars:\n}\n", 1);
        one_error_on_line("bundle agent x\n{\n vars:\n   \"a\" string =>\n}\n", 4);
        one_error_on_line(
            "bundle agent x\n{\n vars:\n   \"a\" string => \"b\";\n\nbundle agent y\n{\n}\n",
            4,
        );
    }

    #[test]
    fn missing_fat_arrow_names_what_follows_the_attribute() {
        let e = errors("bundle agent x\n{\n vars:\n   \"a\" string = \"b\";\n}\n");
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(
            e[0].contains("after the attribute name 'string', found unexpected character '='"),
            "{e:?}"
        );
    }

    /// Deep nesting is one located error, not a stack overflow: the reader
    /// of values and everything that walks the tree are recursive.
    #[test]
    fn nesting_deeper_than_the_limit_is_one_located_error() {
        let n = 20_000;
        let calls = format!(
            "bundle agent x\n{{\n vars:\n  \"v\" string => {}\"a\"{};\n  \"w\" string => \"b\";\n}}\n",
            "concat(".repeat(n),
            ")".repeat(n)
        );
        let e = errors(&calls);
        assert_eq!(e.len(), 1, "{e:?}");
        // The first '(' too many: after "  \"v\" string => " and 128 calls.
        let col = 17 + MAX_NESTING * "concat(".len() + "concat".len();
        assert!(
            e[0].starts_with(&format!(
                "4:{col}: nested too deeply: expected at most 128 levels"
            )),
            "{e:?}"
        );

        let lists = format!(
            "bundle agent x {{ vars: \"v\" slist => {}\"a\"{}; }}",
            "{".repeat(100_000),
            "}".repeat(100_000)
        );
        let e = errors(&lists);
        assert_eq!(e.len(), 1, "{e:?}");
        assert!(e[0].contains("lists cannot be nested"), "{e:?}");

        let mixed = format!(
            "bundle agent x {{ vars: \"v\" string => {}\"a\"{}; }}",
            "f({".repeat(50_000),
            "})".repeat(50_000)
        );
        assert!(!errors(&mixed).is_empty());

        let refs = format!(
            "bundle agent x {{ vars: \"v\" string => \"{}a{}\"; }}",
            "$(".repeat(100_000),
            ")".repeat(100_000)
        );
        let e = errors(&refs);
        assert_eq!(e.len(), 1, "{e:?}");
        let col = 39 + 2 * MAX_NESTING;
        assert!(
            e[0].starts_with(&format!("1:{col}: variable references nested too deeply")),
            "{e:?}"
        );
    }

    #[test]
    fn nesting_up_to_the_limit_is_read() {
        let n = MAX_NESTING;
        let src = format!(
            "bundle agent x {{ vars: \"v\" string => {}\"{}a{}\"{}; }}",
            "concat(".repeat(n),
            "$(".repeat(n),
            ")".repeat(n),
            ")".repeat(n)
        );
        assert!(errors(&src).is_empty());
    }
}
