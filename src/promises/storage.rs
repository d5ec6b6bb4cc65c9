//! `storage`: file systems mounted (and listed in fstab) or unmounted,
//! and volumes checked for free space.

use super::{ActContext, Actuator, ExpandedPromise, Outcome, ResolvedBody, parse_bool};
use crate::host::exec::CommandSpec;
use std::path::Path;

pub struct Storage;

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

impl Actuator for Storage {
    fn evaluate(&self, act: &mut ActContext<'_>, p: &ExpandedPromise) -> Outcome {
        let mut outcome = Outcome::Kept;
        if let Some(m) = p.body("mount") {
            outcome = mount(act, p, m);
        }
        if let Some(v) = p.body("volume") {
            outcome = outcome.worst(volume(p, v));
        }
        outcome
    }
}

fn mount(act: &mut ActContext<'_>, p: &ExpandedPromise, body: &ResolvedBody) -> Outcome {
    let target = p.promiser.trim_end_matches('/');
    let target = if target.is_empty() { "/" } else { target };
    let fstype = body.scalar("mount_type").unwrap_or("nfs").to_string();
    let source = match (body.scalar("mount_server"), body.scalar("mount_source")) {
        (Some(server), Some(src)) if !server.is_empty() => format!("{server}:{src}"),
        (_, Some(src)) => src.to_string(),
        (_, None) => {
            tracing::error!(
                "storage promise '{}': the mount body '{}' has no mount_source",
                p.promiser,
                body.name
            );
            return Outcome::Failed;
        }
    };
    let options = body.list("mount_options");
    let unmount = body.scalar("unmount").and_then(parse_bool).unwrap_or(false);
    let edit_fstab = body
        .scalar("edit_fstab")
        .and_then(parse_bool)
        .unwrap_or(false);
    let mounted = act
        .host
        .read(Path::new("/proc/mounts"))
        .map(|b| parse_mounts(&String::from_utf8_lossy(&b)))
        .unwrap_or_default()
        .into_iter()
        .any(|m| m.target == target);
    let mut outcome = Outcome::Kept;
    if edit_fstab {
        outcome = fstab(act, target, &source, &fstype, &options, !unmount);
        if outcome == Outcome::Failed {
            return outcome;
        }
    }
    let argv: Vec<String> = if unmount && mounted {
        vec!["/bin/umount".into(), target.into()]
    } else if !unmount && !mounted {
        let mut a = vec!["/bin/mount".to_string(), "-t".into(), fstype.clone()];
        if !options.is_empty() {
            a.extend(["-o".into(), options.join(",")]);
        }
        a.extend([source.clone(), target.to_string()]);
        a
    } else {
        return outcome;
    };
    if act.dry_run {
        tracing::warn!("Should run '{}', but only warning promised", argv.join(" "));
        return Outcome::Warned;
    }
    let spec = CommandSpec {
        argv: argv.clone(),
        timeout: Some(std::time::Duration::from_secs(60)),
        ..CommandSpec::default()
    };
    match act.host.run(&spec) {
        Ok(r) if r.code == Some(0) => {
            if unmount {
                tracing::info!("Unmounted '{target}'");
            } else {
                tracing::info!("Mounted '{source}' on '{target}'");
            }
            Outcome::Repaired
        }
        Ok(r) => {
            tracing::error!("'{}' failed: {}", argv.join(" "), r.output_text().trim());
            Outcome::Failed
        }
        Err(e) => {
            tracing::error!("Could not run '{}': {e}", argv.join(" "));
            Outcome::Failed
        }
    }
}

/// Puts the mount in /etc/fstab (or takes it out).
fn fstab(
    act: &mut ActContext<'_>,
    target: &str,
    source: &str,
    fstype: &str,
    options: &[String],
    present: bool,
) -> Outcome {
    let path = Path::new("/etc/fstab");
    let text = act
        .host
        .read(path)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default();
    let entries = parse_mounts(&text);
    let has = entries.iter().any(|e| e.target == target);
    if has == present {
        return Outcome::Kept;
    }
    let new_text = if present {
        let opts = if options.is_empty() {
            "defaults".to_string()
        } else {
            options.join(",")
        };
        let mut t = text.clone();
        if !t.is_empty() && !t.ends_with('\n') {
            t.push('\n');
        }
        t.push_str(&format!("{source} {target} {fstype} {opts} 0 0\n"));
        t
    } else {
        text.lines()
            .filter(|l| parse_mounts(l).first().is_none_or(|e| e.target != target))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    if act.dry_run {
        tracing::warn!(
            "Should {} '{target}' in /etc/fstab",
            if present { "add" } else { "remove" }
        );
        return Outcome::Warned;
    }
    crate::promises::files::show_diff(act, path, text.as_bytes(), new_text.as_bytes());
    let mode = act
        .host
        .lstat(path)
        .ok()
        .flatten()
        .map_or(0o644, |m| m.mode);
    match act.host.write_atomic(path, new_text.as_bytes(), mode) {
        Ok(()) => {
            tracing::info!(
                "{} '{target}' in /etc/fstab",
                if present { "Added" } else { "Removed" }
            );
            Outcome::Repaired
        }
        Err(e) => {
            tracing::error!("Could not update /etc/fstab: {e}");
            Outcome::Failed
        }
    }
}

/// `volume`: enough free space (`freespace` as a percentage or a size).
fn volume(p: &ExpandedPromise, body: &ResolvedBody) -> Outcome {
    let Some(free) = body.scalar("freespace") else {
        return Outcome::Kept;
    };
    let Ok(c) = std::ffi::CString::new(p.promiser.as_str()) else {
        return Outcome::Failed;
    };
    // SAFETY: statvfs fills the zeroed struct; c is a valid path.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        tracing::error!(
            "Cannot check free space of '{}': {}",
            p.promiser,
            std::io::Error::last_os_error()
        );
        return Outcome::Failed;
    }
    let block = st.f_frsize as u64;
    let total = st.f_blocks as u64 * block;
    let avail = st.f_bavail as u64 * block;
    let ok = match free.strip_suffix('%') {
        Some(pct) => pct
            .trim()
            .parse::<f64>()
            .is_ok_and(|want| total > 0 && (avail as f64) * 100.0 / (total as f64) >= want),
        None => {
            crate::eval::promises::parse_int(free).is_ok_and(|want| avail as i64 >= want * 1024)
        }
    };
    if ok {
        Outcome::Kept
    } else {
        tracing::error!(
            "Free space on '{}' is below the promised {free} ({} KiB available)",
            p.promiser,
            avail / 1024
        );
        Outcome::Failed
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
}
