//! `storage`: file systems mounted (and listed in fstab) or unmounted, and
//! volumes checked for sensible content and free space, with cf-agent
//! 3.21's decisions and words. Mounting needs the file system's server
//! and its mount helper (NFS, CIFS); where they are missing the mount
//! command's failure is reported as it is.

use super::{ActContext, Actuator, Applied};
use crate::report::change::Change;

use crate::eval::expanded::ExpandedPromise;

use crate::eval::bodies::ResolvedBody;

use crate::report::Outcome;

use crate::host::exec::CommandSpec;
use crate::values::number::parse_bool;
use std::path::Path;

pub struct Storage;

const FSTAB: &str = "/etc/fstab";
/// cf-agent's defaults for a volume's sensible content: at least this many
/// entries, of at least this many bytes together.
const SENSIBLE_COUNT: i64 = 2;
const SENSIBLE_SIZE: i64 = 1000;

/// One line of /proc/mounts or fstab: what is mounted where.
#[derive(Debug, Clone, PartialEq, Eq)]
struct MountEntry {
    source: String,
    target: String,
    fstype: String,
    options: String,
}

fn parse_mounts(text: &str) -> Vec<MountEntry> {
    text.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() >= 3).then(|| MountEntry {
                source: f[0].to_string(),
                target: f[1].replace("\\040", " "),
                fstype: f[2].to_string(),
                options: f.get(3).unwrap_or(&"defaults").to_string(),
            })
        })
        .collect()
}

/// Whether the promise's mount body says too little to mount anything.
fn insufficient(body: &ResolvedBody) -> bool {
    let unmount = body.scalar("unmount").and_then(parse_bool).unwrap_or(false);
    !unmount && (body.scalar("mount_source").is_none() || body.scalar("mount_server").is_none())
}

impl Actuator for Storage {
    fn speaks_each_pass(&self) -> bool {
        true
    }

    /// cf-agent checks a mount's specification each time it meets it.
    fn check_each_pass(&self, p: &ExpandedPromise) {
        if p.body("mount").is_some_and(insufficient) {
            crate::error!("Insufficient specification in mount promise - need source and server");
        }
    }

    fn evaluate(&self, act: &mut ActContext<'_>, p: &ExpandedPromise) -> Outcome {
        // What cf-agent reports along the way decides the classes; nothing
        // reported defines none.
        let mut reported = Vec::new();
        if let Some(m) = p.body("mount") {
            if insufficient(m) {
                act.reported_outcomes = Some(Vec::new());
                return Outcome::Kept;
            }
            mount(act, p, m, &mut reported);
        }
        if let Some(v) = p.body("volume") {
            volume(act, p, v, &mut reported);
        }
        let outcome = reported.iter().fold(Outcome::Kept, |acc, o| acc.worst(*o));
        act.reported_outcomes = Some(reported);
        outcome
    }
}

fn mount(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    body: &ResolvedBody,
    reported: &mut Vec<Outcome>,
) {
    let target = p.promiser.trim_end_matches('/');
    let target = if target.is_empty() { "/" } else { target };
    let unmount = body.scalar("unmount").and_then(parse_bool).unwrap_or(false);
    let edit_fstab = body
        .scalar("edit_fstab")
        .and_then(parse_bool)
        .unwrap_or(false);
    let server = body.scalar("mount_server").unwrap_or("");
    let source = body.scalar("mount_source").unwrap_or("");
    let fstype = body.scalar("mount_type").unwrap_or("nfs");
    let options = body.list("mount_options").join(",");
    let mounted = act
        .host
        .read(Path::new("/proc/mounts"))
        .map(|b| parse_mounts(&String::from_utf8_lossy(&b)))
        .unwrap_or_default()
        .into_iter()
        .find(|m| m.target == target);
    // As cf-agent, only the path of what is mounted is compared with the
    // promised source, not the server.
    let correct = match &mounted {
        Some(m)
            if !source.is_empty()
                && m.source
                    .split_once(':')
                    .map_or(m.source.as_str(), |(_, p)| p)
                    != source =>
        {
            let (host, path) = m.source.split_once(':').unwrap_or(("localhost", &m.source));
            crate::info!(
                "A different file system '{host}:{path}' is mounted on '{target}' than what is promised"
            );
            false
        }
        Some(_) => true,
        None => false,
    };
    match (correct, unmount) {
        (true, false) => {
            crate::info!("Filesystem '{target}' seems to be mounted as promised");
            reported.push(Outcome::Kept);
        }
        (true, true) => {
            reported.push(run_mount_tool(
                act,
                vec!["/bin/umount".into(), target.into()],
                &format!("Unmounting '{target}' to keep promise"),
            ));
            if edit_fstab {
                not_in_fstab(act, target, reported);
            }
        }
        (false, true) => {
            if edit_fstab {
                not_in_fstab(act, target, reported);
            }
        }
        (false, false) => {
            // The mount point is made first, as cf-agent does, and as
            // cf-agent makes it, readable by root alone.
            let change = Change::new("create", target).after("0700");
            if act.host.stat(Path::new(target)).ok().flatten().is_none()
                && let Applied::Failed(e) =
                    act.change(change, |h| h.mkdir_all(Path::new(target), 0o700))
            {
                crate::error!("Could not make the mount point '{target}': {e}");
            }
            if edit_fstab {
                in_fstab(act, target, server, source, fstype, &options, reported);
            } else {
                crate::error!(
                    "Filesystem '{target}' was not mounted as promised, and no edits were promised in '{FSTAB}'"
                );
                reported.push(Outcome::Failed);
                let mut argv = vec!["/bin/mount".to_string(), "-t".into(), fstype.into()];
                if !options.is_empty() {
                    argv.extend(["-o".into(), options.clone()]);
                }
                argv.extend([format!("{server}:{source}"), target.to_string()]);
                reported.push(run_mount_tool(
                    act,
                    argv,
                    &format!("Mounting '{target}' to keep promise"),
                ));
            }
        }
    }
}

/// Runs mount or umount after saying so; under a dry run only warns.
fn run_mount_tool(act: &mut ActContext<'_>, argv: Vec<String>, saying: &str) -> Outcome {
    let shown = argv.join(" ");
    let change = Change::new("run", &shown)
        .done(saying)
        .should(format!("Should run '{shown}', but only warning promised"))
        .without_suffix();
    let spec = CommandSpec {
        argv,
        timeout: Some(std::time::Duration::from_secs(60)),
        ..CommandSpec::default()
    };
    match act.change(change, |h| h.run(&spec)) {
        Applied::Made(r) if r.code == Some(0) => Outcome::Repaired,
        Applied::Made(r) => {
            crate::error!("'{shown}' failed: {}", r.output_text().trim());
            Outcome::Failed
        }
        Applied::Withheld { .. } => Outcome::Warned,
        Applied::Failed(e) => {
            crate::error!("Could not run '{shown}': {e}");
            Outcome::Failed
        }
    }
}

fn read_fstab(act: &ActContext<'_>) -> String {
    act.host
        .read(Path::new(FSTAB))
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// Rewrites fstab as `change` says; the outcome.
fn write_fstab(act: &mut ActContext<'_>, change: Change, old: &str, new: &str) -> Outcome {
    let path = Path::new(FSTAB);
    let mode = act
        .host
        .lstat(path)
        .ok()
        .flatten()
        .map_or(0o644, |m| m.mode);
    let change = act
        .changes
        .with_content(change, old.as_bytes(), new.as_bytes());
    match act.change(change, |h| h.write_atomic(path, new.as_bytes(), mode)) {
        Applied::Made(()) => Outcome::Repaired,
        Applied::Withheld { .. } => Outcome::Warned,
        Applied::Failed(e) => {
            crate::error!("Could not update '{FSTAB}': {e}");
            Outcome::Failed
        }
    }
}

/// Adds the file system to fstab when no line mounts something on its
/// mount point, in cf-agent's layout, then mounts what fstab lists.
fn in_fstab(
    act: &mut ActContext<'_>,
    target: &str,
    server: &str,
    source: &str,
    fstype: &str,
    options: &str,
    reported: &mut Vec<Outcome>,
) {
    let text = read_fstab(act);
    if parse_mounts(&text).iter().any(|e| e.target == target) {
        return;
    }
    let mut new = text.clone();
    if !new.is_empty() && !new.ends_with('\n') {
        new.push('\n');
    }
    // A mount without options is listed with `defaults`, as cf-agent does.
    let options = if options.is_empty() {
        "defaults"
    } else {
        options
    };
    new.push_str(&format!(
        "{server}:{source} \t {target} \t {fstype} \t {options}\n"
    ));
    let change = Change::new("fstab_add", target)
        .after(format!("{server}:{source}"))
        .done(format!(
            "Adding file system '{server}:{source}' to '{FSTAB}'"
        ))
        .should(format!(
            "Should add file system '{server}:{source}' to '{FSTAB}'"
        ))
        .without_suffix();
    let outcome = write_fstab(act, change, &text, &new);
    reported.push(outcome);
    if outcome != Outcome::Repaired {
        return;
    }
    // cf-agent mounts everything fstab lists once its storage promises
    // changed it, and says why not only under -v.
    let spec = CommandSpec {
        argv: vec!["/bin/mount".into(), "-a".into()],
        timeout: Some(std::time::Duration::from_secs(60)),
        ..CommandSpec::default()
    };
    if let Ok(r) = act.host.run(&spec)
        && r.code != Some(0)
    {
        crate::debug!("mount -a: {}", r.output_text().trim());
    }
}

/// Takes the lines that mount something on `target` out of fstab.
fn not_in_fstab(act: &mut ActContext<'_>, target: &str, reported: &mut Vec<Outcome>) {
    let text = read_fstab(act);
    let keep: String = text
        .lines()
        .filter(|l| parse_mounts(l).first().is_none_or(|e| e.target != target))
        .map(|l| format!("{l}\n"))
        .collect();
    if keep == text {
        return;
    }
    // cf-agent names the mount point '(null)' here; we name it.
    let change = Change::new("fstab_delete", target)
        .done(format!("Deleting file system mounted on '{target}'"))
        .should(format!(
            "Should delete the file system mounted on '{target}' from '{FSTAB}'"
        ))
        .without_suffix();
    reported.push(write_fstab(act, change, &text, &keep));
}

/// `freespace`: a percentage (`10%`) or a size with cf-agent's units (k,
/// m, g: thousands; K, M, G: powers of 1024; none or b/B: bytes). Returns
/// the percentage as a negative number, as cf-agent keeps it.
fn freespace(s: &str) -> Option<i64> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: i64 = num.parse().ok()?;
    let factor: i64 = match unit {
        "" | "b" | "B" => 1,
        "%" => return Some(-n),
        "k" => 1000,
        "K" => 1024,
        "m" => 1_000_000,
        "M" => 1024 * 1024,
        "g" => 1_000_000_000,
        "G" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(factor)
}

/// Whether `name` is the mount point of a file system from another host
/// (NFS, PanFS, CIFS), as cf-agent's IsForeignFileSystem tells: on another
/// device than its parent, and mounted with such a type.
fn foreign(act: &ActContext<'_>, name: &str, meta: &crate::host::fs::Meta) -> bool {
    let parent = Path::new(name).join("..");
    let Ok(Some(pmeta)) = act.host.stat(&parent) else {
        return false;
    };
    if pmeta.dev == meta.dev {
        return false;
    }
    let mounts = act
        .host
        .read(Path::new("/proc/mounts"))
        .map(|b| parse_mounts(&String::from_utf8_lossy(&b)))
        .unwrap_or_default();
    let trimmed = name.trim_end_matches('/');
    foreign_marks(&mounts)
        .iter()
        .zip(&mounts)
        .any(|(foreign, m)| *foreign && m.target == trimmed)
}

/// Which mounts cf-agent 3.21 takes for foreign (cf-agent/nfs.c): it reads
/// `mount`'s output, a line each (`SOURCE on TARGET type TYPE (OPTIONS)`),
/// and marks a line whose words include one that is exactly "nfs",
/// "panfs" or "cifs" (a mount of type "nfs4" is not); once a line had
/// "panfs" or "cifs", every later line is marked too, as cf-agent never
/// clears those two.
fn foreign_marks(mounts: &[MountEntry]) -> Vec<bool> {
    let (mut panfs, mut cifs) = (false, false);
    mounts
        .iter()
        .map(|m| {
            let options = format!("({})", m.options);
            let words = [
                m.source.as_str(),
                "on",
                m.target.as_str(),
                "type",
                m.fstype.as_str(),
                options.as_str(),
            ];
            let has = |w: &str| words.iter().any(|x| x.split(' ').any(|y| y == w));
            let nfs = if has("panfs") {
                panfs = true;
                false
            } else if has("nfs") {
                true
            } else {
                if has("cifs") {
                    cifs = true;
                }
                false
            };
            panfs || nfs || cifs
        })
        .collect()
}

fn volume(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    body: &ResolvedBody,
    reported: &mut Vec<Outcome>,
) {
    let name = p.promiser.as_str();
    let Ok(Some(meta)) = act.host.stat(Path::new(name)) else {
        // cf-agent checks nothing it cannot stat, and says so only for the
        // free space.
        if body.scalar("freespace").is_some() {
            crate::error!(
                "Couldn't stat '{name}' while checking diskspace. (stat: No such file or directory)"
            );
        }
        return;
    };
    let int = |attr: &str, default: i64| {
        body.scalar(attr)
            .and_then(|v| crate::values::number::parse_int(v).ok())
            .unwrap_or(default)
    };
    // The content's check, then the free space's whatever the first found
    // (cf-agent's VerifyFileSystem, then VerifyFreeSpace).
    let sensible = 'content: {
        if meta.kind == crate::host::fs::FileKind::Dir {
            let entries = act.host.read_dir(Path::new(name)).unwrap_or_default();
            let size: i64 = entries
                .iter()
                .filter_map(|e| act.host.lstat(&Path::new(name).join(e)).ok().flatten())
                .map(|m| m.size as i64)
                .sum();
            if size < int("sensible_size", SENSIBLE_SIZE) {
                crate::error!("File system '{name}' is suspiciously small! ({size} bytes)");
                break 'content false;
            }
            if (entries.len() as i64) < int("sensible_count", SENSIBLE_COUNT) {
                crate::error!(
                    "Filesystem '{name}' has only {} files/directories.",
                    entries.len()
                );
                break 'content false;
            }
        }
        true
    };
    if sensible {
        crate::info!("Filesystem '{name}' content seems to be sensible as promised");
        reported.push(Outcome::Kept);
    } else {
        reported.push(Outcome::Interrupted);
    }
    let Some(want) = body.scalar("freespace") else {
        return;
    };
    let check_foreign = body
        .scalar("check_foreign")
        .and_then(crate::values::number::parse_bool)
        .unwrap_or(false);
    if !check_foreign && foreign(act, name, &meta) {
        crate::info!("Filesystem '{name}' is mounted from a foreign system, so skipping it");
        return;
    }
    let Some(want) = freespace(want) else {
        crate::error!(
            "freespace '{want}' of the volume body '{}' is not a size ({}:{})",
            body.name,
            p.file,
            p.line
        );
        reported.push(Outcome::Failed);
        return;
    };
    let usage = match act.host.disk_usage(Path::new(name)) {
        Ok(u) => u,
        Err(e) => {
            crate::error!("Couldn't stat '{name}' while checking diskspace. (statvfs: {e})");
            return;
        }
    };
    if want < 0 {
        let threshold = -want;
        let free = usage.free_percent();
        if free < threshold {
            crate::error!(
                "Free disk space is under {threshold}% for volume containing '{name}', {free}% free"
            );
            reported.push(Outcome::Failed);
        }
    } else if (usage.avail as i64) < want {
        crate::error!(
            "Disk space under {} kB for volume containing '{name}' ({} kB free)",
            want / 1024,
            usage.avail / 1024
        );
        reported.push(Outcome::Failed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mount_tables() {
        let m = parse_mounts("# c\n/dev/a /mnt/x\\040y ext4 rw 0 0\nnone /tmp tmpfs\n");
        assert_eq!(m.len(), 2);
        assert_eq!(m[0].target, "/mnt/x y");
        assert_eq!(m[1].options, "defaults");
    }

    #[test]
    fn foreign_as_cf_agent_reads_mount() {
        let m = parse_mounts(
            "srv:/e /a nfs rw 0 0\nsrv:/e /b nfs4 rw 0 0\nnfs /c tmpfs rw 0 0\n/dev/x /d ext4 rw 0 0\n//h/s /e cifs rw 0 0\n/dev/y /f ext4 rw 0 0\n",
        );
        assert_eq!(
            foreign_marks(&m),
            vec![true, false, true, false, true, true]
        );
    }

    #[test]
    fn freespace_units_as_cf_agent() {
        assert_eq!(freespace("10%"), Some(-10));
        assert_eq!(freespace("10M"), Some(10 * 1024 * 1024));
        assert_eq!(freespace("1k"), Some(1000));
        assert_eq!(freespace("1K"), Some(1024));
        assert_eq!(freespace("7"), Some(7));
        assert_eq!(freespace("x"), None);
    }
}
