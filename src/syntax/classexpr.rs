//! Class expressions: `a.(b|!c)`, `a&b`, `a||b`. Their own small grammar,
//! parsed once into a tree and evaluated against any set of classes.
//!
//! Precedence, loosest first: `|`/`||`, then `.`/`&`, then `!`.
//! `!!x` is rejected, as CFEngine rejects it.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClassExpr {
    Name(String),
    Not(Box<ClassExpr>),
    And(Vec<ClassExpr>),
    Or(Vec<ClassExpr>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClassExprError {
    /// Byte offset in the expression text.
    pub offset: usize,
    pub message: String,
}

impl fmt::Display for ClassExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at character {})", self.message, self.offset + 1)
    }
}

impl std::error::Error for ClassExprError {}

fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b':' || b >= 0x80
}

impl ClassExpr {
    pub fn parse(text: &str) -> Result<ClassExpr, ClassExprError> {
        let mut p = ExprParser {
            s: text.as_bytes(),
            pos: 0,
        };
        p.skip_ws();
        if p.pos == p.s.len() {
            return Err(ClassExprError {
                offset: 0,
                message: "empty class expression".into(),
            });
        }
        let e = p.or()?;
        p.skip_ws();
        if p.pos != p.s.len() {
            return Err(p.err(format!(
                "unexpected '{}' in class expression",
                text[p.pos..].chars().next().unwrap_or(' ')
            )));
        }
        Ok(e)
    }

    /// Evaluates with `is_set` answering whether one class name is defined.
    pub fn eval(&self, is_set: &mut impl FnMut(&str) -> bool) -> bool {
        match self {
            ClassExpr::Name(n) => is_set(n),
            ClassExpr::Not(e) => !e.eval(is_set),
            ClassExpr::And(es) => es.iter().all(|e| e.eval(is_set)),
            ClassExpr::Or(es) => es.iter().any(|e| e.eval(is_set)),
        }
    }

    /// Every class name the expression mentions.
    pub fn names(&self, out: &mut Vec<String>) {
        match self {
            ClassExpr::Name(n) => out.push(n.clone()),
            ClassExpr::Not(e) => e.names(out),
            ClassExpr::And(es) | ClassExpr::Or(es) => es.iter().for_each(|e| e.names(out)),
        }
    }
}

struct ExprParser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl ExprParser<'_> {
    fn err(&self, message: String) -> ClassExprError {
        ClassExprError {
            offset: self.pos,
            message,
        }
    }

    fn skip_ws(&mut self) {
        while self.pos < self.s.len() && matches!(self.s[self.pos], b' ' | b'\t' | b'\r' | b'\n') {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.pos).copied()
    }

    fn or(&mut self) -> Result<ClassExpr, ClassExprError> {
        let mut items = vec![self.and()?];
        while self.peek() == Some(b'|') {
            self.pos += 1;
            if self.s.get(self.pos) == Some(&b'|') {
                self.pos += 1;
            }
            items.push(self.and()?);
        }
        Ok(if items.len() == 1 {
            items.pop().unwrap_or(ClassExpr::Name(String::new()))
        } else {
            ClassExpr::Or(items)
        })
    }

    fn and(&mut self) -> Result<ClassExpr, ClassExprError> {
        let mut items = vec![self.not()?];
        while matches!(self.peek(), Some(b'.') | Some(b'&')) {
            self.pos += 1;
            items.push(self.not()?);
        }
        Ok(if items.len() == 1 {
            items.pop().unwrap_or(ClassExpr::Name(String::new()))
        } else {
            ClassExpr::And(items)
        })
    }

    fn not(&mut self) -> Result<ClassExpr, ClassExprError> {
        if self.peek() == Some(b'!') {
            self.pos += 1;
            if self.peek() == Some(b'!') {
                return Err(self.err("'!!' is not allowed; write '!(!x)'".into()));
            }
            return Ok(ClassExpr::Not(Box::new(self.not()?)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<ClassExpr, ClassExprError> {
        match self.peek() {
            Some(b'(') => {
                self.pos += 1;
                let e = self.or()?;
                if self.peek() != Some(b')') {
                    return Err(self.err("expected ')' in class expression".into()));
                }
                self.pos += 1;
                Ok(e)
            }
            Some(b) if is_name_byte(b) => {
                let start = self.pos;
                while self.pos < self.s.len() && is_name_byte(self.s[self.pos]) {
                    self.pos += 1;
                }
                let name = String::from_utf8_lossy(&self.s[start..self.pos]).into_owned();
                Ok(ClassExpr::Name(name))
            }
            Some(b) => Err(self.err(format!(
                "expected a class name, '!' or '(' in class expression, found '{}'",
                b as char
            ))),
            None => Err(self.err("class expression ends where a class name was expected".into())),
        }
    }
}

/// How CFEngine's parser reads an unquoted class guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuardSyntax {
    /// The whole guard is one expression (trailing blanks aside).
    Complete,
    /// A valid expression ends at this byte offset and CFEngine ignores the
    /// rest of the guard: `a . b` is read as `a`.
    IgnoredFrom(usize),
}

/// Checks an unquoted class guard (the text before `::`) the way
/// cf-promises does when it parses a policy.
///
/// CFEngine reads a guard with a grammar that allows no blanks at all and
/// stops at the first byte that cannot continue the expression; what
/// follows is ignored, but an expression that is incomplete at that point
/// (`a.`, `!!a`, `(a`, `a||`) is a syntax error. Two names separated only
/// by blanks (`a b`) are rejected outright.
pub fn check_guard(text: &str) -> Result<GuardSyntax, ClassExprError> {
    let s = text.as_bytes();
    if let Some(offset) = blank_between_names(s) {
        return Err(ClassExprError {
            offset,
            message: "class names must be joined by an operator ('.', '&', '|'), not by blanks"
                .into(),
        });
    }
    let mut g = GuardReader { s, pos: 0 };
    g.or()?;
    let rest = &s[g.pos..];
    if rest.iter().all(|&b| b == b' ' || b == b'\t') {
        Ok(GuardSyntax::Complete)
    } else {
        Ok(GuardSyntax::IgnoredFrom(g.pos))
    }
}

/// Offset of the blank run in `name blank+ name`, if there is one.
fn blank_between_names(s: &[u8]) -> Option<usize> {
    let name = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < s.len() {
        if name(s[i]) {
            let mut j = i + 1;
            while j < s.len() && matches!(s[j], b' ' | b'\t') {
                j += 1;
            }
            if j > i + 1 && j < s.len() && name(s[j]) {
                return Some(i + 1);
            }
            i = j.max(i + 1);
        } else {
            i += 1;
        }
    }
    None
}

/// The blank-free guard grammar; positions only, no tree.
struct GuardReader<'a> {
    s: &'a [u8],
    pos: usize,
}

impl GuardReader<'_> {
    fn at(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn fail(&self, what: &str) -> ClassExprError {
        let found = match self.at() {
            None => "the end of the guard".to_string(),
            Some(b' ' | b'\t') => "a blank".to_string(),
            Some(b) if b.is_ascii() => format!("'{}'", b as char),
            Some(_) => "a non-ASCII character".to_string(),
        };
        ClassExprError {
            offset: self.pos,
            message: format!("expected {what}, found {found}"),
        }
    }

    fn or(&mut self) -> Result<(), ClassExprError> {
        loop {
            self.and()?;
            if self.at() != Some(b'|') {
                return Ok(());
            }
            self.pos += 1;
            if self.at() == Some(b'|') {
                self.pos += 1;
            }
        }
    }

    fn and(&mut self) -> Result<(), ClassExprError> {
        loop {
            self.not()?;
            if !matches!(self.at(), Some(b'.' | b'&')) {
                return Ok(());
            }
            self.pos += 1;
        }
    }

    fn not(&mut self) -> Result<(), ClassExprError> {
        if self.at() == Some(b'!') {
            self.pos += 1;
            if self.at() == Some(b'!') {
                return Err(ClassExprError {
                    offset: self.pos,
                    message: "'!!' is not allowed; write '!(!x)'".into(),
                });
            }
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<(), ClassExprError> {
        if self.at() == Some(b'(') {
            self.pos += 1;
            self.or()?;
            if self.at() != Some(b')') {
                return Err(self.fail("')'"));
            }
            self.pos += 1;
            return Ok(());
        }
        let start = self.pos;
        while self
            .at()
            .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b':' | b'[' | b']'))
        {
            self.pos += 1;
        }
        if self.pos == start {
            return Err(self.fail("a class name, '!' or '('"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn eval(expr: &str, set: &[&str]) -> bool {
        ClassExpr::parse(expr)
            .unwrap()
            .eval(&mut |n| set.contains(&n))
    }

    #[test]
    fn precedence() {
        assert!(eval("a.b|c", &["c"]));
        assert!(!eval("a.(b|c)", &["c"]));
        assert!(eval("!a.b", &["b"]));
        assert!(eval("a||b", &["b"]));
        assert!(eval("a&b", &["a", "b"]));
        assert!(eval("any . linux ", &["any", "linux"]));
        assert!(eval("!(!a)", &["a"]));
        assert!(eval("ns:cls", &["ns:cls"]));
    }

    #[test]
    fn errors() {
        assert!(ClassExpr::parse("!!a").is_err());
        assert!(ClassExpr::parse("a.").is_err());
        assert!(ClassExpr::parse("(a").is_err());
        assert!(ClassExpr::parse("a)").is_err());
        assert!(ClassExpr::parse("").is_err());
        assert!(ClassExpr::parse("a..b").is_err());
    }

    /// Verdicts cf-promises 3.21 gives for unquoted guards.
    #[test]
    fn guard_syntax_follows_cf_promises() {
        use GuardSyntax::*;
        for ok in [
            "linux",
            "a.b|c",
            "a||b",
            "a&b",
            "!(!a)",
            "(a|b).(c)",
            "default:a",
            "a:",
            "123",
        ] {
            assert_eq!(check_guard(ok), Ok(Complete), "{ok}");
        }
        assert_eq!(check_guard("linux "), Ok(Complete));
        assert_eq!(check_guard("a . b"), Ok(IgnoredFrom(1)));
        assert_eq!(check_guard("a)"), Ok(IgnoredFrom(1)));
        assert_eq!(check_guard("a!b"), Ok(IgnoredFrom(1)));
        assert_eq!(check_guard("größe"), Ok(IgnoredFrom(2)));
        for bad in [
            "a..b", "!!a", "a.", ".", "|a", "(a", "()", "a&&b", "a|||b", "a. b", "(a .b)", "! a",
            "ö", "a b", "a|", "!",
        ] {
            assert!(check_guard(bad).is_err(), "{bad}");
        }
    }
}
