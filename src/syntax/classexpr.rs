//! Class expressions: `a.(b|!c)`, `a&b`, `a||b`. Their own small grammar,
//! parsed once into a tree and evaluated against any set of classes.
//!
//! Precedence, loosest first: `|`/`||`, then `.`/`&`, then `!`.
//! `!!x` is rejected, as CFEngine rejects it.

use super::MAX_NESTING;
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
            depth: 0,
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

    /// Parses as cf-agent evaluates a guard: a complete expression followed
    /// by stray text (`a.b)::`, as in the MPF's federation.cf) counts as
    /// the expression alone.
    pub fn parse_lenient(text: &str) -> Result<ClassExpr, ClassExprError> {
        let mut p = ExprParser {
            s: text.as_bytes(),
            pos: 0,
            depth: 0,
        };
        p.skip_ws();
        if p.pos == p.s.len() {
            return Self::parse(text);
        }
        p.or()
    }

    /// Evaluates with `is_set` answering whether one class name is defined.
    pub fn eval(&self, is_set: &mut impl FnMut(&str) -> bool) -> bool {
        match self {
            // cf-agent reads the words `true` and `false` as constants,
            // never as class names (what `"$(json_bool)"` expands to).
            ClassExpr::Name(n) if n == "true" => true,
            ClassExpr::Name(n) if n == "false" => false,
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
    /// How many `(` and `!` enclose the cursor: at most [`MAX_NESTING`],
    /// since parsing, evaluating and dropping the tree all recurse.
    depth: usize,
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

    /// Goes one level deeper for `inner`, or refuses to beyond
    /// [`MAX_NESTING`].
    fn nested<T>(
        &mut self,
        inner: impl FnOnce(&mut Self) -> Result<T, ClassExprError>,
    ) -> Result<T, ClassExprError> {
        if self.depth >= MAX_NESTING {
            return Err(self.err(format!(
                "class expression nested too deeply: expected at most {MAX_NESTING} levels of '(' and '!'"
            )));
        }
        self.depth += 1;
        let r = inner(self);
        self.depth -= 1;
        r
    }

    fn not(&mut self) -> Result<ClassExpr, ClassExprError> {
        if self.peek() == Some(b'!') {
            return self.nested(|p| {
                p.pos += 1;
                if p.peek() == Some(b'!') {
                    return Err(p.err("'!!' is not allowed; write '!(!x)'".into()));
                }
                Ok(ClassExpr::Not(Box::new(p.not()?)))
            });
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<ClassExpr, ClassExprError> {
        match self.peek() {
            Some(b'(') => self.nested(|p| {
                p.pos += 1;
                let e = p.or()?;
                if p.peek() != Some(b')') {
                    return Err(p.err("expected ')' in class expression".into()));
                }
                p.pos += 1;
                Ok(e)
            }),
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
    fn true_and_false_are_constants() {
        // 02_classes/01_basic/from_json_booleans.cf: a JSON true expanded
        // into an expression defines the class.
        assert!(eval("true", &[]));
        assert!(!eval("false", &["false"]));
        assert!(eval("!false.true", &[]));
        assert!(!eval("truex", &[]));
    }

    #[test]
    fn lenient_parse_ignores_stray_text_after_a_whole_expression() {
        let e = ClassExpr::parse_lenient("any.!nope)").unwrap();
        assert!(e.eval(&mut |n| n == "any"));
        assert!(ClassExpr::parse_lenient("a.").is_err());
        assert!(ClassExpr::parse_lenient("").is_err());
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

    #[test]
    fn nesting_deeper_than_the_limit_is_an_error() {
        let ok = format!("{}a{}", "(".repeat(MAX_NESTING), ")".repeat(MAX_NESTING));
        assert!(ClassExpr::parse(&ok).is_ok());
        let nots = format!(
            "{}a{}",
            "!(".repeat(MAX_NESTING / 2),
            ")".repeat(MAX_NESTING / 2)
        );
        assert!(ClassExpr::parse(&nots).is_ok());
        for deep in [
            format!("{}a{}", "(".repeat(100_000), ")".repeat(100_000)),
            format!("{}a{}", "!(".repeat(100_000), ")".repeat(100_000)),
        ] {
            let e = ClassExpr::parse(&deep).unwrap_err();
            assert!(e.message.contains("nested too deeply"), "{e}");
            assert!(ClassExpr::parse_lenient(&deep).is_err());
        }
        let e = ClassExpr::parse(&format!("{}a", "(".repeat(100_000))).unwrap_err();
        assert_eq!(e.offset, MAX_NESTING, "{e}");
    }
}
