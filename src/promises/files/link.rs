//! `link_from`: symbolic links (absolute or relative) and hard links.

use super::super::{ActContext, Applied};
use crate::report::change::Change;

use crate::eval::expanded::ExpandedPromise;

use crate::eval::bodies::ResolvedBody;

use super::Verdict;
use crate::host::fs::FileKind;
use crate::values::number::parse_bool;
use std::path::{Component, Path, PathBuf};

pub fn link_from(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    body: &ResolvedBody,
    v: &mut Verdict,
) {
    let Some(source) = body.scalar("source").map(PathBuf::from) else {
        crate::error!(
            "link_from body '{}' of '{}' has no source",
            body.name,
            p.promiser
        );
        v.failed();
        return;
    };
    if body.scalar("link_children").and_then(parse_bool) == Some(true) {
        return link_children(act, p, target, &source, body, v);
    }
    link_one(act, p, target, source, body, v);
}

/// `link_children`: `target` is a directory (made 0700 when missing) and
/// each child of the source directory gets a link in it, as cf-agent
/// links them; a child's name already taken by a file (not a link or a
/// directory) is left alone unless `when_linking_children` is
/// `override_file`.
fn link_children(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    source: &Path,
    body: &ResolvedBody,
    v: &mut Verdict,
) {
    match act.host.lstat(target).ok().flatten() {
        Some(m) if m.kind == FileKind::Symlink && moves_obstructions(p, body) => {
            let change = Change::new("delete", &p.promiser)
                .done(format!("Removed obstructing link '{}'", target.display()))
                .should(format!(
                    "Should remove obstructing link '{}'",
                    target.display()
                ));
            let made = act.change(change, |h| h.remove_file(target));
            v.settle(made, |e| {
                crate::error!(
                    "Failed to remove obstructing link '{}': {e}",
                    target.display()
                )
            });
        }
        Some(m) if m.kind != FileKind::Dir => {
            crate::error!(
                "Cannot promise to link files to children of '{}' as it is not a directory",
                target.display()
            );
            v.failed();
            return;
        }
        Some(_) => {}
        None => super::copy::ensure_dir(act, p, target, super::dir_mode(act), v),
    }
    let children = match act.host.read_dir(source) {
        Ok(c) => c,
        Err(e) => {
            crate::error!(
                "Can't open source of children to link '{}'. (opendir: {e})",
                source.display()
            );
            v.failed();
            return;
        }
    };
    let override_files = body.scalar("when_linking_children") == Some("override_file");
    for name in children {
        let child = target.join(&name);
        let taken = act
            .host
            .lstat(&child)
            .ok()
            .flatten()
            .is_some_and(|m| m.kind != FileKind::Symlink && m.kind != FileKind::Dir);
        if taken && !override_files {
            crate::debug!(
                "Have promised not to disturb existing content belonging to '{}'",
                child.display()
            );
            continue;
        }
        link_one(act, p, &child, source.join(&name), body, v);
    }
}

/// One link: `target` made a link to `source` as the body says.
fn link_one(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    source: PathBuf,
    body: &ResolvedBody,
    v: &mut Verdict,
) {
    let link_type = body.scalar("link_type").unwrap_or("symlink");
    // A relative source is where the link would lead: from the link's
    // directory (10_files/10_links/edit_linked_file.cf).
    let resolved = target.parent().unwrap_or(Path::new("/")).join(&source);
    let source_exists = act.host.stat(&resolved).ok().flatten().is_some();
    if !source_exists {
        match body.scalar("when_no_source").unwrap_or("nop") {
            "force" => {}
            "delete" => {
                if act.host.lstat(target).ok().flatten().is_some() {
                    let change = Change::new("delete", &p.promiser)
                        .done(format!(
                            "Removed link '{}': its source '{}' does not exist",
                            p.promiser,
                            source.display()
                        ))
                        .should(format!(
                            "Should remove link '{}' to a missing source",
                            p.promiser
                        ))
                        .without_suffix();
                    let made = act.change(change, |h| h.remove_file(target));
                    // A link that cannot be removed is left as it is.
                    if !matches!(made, Applied::Failed(_)) {
                        v.settle(made, |_| {});
                    }
                }
                return;
            }
            _ => {
                crate::error!(
                    "Can't link '{}' to '{}': the source does not exist",
                    p.promiser,
                    source.display()
                );
                v.failed();
                return;
            }
        }
    }
    // cf-agent resolves `.` and `..` in the source of a relative or an
    // absolute link before it writes one (a plain symlink takes the source
    // as written).
    let text = match link_type {
        "relative" => relative_to(
            target.parent().unwrap_or(Path::new("/")),
            &compress(&source),
        ),
        "absolute" => compress(&source),
        _ => source.clone(),
    };
    settle_link(
        act,
        p,
        target,
        (&source, &resolved, &text),
        link_type,
        body,
        v,
    );
}

/// `linkcopy_patterns`: `target` made a link to the copy's `source` (a
/// file, not a link) instead of a copy of it, as the body's `link_type`
/// says, as cf-agent's LinkCopy does: a plain symlink's text is the source
/// as written, `relative` and `absolute` ones resolve its `.` and `..`.
pub(super) fn link_instead_of_copy(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    source: &Path,
    body: &ResolvedBody,
    v: &mut Verdict,
) {
    let link_type = body.scalar("link_type").unwrap_or("symlink");
    let dir = target.parent().unwrap_or(Path::new("/"));
    let text = match link_type {
        "relative" => relative_to(dir, &compress(source)),
        "absolute" => compress(source),
        _ => source.to_path_buf(),
    };
    let resolved = dir.join(source);
    if act.host.stat(dir).ok().flatten().is_none() {
        let mode = super::dir_mode(act);
        let change = Change::new("create", dir.display().to_string())
            .after(format!("{mode:04o}"))
            .done(format!(
                "Created parent directory for '{}'",
                target.display()
            ))
            .should(format!("Should create directory '{}'", dir.display()));
        let made = act.change(change, |h| h.mkdir_all(dir, mode));
        v.settle(made, |e| {
            crate::error!("Could not create directory '{}': {e}", dir.display())
        });
    }
    settle_link(
        act,
        p,
        target,
        (source, &resolved, &text),
        link_type,
        body,
        v,
    );
}

/// Makes `target` the link `text` (a hard link to `resolved` for
/// `hardlink`) unless it already is; what is in the way is moved only
/// with `move_obstructions`.
fn settle_link(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    (source, resolved, text): (&Path, &Path, &Path),
    link_type: &str,
    body: &ResolvedBody,
    v: &mut Verdict,
) {
    let (source, resolved, text) = (
        source.to_path_buf(),
        resolved.to_path_buf(),
        text.to_path_buf(),
    );
    let current = act.host.lstat(target).ok().flatten();
    if link_type == "hardlink" {
        let (Some(cur), Some(src)) = (current, act.host.stat(&resolved).ok().flatten()) else {
            return make(act, target, &resolved, &text, true, v);
        };
        if cur.ino == src.ino && cur.dev == src.dev {
            return;
        }
        return replace(act, p, target, &resolved, &text, true, body, v);
    }
    match current {
        None => make(act, target, &source, &text, false, v),
        Some(m) if m.kind == FileKind::Symlink => {
            let current = act.host.read_link(target).ok();
            if current.as_deref() == Some(text.as_path()) {
                return;
            }
            if !moves_obstructions(p, body) {
                crate::error!(
                    "Link '{}' points to '{}' not '{}', but not moving obstructions",
                    target.display(),
                    current.unwrap_or_default().display(),
                    text.display()
                );
                v.failed();
                return;
            }
            replace(act, p, target, &source, &text, false, body, v);
        }
        Some(_) => replace(act, p, target, &source, &text, false, body, v),
    }
}

/// Makes `target` a symlink whose text is `text` (a link that `copy_from`
/// copies as a link): kept when it already is one, else made or replaced.
pub(super) fn copy_link(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    text: &Path,
    body: &ResolvedBody,
    v: &mut Verdict,
) {
    match act.host.lstat(target).ok().flatten() {
        None => make(act, target, text, text, false, v),
        Some(m)
            if m.kind == FileKind::Symlink
                && act.host.read_link(target).ok().as_deref() == Some(text) => {}
        Some(_) => replace(act, p, target, text, text, false, body, v),
    }
}

#[allow(clippy::too_many_arguments)]
fn replace(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    source: &Path,
    text: &Path,
    hard: bool,
    body: &ResolvedBody,
    v: &mut Verdict,
) {
    let is_link = act
        .host
        .lstat(target)
        .ok()
        .flatten()
        .is_some_and(|m| m.kind == FileKind::Symlink);
    if !is_link && !moves_obstructions(p, body) {
        crate::error!("Object '{}' is obstructing promise", target.display());
        crate::error!(
            "Unable to create link '{}' -> '{}', failed to move obstruction",
            target.display(),
            text.display()
        );
        v.failed();
        return;
    }
    let moved = PathBuf::from(format!("{}.cfsaved", target.display()));
    let mut change = Change::new("replace", target.display().to_string())
        .after(source.display().to_string())
        .should(format!(
            "Should replace '{}' with a link to '{}'",
            target.display(),
            source.display()
        ))
        .without_suffix();
    if !is_link {
        change = change.done(format!(
            "Moved obstructing object '{}' to '{}'",
            target.display(),
            moved.display()
        ));
    }
    let made = act.change(change, |h| {
        if is_link {
            h.remove_file(target)
        } else {
            h.rename(target, &moved)
        }
    });
    match made {
        Applied::Made(()) => {}
        Applied::Withheld { outcome, .. } => {
            v.settle(
                Applied::<(), ()>::Withheld {
                    outcome,
                    as_if_made: false,
                },
                |_| {},
            );
            return;
        }
        Applied::Failed(e) => {
            crate::error!("Could not remove '{}' to relink it: {e}", target.display());
            v.failed();
            return;
        }
    }
    make(act, target, source, text, hard, v);
}

fn make(
    act: &mut ActContext<'_>,
    target: &Path,
    source: &Path,
    text: &Path,
    hard: bool,
    v: &mut Verdict,
) {
    // cf-agent's words: MakeHardLink's or MakeLink's.
    let done = if hard {
        format!(
            "Hard linked file '{}' -> '{}'",
            target.display(),
            source.display()
        )
    } else {
        format!(
            "Linked files '{}' -> '{}'",
            target.display(),
            text.display()
        )
    };
    let change = Change::new("link", target.display().to_string())
        .after(text.display().to_string())
        .done(done)
        .should(format!("Should create link '{}'", target.display()));
    let made = act.change(change, |h| {
        if hard {
            h.hard_link(source, target)
        } else {
            h.symlink(text, target)
        }
    });
    v.settle(made, |e| {
        crate::error!(
            "Could not link '{}' -> '{}': {e}",
            target.display(),
            source.display()
        )
    });
}

/// Whether the promise may move what is in the way of its link.
fn moves_obstructions(p: &ExpandedPromise, body: &ResolvedBody) -> bool {
    p.flag("move_obstructions").unwrap_or(false)
        || body.scalar("move_obstructions").and_then(parse_bool) == Some(true)
}

/// An absolute path with its `.` and `..` resolved by name, as cf-agent
/// compresses a link's source (`/a/./b/../c` is `/a/c`).
fn compress(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// `to` written relative to directory `from` (both absolute), starting
/// with `./` as cf-agent writes relative links (`./../c/d`, `./x`).
fn relative_to(from: &Path, to: &Path) -> PathBuf {
    let f: Vec<Component> = from.components().collect();
    let t: Vec<Component> = to.components().collect();
    let common = f.iter().zip(&t).take_while(|(a, b)| a == b).count();
    let mut out = PathBuf::from(".");
    for _ in common..f.len() {
        out.push("..");
    }
    for c in &t[common..] {
        out.push(c.as_os_str());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relative_paths() {
        assert_eq!(
            relative_to(Path::new("/a/b"), Path::new("/a/c/d")),
            PathBuf::from("./../c/d")
        );
        assert_eq!(
            relative_to(Path::new("/a"), Path::new("/a/x")),
            PathBuf::from("./x")
        );
        assert_eq!(compress(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
    }
}
