//! The parsed policy: bundles, bodies and custom promise blocks, every node
//! with the byte span it came from.

use super::source::Span;
pub use compact_str::CompactString;

/// A name as written (block names, attribute names, parameters, symbols).
/// A namespaced symbol (`ns:name`) keeps its colon.
#[derive(Debug, Clone, PartialEq)]
pub struct Ident {
    pub name: CompactString,
    pub span: Span,
}

/// Which quote delimited a string literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quote {
    Double,
    Single,
    Backtick,
}

/// A string literal with its escapes already resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct StringLit {
    pub value: CompactString,
    pub quote: Quote,
    pub span: Span,
}

/// A right-hand value of an attribute, a promisee, a list item or an argument.
#[derive(Debug, Clone, PartialEq)]
pub enum Rval {
    String(StringLit),
    /// A naked identifier such as a body or bundle name (`copy_from => local_cp`).
    Symbol(Ident),
    /// A naked variable reference, `$(x)` or `@(x)`, written without quotes.
    NakedVar {
        text: String,
        span: Span,
    },
    List {
        items: Vec<Rval>,
        span: Span,
    },
    /// Boxed, so that every value (most are strings) is not as large as a
    /// call: each attribute of a big policy carried the difference.
    Call(Box<FnCall>),
}

impl Rval {
    pub fn span(&self) -> Span {
        match self {
            Rval::String(s) => s.span,
            Rval::Symbol(i) => i.span,
            Rval::NakedVar { span, .. } | Rval::List { span, .. } => *span,
            Rval::Call(c) => c.span,
        }
    }

    /// A short word for the kind of value, used in messages and in JSON.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Rval::String(_) => "string",
            Rval::Symbol(_) => "symbol",
            Rval::NakedVar { .. } => "naked variable",
            Rval::List { .. } => "list",
            Rval::Call(_) => "function call",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct FnCall {
    pub name: Ident,
    pub args: Vec<Rval>,
    pub span: Span,
}

/// `lval => rval`.
#[derive(Debug, Clone, PartialEq)]
pub struct Attribute {
    pub name: Ident,
    pub value: Rval,
    pub span: Span,
}

/// The class expression that guards the promises or attributes after it.
/// `any` when none was written.
#[derive(Debug, Clone, PartialEq)]
pub struct ClassGuard {
    /// Shared: every promise under one guard carries a copy of it.
    pub expr: std::sync::Arc<str>,
    pub span: Span,
    /// Written as a quoted string (`"$(x)"::`), so it may hold variables.
    pub quoted: bool,
}

impl ClassGuard {
    pub fn any() -> ClassGuard {
        ClassGuard {
            expr: "any".into(),
            span: Span::default(),
            quoted: false,
        }
    }

    pub fn is_any(&self) -> bool {
        &*self.expr == "any"
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Promise {
    pub guard: ClassGuard,
    pub promiser: StringLit,
    /// Boxed: few promises have one, and every promise of a big policy
    /// carried the room for a value inline.
    pub promisee: Option<Box<Rval>>,
    pub attributes: Vec<Attribute>,
    pub span: Span,
}

impl Promise {
    pub fn attribute(&self, name: &str) -> Option<&Attribute> {
        self.attributes.iter().find(|a| a.name.name == name)
    }
}

/// All promises of one promise type written under one `type:` heading.
#[derive(Debug, Clone, PartialEq)]
pub struct Section {
    pub promise_type: Ident,
    pub promises: Vec<Promise>,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Bundle {
    pub namespace: String,
    pub bundle_type: Ident,
    pub name: Ident,
    pub params: Vec<Ident>,
    pub sections: Vec<Section>,
    pub span: Span,
}

/// Whether a body-shaped block was written with `body` or with `promise`
/// (a custom promise type's definition).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyKind {
    Body,
    Promise,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BodyAttribute {
    pub guard: ClassGuard,
    pub attr: Attribute,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Body {
    pub kind: BodyKind,
    pub namespace: String,
    pub body_type: Ident,
    pub name: Ident,
    pub params: Vec<Ident>,
    pub attributes: Vec<BodyAttribute>,
    pub span: Span,
}

impl Body {
    /// The last unguarded-or-guarded definition of an attribute, in order.
    pub fn attributes_named<'a>(
        &'a self,
        name: &'a str,
    ) -> impl Iterator<Item = &'a BodyAttribute> {
        self.attributes
            .iter()
            .filter(move |a| a.attr.name.name == name)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    Bundle(Bundle),
    Body(Body),
}

impl Block {
    pub fn span(&self) -> Span {
        match self {
            Block::Bundle(b) => b.span,
            Block::Body(b) => b.span,
        }
    }
}

/// One parsed file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PolicyFile {
    pub path: String,
    pub blocks: Vec<Block>,
}

impl PolicyFile {
    pub fn bundles(&self) -> impl Iterator<Item = &Bundle> {
        self.blocks.iter().filter_map(|b| match b {
            Block::Bundle(b) => Some(b),
            _ => None,
        })
    }

    pub fn bodies(&self) -> impl Iterator<Item = &Body> {
        self.blocks.iter().filter_map(|b| match b {
            Block::Body(b) => Some(b),
            _ => None,
        })
    }
}
