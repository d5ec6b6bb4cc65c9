//! `fsattrs => body fsattrs { immutable => "true"|"false"; }` (CFEngine
//! 3.27): the immutable bit of the promised file, as cf-agent 3.28 keeps
//! it. `"false"` clears a set bit before anything else the promise does;
//! `"true"` sets it after everything else, and when the file was immutable
//! already, the promise's own changes to it override the bit (the host
//! clears it for each change and sets it again after, see
//! [`crate::host::fsattrs`]). Where the file system (or the file: a
//! directory, a link) has no such bit, the promise says so at verbose level
//! and goes on, as cf-agent does.

use super::{ActContext, Verdict};
use crate::eval::expanded::ExpandedPromise;
use crate::host::fsattrs::FsAttrsError;
use crate::promises::Applied;
use crate::report::change::Change;
use crate::values::number::parse_bool;
use std::path::{Path, PathBuf};

/// What the promise's `fsattrs` asks, and what the file was when it began.
#[derive(Debug)]
pub(super) struct Immutable {
    path: PathBuf,
    want: bool,
    was: bool,
}

/// Logs an error at the level cf-agent gives it: a failure is an error, a
/// bit the file or its file system does not have verbose, a missing file
/// debug (`debug_missing`) or verbose.
fn log_unavailable(e: &FsAttrsError, debug_missing: bool, line: impl FnOnce() -> String) {
    match e {
        FsAttrsError::Failure(_) => crate::error!("{}", line()),
        FsAttrsError::Missing if debug_missing => crate::trace!("{}", line()),
        _ => crate::debug!("{}", line()),
    }
}

/// The start of a files promise with `fsattrs`: reads the bit, clears it
/// when the promise says `immutable => "false"`, and turns the host's
/// override on when the promise says `"true"` of a file that is immutable.
pub(super) fn begin(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    target: &Path,
    v: &mut Verdict,
) -> Option<Immutable> {
    let want = p
        .body("fsattrs")?
        .scalar("immutable")
        .and_then(parse_bool)?;
    let shown = target.display().to_string();
    let was = match act.host.immutable(target) {
        Ok(on) => on,
        Err(e) => {
            log_unavailable(&e, false, || {
                format!("Failed to get the state of the immutable bit from file '{shown}': {e}")
            });
            false
        }
    };
    if !want {
        if was {
            let change = Change::new("immutable", shown.as_str())
                .before("true")
                .after("false")
                .done(format!("Cleared the immutable bit on file '{shown}'"))
                .should(format!("Should clear the immutable bit on file '{shown}'"));
            settle(
                act.change(change, |h| h.set_immutable(target, false)),
                v,
                || format!("Failed to clear the immutable bit on file '{shown}'"),
            );
        } else {
            crate::debug!("The immutable bit is not set on file '{shown}' as promised");
        }
    }
    act.host.set_override_immutable(want && was);
    Some(Immutable {
        path: target.to_path_buf(),
        want,
        was,
    })
}

/// The end of the promise: the host's override goes off, and the bit is
/// set when the promise says `immutable => "true"`. A file that was
/// immutable is so again (a copy installs a new file under its name).
pub(super) fn end(act: &mut ActContext<'_>, st: Immutable, v: &mut Verdict) {
    act.host.set_override_immutable(false);
    if !st.want {
        return;
    }
    let shown = st.path.display().to_string();
    if st.was {
        if matches!(act.host.immutable(&st.path), Ok(false)) {
            let _ = act.host.set_immutable(&st.path, true);
        }
        crate::debug!("The immutable bit is already set on file '{shown}' as promised");
        return;
    }
    let change = Change::new("immutable", shown.as_str())
        .before("false")
        .after("true")
        .done(format!("Set the immutable bit on file '{shown}'"))
        .should(format!("Should set the immutable bit on file '{shown}'"));
    // Nothing there (a file the promise did not make, or a dry run's):
    // nothing to set, said at debug level as cf-agent says it.
    if act.host.lstat(&st.path).ok().flatten().is_none() {
        crate::trace!("Failed to set the immutable bit on file '{shown}': File does not exist");
        return;
    }
    let path = st.path.clone();
    settle(
        act.change(change, |h| h.set_immutable(&path, true)),
        v,
        || format!("Failed to set the immutable bit on file '{shown}'"),
    );
}

/// Records a change of the bit: a failure fails the promise; a bit the
/// file or its file system does not have does not (verbose), nor does a
/// file that is not there (debug).
fn settle(made: Applied<(), FsAttrsError>, v: &mut Verdict, failed: impl Fn() -> String) {
    match made {
        Applied::Failed(e) if !e.is_failure() => {
            log_unavailable(&e, true, || format!("{}: {e}", failed()));
        }
        made => {
            v.settle(made, |e| crate::error!("{}: {e}", failed()));
        }
    }
}
