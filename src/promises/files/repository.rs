//! The repository (a files promise's `repository`, else agent control's
//! `default_repository`): the backup a copy or an edit makes beside the
//! file (`.cfsaved`, `.cf-before-edit`) is moved there instead, named by
//! its canonified path, as cf-agent's `ArchiveToRepository` does.

use super::dir_mode;
use crate::eval::expanded::ExpandedPromise;
use crate::promises::ActContext;
use std::path::{Path, PathBuf};

/// Where this promise's backups go, if it has a repository.
pub(super) fn of(act: &ActContext<'_>, p: &ExpandedPromise) -> Option<PathBuf> {
    p.scalar("repository")
        .map(str::to_string)
        .or_else(|| act.ctx.agent_control().default_repository.clone())
        .filter(|r| !r.is_empty())
        .map(PathBuf::from)
}

/// Moves a backup into the repository; whether it is there now (then the
/// backup beside the file is gone).
pub(super) fn archive(act: &mut ActContext<'_>, repo: &Path, backup: &Path) -> bool {
    let shown = backup.display().to_string();
    let dest = repo.join(crate::values::canon::canonify(&shown));
    let Ok(Some(meta)) = act.host.lstat(backup) else {
        crate::trace!("File '{shown}' promised to archive to the repository but it disappeared!");
        return true;
    };
    // As cf-agent, a repository that cannot be made is found out by the copy.
    let _ = act.host.mkdir_all(repo, dir_mode(act));
    match act.host.copy_atomic(backup, &dest, meta.mode) {
        Ok(()) => {
            crate::info!(
                "Moved '{shown}' to repository location '{}'",
                dest.display()
            );
            if let Err(e) = act.host.remove_file(backup) {
                crate::error!("Failed to clean backup '{shown}' after archiving: {e}");
            }
            true
        }
        Err(e) => {
            crate::info!(
                "Failed to move '{shown}' to repository location '{}': {e}",
                dest.display()
            );
            false
        }
    }
}
