//! The package inventory caches of the work directory: what is installed
//! and which updates are available.
//!
//! Two kinds, as cf-agent 3.21 has them:
//! - the legacy inventory of `package_method` promises, one
//!   `name,version,arch,method` line per package ending in CRLF (cf-agent's
//!   CSV reader needs it), in `state/software_packages.csv` and
//!   `state/software_patches_avail.csv`;
//! - one cache per package module (`packages` promises with
//!   `package_module`), `name,version,arch` lines (cf-agent's `<inventory>`
//!   record) in `state/packages_installed_MODULE.csv` and
//!   `state/packages_updates_MODULE.csv`.
//!
//! The package promises write these and the functions `packagesmatching`
//! and `packageupdatesmatching` read them; this module is the one place
//! that knows the formats.

use std::path::{Path, PathBuf};

/// One package of an inventory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackageRecord {
    pub name: String,
    pub version: String,
    pub arch: String,
    pub method: String,
}

/// Which inventory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inventory {
    Installed,
    Updates,
}

/// The cache file of an inventory in a work directory.
pub fn inventory_path(workdir: &Path, which: Inventory) -> PathBuf {
    workdir.join("state").join(match which {
        Inventory::Installed => "software_packages.csv",
        Inventory::Updates => "software_patches_avail.csv",
    })
}

/// The packages of an inventory; empty when there is no cache yet.
pub fn read_inventory(workdir: &Path, which: Inventory) -> Vec<PackageRecord> {
    super::local::read_to_string(inventory_path(workdir, which))
        .map(|t| parse_inventory(&t))
        .unwrap_or_default()
}

/// When an inventory was last written (seconds since the epoch); `None`
/// when there is none.
pub fn inventory_mtime(workdir: &Path, which: Inventory) -> Option<i64> {
    state_file_mtime(&inventory_path(workdir, which))
}

/// When a state file was last written (seconds since the epoch); `None`
/// when there is none.
pub fn state_file_mtime(path: &Path) -> Option<i64> {
    use std::os::unix::fs::MetadataExt;
    super::local::metadata(path).ok().map(|m| m.mtime())
}

/// Replaces an inventory (written whole, then renamed into place).
pub fn write_inventory(
    workdir: &Path,
    which: Inventory,
    packages: &[PackageRecord],
) -> std::io::Result<()> {
    let path = inventory_path(workdir, which);
    if let Some(dir) = path.parent() {
        super::local::create_private_dir(dir)?;
    }
    let text: String = packages
        .iter()
        .map(|p| format!("{},{},{},{}\r\n", p.name, p.version, p.arch, p.method))
        .collect();
    // A state file: 0600, written beside and renamed.
    super::local::write_private(&path, text.as_bytes())
}

/// Marks an inventory out of date: its times go back to the epoch, as
/// cf-agent marks its own after the package manager changed something.
pub fn invalidate_inventory(workdir: &Path, which: Inventory) -> std::io::Result<()> {
    let file = std::fs::OpenOptions::new()
        .append(true)
        .open(inventory_path(workdir, which))?;
    let epoch = std::time::UNIX_EPOCH;
    file.set_times(
        std::fs::FileTimes::new()
            .set_accessed(epoch)
            .set_modified(epoch),
    )
}

/// Creates a timestamp file of the state directory, or brings its time to
/// now (cf-agent's `software_update_timestamp_*`).
pub fn touch_state_file(path: &Path) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        super::local::create_private_dir(dir)?;
    }
    super::local::ensure_private_file(path)?;
    let file = std::fs::OpenOptions::new().append(true).open(path)?;
    file.set_modified(std::time::SystemTime::now())
}

/// Parses `name,version,arch,method` lines (CRLF or LF); shorter lines are
/// skipped.
pub fn parse_inventory(text: &str) -> Vec<PackageRecord> {
    text.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.trim_end_matches('\r').split(',').collect();
            (f.len() >= 4).then(|| PackageRecord {
                name: f[0].to_string(),
                version: f[1].to_string(),
                arch: f[2].to_string(),
                method: f[3].to_string(),
            })
        })
        .collect()
}

/// The cache of one package module in a work directory.
pub fn module_inventory_path(workdir: &Path, which: Inventory, module: &str) -> PathBuf {
    workdir.join("state").join(match which {
        Inventory::Installed => format!("packages_installed_{module}.csv"),
        Inventory::Updates => format!("packages_updates_{module}.csv"),
    })
}

/// The packages a module's cache holds (`method` is the module's name);
/// `None` when the module has no cache yet.
pub fn read_module_inventory(
    workdir: &Path,
    which: Inventory,
    module: &str,
) -> Option<Vec<PackageRecord>> {
    let text = super::local::read_to_string(module_inventory_path(workdir, which, module)).ok()?;
    Some(
        text.lines()
            .filter_map(|l| {
                let mut f = l.splitn(3, ',');
                Some(PackageRecord {
                    name: f.next()?.to_string(),
                    version: f.next()?.to_string(),
                    arch: f.next()?.to_string(),
                    method: module.to_string(),
                })
            })
            .collect(),
    )
}

/// Replaces a module's cache (written whole, then renamed into place).
pub fn write_module_inventory(
    workdir: &Path,
    which: Inventory,
    module: &str,
    packages: &[PackageRecord],
) -> std::io::Result<()> {
    let path = module_inventory_path(workdir, which, module);
    if let Some(dir) = path.parent() {
        super::local::create_private_dir(dir)?;
    }
    let text: String = packages
        .iter()
        .map(|p| format!("{},{},{}\n", p.name, p.version, p.arch))
        .collect();
    // A state file: 0600, written beside and renamed.
    super::local::write_private(&path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inventories_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        assert!(read_inventory(dir.path(), Inventory::Installed).is_empty());
        let p = vec![PackageRecord {
            name: "bash".into(),
            version: "5.2".into(),
            arch: "amd64".into(),
            method: "apt_get".into(),
        }];
        write_inventory(dir.path(), Inventory::Installed, &p).unwrap();
        assert_eq!(read_inventory(dir.path(), Inventory::Installed), p);
        let text =
            std::fs::read_to_string(inventory_path(dir.path(), Inventory::Installed)).unwrap();
        assert_eq!(text, "bash,5.2,amd64,apt_get\r\n");
        // A state file, private as the rest of the state (issue 14).
        use std::os::unix::fs::MetadataExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().mode() & 0o7777;
        assert_eq!(
            mode(&inventory_path(dir.path(), Inventory::Installed)),
            0o600
        );
        assert_eq!(mode(&dir.path().join("state")), 0o700);
        assert!(read_inventory(dir.path(), Inventory::Updates).is_empty());
        assert_eq!(parse_inventory("a,1,x,m\r\nshort,1\n").len(), 1);
    }

    #[test]
    fn module_caches_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            read_module_inventory(dir.path(), Inventory::Installed, "apt_get"),
            None
        );
        let p = vec![PackageRecord {
            name: "zip".into(),
            version: "3.0-4".into(),
            arch: "amd64".into(),
            method: "apt_get".into(),
        }];
        write_module_inventory(dir.path(), Inventory::Installed, "apt_get", &p).unwrap();
        assert_eq!(
            read_module_inventory(dir.path(), Inventory::Installed, "apt_get"),
            Some(p)
        );
        let path = module_inventory_path(dir.path(), Inventory::Installed, "apt_get");
        assert!(path.ends_with("state/packages_installed_apt_get.csv"));
        assert_eq!(std::fs::read_to_string(path).unwrap(), "zip,3.0-4,amd64\n");
        write_module_inventory(dir.path(), Inventory::Updates, "apt_get", &[]).unwrap();
        assert_eq!(
            read_module_inventory(dir.path(), Inventory::Updates, "apt_get"),
            Some(Vec::new())
        );
    }
}
