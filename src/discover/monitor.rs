//! What cf-monitord left for the agent in `STATEDIR/env_data`: `mon.*`
//! variables and classes, if the file is less than an hour old.
//!
//! (cf-agent also deletes a stale file; discovery only reads. The slowly
//! varying observations cf-agent loads from cf-monitord's database are not
//! read.)

use super::Collector;
use super::root::Root;
use super::time::{Clock, ctime};
use crate::host::local;
use crate::values::value::{DataType, Value};
use std::time::{Duration, SystemTime};

pub(crate) fn environment(
    c: &mut Collector,
    root: &Root,
    layout: &super::Layout,
    now: SystemTime,
    utc_offset: Option<i64>,
) {
    let host_path = layout.statedir.join("env_data");
    let path = root.path(&host_path.to_string_lossy());
    let Ok(meta) = local::metadata(&path) else {
        return;
    };
    let Ok(mtime) = meta.modified() else { return };
    if mtime + Duration::from_secs(3600) < now {
        return;
    }
    let Ok(bytes) = local::read(&path) else {
        return;
    };
    let text = String::from_utf8_lossy(&bytes);
    c.var(
        "mon",
        "env_time",
        Value::Scalar(ctime(&Clock::new(mtime, utc_offset).local)),
        DataType::String,
        "time_based,source=agent",
    );
    load_env_data(c, &text);
}

/// Parses the lines of `env_data`: `@name={"a","b"}` lists, `name=value`
/// scalars, and bare class names.
pub(crate) fn load_env_data(c: &mut Collector, text: &str) {
    let tags = "monitoring,source=environment";
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix('@') {
            if let Some((name, value)) = rest.split_once('=')
                && !name.is_empty()
            {
                c.var(
                    "mon",
                    name,
                    Value::List(parse_shown_list(value)),
                    DataType::Slist,
                    tags,
                );
            }
        } else if let Some((name, value)) = line.split_once('=') {
            if !name.is_empty() && !value.is_empty() {
                c.var("mon", name, Value::str(value), DataType::String, tags);
            }
        } else if !line.trim().is_empty() {
            c.class(line.trim_end(), tags);
        }
    }
}

/// A list printed as `{"a","b"}` (or `{'a','b'}`).
pub(crate) fn parse_shown_list(s: &str) -> Vec<String> {
    let inner = s
        .trim()
        .strip_prefix('{')
        .and_then(|s| s.strip_suffix('}'))
        .unwrap_or(s);
    let mut items = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut chars = inner.chars();
    while let Some(ch) = chars.next() {
        match (quote, ch) {
            (Some(q), '\\') => {
                if let Some(next) = chars.next() {
                    if next != q && next != '\\' {
                        cur.push('\\');
                    }
                    cur.push(next);
                }
            }
            (Some(q), ch) if ch == q => {
                quote = None;
                items.push(std::mem::take(&mut cur));
            }
            (Some(_), ch) => cur.push(ch),
            (None, '"' | '\'') => quote = Some(ch),
            (None, _) => {}
        }
    }
    items
}
