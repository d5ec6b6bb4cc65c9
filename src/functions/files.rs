//! Files: tests on paths, `stat` fields, listing and globbing, hashes,
//! and comparisons of timestamps.
//!
//! Like cf-agent these use `lstat` unless the function says otherwise, list
//! directories in the order the file system returns them, and expand
//! globs with the C library's `glob` so that sorting and hidden files come
//! out the same.

use super::args::Args;
use super::strings::{HASH_ALGORITHMS, digest, hex};
use super::{FnError, FnResult, FnSpec, class_result, int_value, spec};
use crate::eval::EvalContext;
use crate::host::Host;
use crate::host::plain::{Metadata, MetadataExt, PermissionsExt};
use crate::values::Value;
use serde_json::Value as Json;
use std::path::Path;

pub static FUNCTIONS: &[FnSpec] = &[
    spec("fileexists", 1, Some(1), fileexists),
    spec("isdir", 1, Some(1), isdir),
    spec("isplain", 1, Some(1), isplain),
    spec("islink", 1, Some(1), islink),
    spec("isexecutable", 1, Some(1), isexecutable),
    spec("filesize", 1, Some(1), filesize),
    spec("filestat", 2, Some(2), filestat),
    spec("filesexist", 1, Some(1), filesexist),
    spec("findfiles", 0, None, findfiles),
    spec("findfiles_up", 2, Some(3), findfiles_up),
    spec("search_up", 2, Some(3), search_up),
    spec("lsdir", 3, Some(3), lsdir),
    spec("translatepath", 1, Some(1), translatepath),
    spec("dirname", 1, Some(1), dirname),
    spec("file_hash", 2, Some(2), file_hash),
    spec("changedbefore", 2, Some(2), changedbefore),
    spec("accessedbefore", 2, Some(2), accessedbefore),
    spec("isnewerthan", 2, Some(2), isnewerthan),
    spec("diskfree", 1, Some(1), diskfree),
];

fn lstat(ctx: &EvalContext, path: &str) -> Option<Metadata> {
    ctx.host().plain().symlink_metadata(path).ok()
}

fn stat(ctx: &EvalContext, path: &str) -> Option<Metadata> {
    ctx.host().plain().metadata(path).ok()
}

/// Whether the path exists; a dangling symbolic link exists.
fn fileexists(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("fileexists", a);
    Ok(class_result(lstat(ctx, p.str(0, "path")?).is_some()))
}

fn isdir(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("isdir", a);
    Ok(class_result(
        stat(ctx, p.str(0, "path")?).is_some_and(|m| m.is_dir()),
    ))
}

fn isplain(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("isplain", a);
    Ok(class_result(
        lstat(ctx, p.str(0, "path")?).is_some_and(|m| m.file_type().is_file()),
    ))
}

fn islink(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("islink", a);
    Ok(class_result(
        lstat(ctx, p.str(0, "path")?).is_some_and(|m| m.file_type().is_symlink()),
    ))
}

/// Executable by someone: any execute bit (directories included, as in
/// cf-agent).
fn isexecutable(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("isexecutable", a);
    Ok(class_result(
        stat(ctx, p.str(0, "path")?).is_some_and(|m| m.permissions().mode() & 0o111 != 0),
    ))
}

fn filesize(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("filesize", a);
    let path = p.str(0, "path")?;
    match lstat(ctx, path) {
        Some(m) => Ok(int_value(m.len() as i64)),
        None => Err(p.fail_quietly(format!("cannot stat '{path}'"))),
    }
}

/// `ls -l`-style permission text as cf-agent gives it: `d` or `-`, then
/// the nine rwx bits (set-id and sticky bits are not shown).
pub fn perm_string(m: &Metadata) -> String {
    let mode = m.permissions().mode();
    let mut s = String::with_capacity(10);
    s.push(if m.is_dir() { 'd' } else { '-' });
    for (mask, c) in [
        (0o400, 'r'),
        (0o200, 'w'),
        (0o100, 'x'),
        (0o040, 'r'),
        (0o020, 'w'),
        (0o010, 'x'),
        (0o004, 'r'),
        (0o002, 'w'),
        (0o001, 'x'),
    ] {
        s.push(if mode & mask != 0 { c } else { '-' });
    }
    s
}

fn file_type_name(m: &Metadata) -> &'static str {
    use crate::host::plain::FileTypeExt;
    let t = m.file_type();
    if t.is_symlink() {
        "symlink"
    } else if t.is_dir() {
        "directory"
    } else if t.is_file() {
        "regular file"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else {
        "unknown"
    }
}

/// Follows symbolic links (up to a bound) to the final path, keeping the
/// last target when it no longer exists.
fn resolve_links(host: &Host, path: &str) -> String {
    let files = host.plain();
    let mut cur = std::path::PathBuf::from(path);
    for _ in 0..32 {
        match files.symlink_metadata(&cur) {
            Ok(m) if m.file_type().is_symlink() => match files.read_link(&cur) {
                Ok(t) => {
                    cur = if t.is_absolute() {
                        t
                    } else {
                        cur.parent().map(|d| d.join(&t)).unwrap_or(t)
                    };
                }
                Err(_) => break,
            },
            _ => break,
        }
    }
    cur.display().to_string()
}

/// `filestat(path, field)`: one field of `lstat`, or a derived one.
fn filestat(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("filestat", a);
    let path = p.str(0, "path")?;
    let field = p.option(
        1,
        "field",
        &[
            "size",
            "gid",
            "uid",
            "ino",
            "nlink",
            "ctime",
            "atime",
            "mtime",
            "xattr",
            "mode",
            "modeoct",
            "permstr",
            "permoct",
            "type",
            "devno",
            "dev_minor",
            "dev_major",
            "basename",
            "dirname",
            "linktarget",
            "linktarget_shallow",
        ],
    )?;
    let Some(m) = lstat(ctx, path) else {
        return Err(p.fail_quietly(format!("cannot stat '{path}'")));
    };
    let v = match field {
        "size" => m.len().to_string(),
        "gid" => m.gid().to_string(),
        "uid" => m.uid().to_string(),
        "ino" => m.ino().to_string(),
        "nlink" => m.nlink().to_string(),
        "ctime" => m.ctime().to_string(),
        "atime" => m.atime().to_string(),
        "mtime" => m.mtime().to_string(),
        "xattr" => String::new(),
        "mode" => m.mode().to_string(),
        "modeoct" => format!("{:o}", m.mode()),
        "permstr" => perm_string(&m),
        "permoct" => format!("{:o}", m.mode() & 0o777),
        "type" => file_type_name(&m).to_string(),
        "devno" => m.dev().to_string(),
        "dev_minor" => libc::minor(m.dev()).to_string(),
        "dev_major" => libc::major(m.dev()).to_string(),
        "basename" => Path::new(path)
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| path.to_string()),
        "dirname" => dirname_of(path),
        "linktarget" => resolve_links(ctx.host(), path),
        "linktarget_shallow" => match ctx.host().plain().read_link(path) {
            Ok(t) => t.display().to_string(),
            Err(_) => path.to_string(),
        },
        _ => return Err(p.fail(format!("unknown field '{field}'"))),
    };
    Ok(Value::str(v))
}

/// True when every path of the list exists; an empty list is false.
fn filesexist(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("filesexist", a);
    let paths = p.list(ctx, 0, "paths")?;
    Ok(class_result(
        !paths.is_empty() && paths.iter().all(|f| lstat(ctx, f).is_some()),
    ))
}

/// How many directory levels `**` stands for (one to six), as cf-agent
/// expands it.
const DOUBLE_STAR_LEVELS: usize = 6;

/// The patterns a `**` component stands for: `*`, `*/*`, … six levels.
fn expand_double_star(pattern: &str) -> Vec<String> {
    let parts: Vec<&str> = pattern.split('/').collect();
    let Some(i) = parts.iter().position(|c| *c == "**") else {
        return vec![pattern.to_string()];
    };
    let mut out = Vec::new();
    for n in 1..=DOUBLE_STAR_LEVELS {
        let stars = vec!["*"; n].join("/");
        let mut p = parts.clone();
        p[i] = &stars;
        out.extend(expand_double_star(&p.join("/")));
    }
    out
}

/// `findfiles(glob...)`: matching paths of absolute globs; relative ones
/// are skipped with a warning.
fn findfiles(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("findfiles", a);
    let mut out: Vec<String> = Vec::new();
    // What is in `out` already: `/**` finds a hundred thousand paths, and
    // looking each up in the list took minutes.
    let mut seen = std::collections::HashSet::new();
    for i in 0..p.len() {
        let pattern = p.str(i, "glob")?;
        if !pattern.starts_with('/') {
            crate::warn!("Non-absolute path in findfiles(), skipping: {pattern}");
            continue;
        }
        for pat in expand_double_star(pattern) {
            // Each `**` is six globs, the deepest of them over a whole tree:
            // a deadline (the fuzzer's) is looked at between them.
            if ctx.out_of_time() {
                return Err(p.fail("the evaluation ran out of time"));
            }
            for f in ctx.host().plain().glob(&pat) {
                if seen.insert(f.clone()) {
                    out.push(f);
                }
            }
        }
    }
    Ok(Value::List(out))
}

/// A path with each run of slashes made one, as cf-agent cleans paths
/// (`DeleteRedundantSlashes`).
fn collapse_slashes(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if !(c == '/' && out.ends_with('/')) {
            out.push(c);
        }
    }
    out
}

/// Looks for a glob in a directory and its parents, up to `levels`
/// directories (all the way up by default). As in cf-agent, the path must
/// be an absolute directory and the glob relative, and both lose their
/// redundant slashes (01_vars/02_functions/findfiles_up.cf).
fn search_upwards(ctx: &EvalContext, name: &'static str, a: &[Value]) -> FnResult {
    let p = Args::new(name, a);
    let start = p.str(0, "path")?;
    let glob = p.str(1, "glob")?;
    let levels = p.opt_int(2, "max_levels", i64::MAX)?;
    if !start.starts_with('/') {
        return Err(p.fail(format!("not an absolute path '{start}'")));
    }
    if !ctx.host().plain().metadata(start).is_ok_and(|m| m.is_dir()) {
        return Err(p.fail(format!("path '{start}' is not a directory")));
    }
    if glob.starts_with('/') {
        return Err(p.fail(format!("glob '{glob}' cannot be an absolute path")));
    }
    let glob = collapse_slashes(glob);
    let mut dir = collapse_slashes(start);
    if dir.ends_with('/') {
        dir.pop();
    }
    let mut out = Vec::new();
    // The start directory, then up to `levels` parents; the root is the
    // empty path, where the glob stays relative (cf-agent joins it so).
    let mut level = 0i64;
    while level <= levels {
        let pattern = if dir.is_empty() {
            glob.clone()
        } else {
            format!("{dir}/{glob}")
        };
        for f in ctx.host().plain().glob(&pattern) {
            out.push(Json::String(f));
        }
        level += 1;
        match dir.rfind('/') {
            Some(i) => dir.truncate(i),
            None => break,
        }
    }
    Ok(Value::data(Json::Array(out)))
}

fn findfiles_up(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    search_upwards(ctx, "findfiles_up", a)
}

fn search_up(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    search_upwards(ctx, "search_up", a)
}

/// `lsdir(path, regex, include_base)`: the entries whose names fully match
/// (an empty pattern matches all), optionally prefixed with the path and a
/// slash.
fn lsdir(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("lsdir", a);
    let path = p.str(0, "path")?;
    let pattern = p.str(1, "regex")?;
    let base = p.boolean(2, "include_base")?;
    // An invalid pattern matches nothing (cf-agent logs it and lists
    // nothing).
    let re = if pattern.is_empty() {
        None
    } else {
        match ctx.regexes.get(pattern) {
            Ok(r) => Some(r),
            Err(e) => {
                crate::error!("lsdir: {e}");
                return Ok(Value::List(Vec::new()));
            }
        }
    };
    // A directory that cannot be read gives an empty list (and an error
    // in the log), not a failed call.
    let names = ctx.host().plain().read_dir_raw(path).unwrap_or_else(|e| {
        crate::error!("Directory '{path}' could not be accessed in lsdir(): {e}");
        Vec::new()
    });
    // cf-agent builds the list by prepending: the reverse of readdir order.
    Ok(Value::List(
        names
            .into_iter()
            .rev()
            .filter(|n| re.as_ref().is_none_or(|r| r.is_full_match(n)))
            .map(|n| if base { format!("{path}/{n}") } else { n })
            .collect(),
    ))
}

/// Paths are the same on every platform we run on.
fn translatepath(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("translatepath", a);
    Ok(Value::str(p.str(0, "path")?))
}

/// The directory part of a path, as `dirname(1)` computes it: trailing
/// slashes ignored, `.` for a bare name, `/` for the root. An empty path
/// stays empty. Repeated slashes inside it count as one, as cf-agent
/// collapses them before chopping the last node (`a///b//c` is `a/b`).
pub fn dirname_of(path: &str) -> String {
    let mut out = dirname_uncollapsed(path);
    let mut prev_slash = false;
    out.retain(|c| {
        let keep = !(c == '/' && prev_slash);
        prev_slash = c == '/';
        keep
    });
    out
}

fn dirname_uncollapsed(path: &str) -> String {
    if path.is_empty() {
        return String::new();
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return "/".to_string();
    }
    match trimmed.rfind('/') {
        None => ".".to_string(),
        Some(i) => {
            let dir = trimmed[..i].trim_end_matches('/');
            if dir.is_empty() {
                "/".to_string()
            } else {
                dir.to_string()
            }
        }
    }
}

fn dirname(_: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("dirname", a);
    Ok(Value::str(dirname_of(p.str(0, "path")?)))
}

/// `file_hash(path, algorithm)`. A file that cannot be opened hashes to
/// zeros and one that cannot be read to the digest of nothing, as in
/// cf-agent.
fn file_hash(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("file_hash", a);
    let path = p.str(0, "path")?;
    let alg = p.option(1, "algorithm", HASH_ALGORITHMS)?;
    let d = match ctx.host().plain().open(path) {
        // Zeros, as many as the algorithm's digest has bytes.
        Err(_) => vec![0; digest(alg, b"").unwrap_or_default().len()],
        Ok(mut f) => {
            let mut data = Vec::new();
            use std::io::Read as _;
            if f.read_to_end(&mut data).is_err() {
                data.clear();
            }
            digest(alg, &data).unwrap_or_default()
        }
    };
    Ok(Value::str(hex(&d)))
}

/// Compares a timestamp of two files: whether the first is earlier
/// (`before`) or later than the second; false when either is missing.
fn compare_times(
    ctx: &EvalContext,
    name: &'static str,
    a: &[Value],
    time: fn(&Metadata) -> i64,
    before: bool,
) -> Result<bool, FnError> {
    let p = Args::new(name, a);
    let (Some(m1), Some(m2)) = (stat(ctx, p.str(0, "path1")?), stat(ctx, p.str(1, "path2")?))
    else {
        return Ok(false);
    };
    Ok(if before {
        time(&m1) < time(&m2)
    } else {
        time(&m1) > time(&m2)
    })
}

/// `changedbefore(a, b)`: a's status changed before b's (ctime).
fn changedbefore(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    compare_times(ctx, "changedbefore", a, |m| m.ctime(), true).map(class_result)
}

/// `accessedbefore(a, b)`: a was accessed before b (atime).
fn accessedbefore(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    compare_times(ctx, "accessedbefore", a, |m| m.atime(), true).map(class_result)
}

/// `isnewerthan(a, b)`: a was modified after b (mtime).
fn isnewerthan(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    compare_times(ctx, "isnewerthan", a, |m| m.mtime(), false).map(class_result)
}

/// `diskfree(path)`: kilobytes available to unprivileged users on the file
/// system holding the path; 0 when it cannot be asked.
fn diskfree(ctx: &mut EvalContext, a: &[Value]) -> FnResult {
    let p = Args::new("diskfree", a);
    let path = p.str(0, "path")?;
    match ctx.host().plain().free_kilobytes(path) {
        Ok(kb) => Ok(int_value(kb.min(i64::MAX as u64) as i64)),
        Err(_) => {
            crate::error!("Couldn't get filesystem info for '{path}'");
            Ok(int_value(0))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dirname_like_cfengine() {
        for (i, o) in [
            ("/a/b/c", "/a/b"),
            ("a/b", "a"),
            ("", ""),
            ("/a", "/"),
            ("a//b///", "a"),
            ("/", "/"),
            ("//", "/"),
            (".", "."),
            ("a/b//", "a"),
            ("//a///b////c///", "/a/b"),
            ("a///b////c///", "a/b"),
            ("//a", "/"),
        ] {
            assert_eq!(dirname_of(i), o, "dirname({i})");
        }
    }

    #[test]
    fn double_star_is_one_to_six_levels() {
        let v = expand_double_star("/x/**/f");
        assert_eq!(v.len(), 6);
        assert_eq!(v[0], "/x/*/f");
        assert_eq!(v[5], "/x/*/*/*/*/*/*/f");
        assert_eq!(expand_double_star("/x/*"), vec!["/x/*".to_string()]);
    }

    #[test]
    fn redundant_slashes_collapse() {
        assert_eq!(collapse_slashes("/a//b///c/"), "/a/b/c/");
        assert_eq!(collapse_slashes("c//d/file_?.txt"), "c/d/file_?.txt");
        assert_eq!(collapse_slashes("/"), "/");
    }

    #[test]
    fn listing() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), "x").unwrap();
        let files = Host::real();
        let files = files.plain();
        let mut names = files.read_dir_raw(dir.path()).unwrap();
        names.sort();
        assert_eq!(names, vec![".", "..", "f"]);
        let g = files.glob(&format!("{}/*", dir.path().display()));
        assert_eq!(g.len(), 1);
        assert!(files.read_dir_raw("/nonexistent/x").is_err());
    }

    #[test]
    fn permission_text() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("f");
        std::fs::write(&f, "x").unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o4751)).unwrap();
        let m = std::fs::metadata(&f).unwrap();
        assert_eq!(perm_string(&m), "-rwxr-x--x");
    }
}
