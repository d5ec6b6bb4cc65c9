//! The caches of what each package module has installed and which updates
//! it offers, as cf-agent 3.21 keeps them: asked of the module at most once
//! per run each (cf-agent's per-run lock cache), across runs no more often
//! than the body's `query_installed_ifelapsed` / `query_updates_ifelapsed`
//! minutes (ignored under `-K`), always when the cache does not exist yet,
//! and again after every change the agent makes. The files are in the work
//! directory (see [`crate::host::packages`]). A dry run refreshes them too,
//! as cf-agent's does (they describe the machine), but never asks for
//! `list-updates`, which fetches the repositories' lists (`apt-get update`)
//! and so changes the machine: it asks for `list-updates-local`, what the
//! machine already knows.

use super::module::{CF_NOINT, Module, ModuleBody, options_text, parse_package_list};
use crate::host::Host;
use crate::host::packages::{
    Inventory, PackageRecord, module_inventory_path, read_module_inventory, write_module_inventory,
};
use crate::report::change::{Change, Changes, Decision, Mode};
use crate::state::{LockStatus, StateStore};
use std::collections::HashMap;
use std::path::PathBuf;

/// Which list a module is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Installed,
    /// Updates, from the network if need be.
    Updates,
    /// Updates, from what the machine already knows.
    LocalUpdates,
}

impl ListKind {
    fn command(self) -> &'static str {
        match self {
            ListKind::Installed => "list-installed",
            ListKind::Updates => "list-updates",
            ListKind::LocalUpdates => "list-updates-local",
        }
    }

    fn inventory(self) -> Inventory {
        match self {
            ListKind::Installed => Inventory::Installed,
            ListKind::Updates | ListKind::LocalUpdates => Inventory::Updates,
        }
    }
}

/// What one run knows of the package modules' caches.
#[derive(Debug, Default)]
pub struct Session {
    modules: HashMap<String, ModuleCaches>,
    /// The lists of the old package promise's list commands.
    pub legacy: super::legacy::LegacyLists,
}

#[derive(Debug, Default)]
struct ModuleCaches {
    /// The lists as read or last asked for in this run.
    installed: Option<Vec<PackageRecord>>,
    updates: Option<Vec<PackageRecord>>,
    /// The cache locks taken in this run: each is taken once per run.
    installed_locked: bool,
    updates_locked: bool,
}

impl ModuleCaches {
    fn list(&mut self, which: Inventory) -> &mut Option<Vec<PackageRecord>> {
        match which {
            Inventory::Installed => &mut self.installed,
            Inventory::Updates => &mut self.updates,
        }
    }

    fn locked(&mut self, which: Inventory) -> &mut bool {
        match which {
            Inventory::Installed => &mut self.installed_locked,
            Inventory::Updates => &mut self.updates_locked,
        }
    }
}

/// What the package promises need of the run.
pub struct Env<'s> {
    pub host: &'s Host,
    pub workdir: PathBuf,
    /// The promise's changes: whether each is made.
    pub changes: &'s mut Changes,
    /// Whether the cache locks taken are kept for later runs: not under
    /// `-K`, nor under a dry run, which as cf-agent's leaves them as they
    /// were.
    pub record_locks: bool,
    /// `-K`: the cache locks do not hold across runs.
    pub no_lock: bool,
    pub state: Option<&'s mut StateStore>,
    /// The run's clock, seconds since the epoch.
    pub now: i64,
    pub session: &'s mut Session,
}

impl Env<'_> {
    /// cf-agent's MakingChanges: whether to make a change, or (under a dry
    /// run or a warn-only promise) to say it should be made.
    pub fn making_changes(&mut self, what: &str) -> bool {
        let change = Change::new("package", what).should(format!("Should {what}"));
        match self.changes.plan(&change) {
            Decision::Make => {
                self.changes.made(change);
                true
            }
            Decision::Withheld { .. } => false,
        }
    }

    fn caches(&mut self, module: &str) -> &mut ModuleCaches {
        self.session.modules.entry(module.to_string()).or_default()
    }

    /// A module's list as the run knows it, read from the cache file the
    /// first time; an empty list when there is none (which then counts
    /// as existing, as cf-agent's opened database does).
    pub fn list(&mut self, module: &str, which: Inventory) -> &[PackageRecord] {
        let workdir = self.workdir.clone();
        let slot = self.caches(module).list(which);
        slot.get_or_insert_with(|| {
            read_module_inventory(&workdir, which, module).unwrap_or_default()
        })
    }

    fn cache_exists(&mut self, module: &str, which: Inventory) -> bool {
        let workdir = self.workdir.clone();
        self.caches(module).list(which).is_some()
            || crate::host::local::exists(module_inventory_path(&workdir, which, module))
    }

    fn store(&mut self, module: &str, which: Inventory, list: Vec<PackageRecord>) {
        if let Err(e) = write_module_inventory(&self.workdir, which, module, &list) {
            crate::error!(
                "Cannot write the package cache '{}': {e}",
                module_inventory_path(&self.workdir, which, module).display()
            );
        }
        *self.caches(module).list(which) = Some(list);
    }

    /// cf-agent's UpdateCache: asks the module for a list now and keeps
    /// what it says. False when the call failed or the reply held errors.
    pub fn update(&mut self, m: &Module, options: &[String], kind: ListKind) -> bool {
        let Ok(lines) = m.call(self.host, kind.command(), &options_text(options)) else {
            crate::debug!(
                "Some error occurred while communicating with package module while updating cache."
            );
            return false;
        };
        let (list, had_error) = parse_package_list(&lines, &m.name);
        self.store(&m.name, kind.inventory(), list);
        if had_error {
            crate::info!("Error updating packages cache.");
        }
        !had_error
    }

    /// cf-agent's UpdateSinglePackageModuleCache: refreshes a list when its
    /// lock allows (or `force`); true unless asking failed.
    pub fn refresh(&mut self, m: &Module, body: &ModuleBody, kind: ListKind, force: bool) -> bool {
        if !force && (body.installed_ifelapsed == CF_NOINT || body.updates_ifelapsed == CF_NOINT) {
            crate::error!(
                "Invalid or missing arguments in package_module body '{}':  query_installed_ifelapsed = {} query_updates_ifelapsed = {}",
                body.name,
                body.installed_ifelapsed,
                body.updates_ifelapsed
            );
            return false;
        }
        let which = kind.inventory();
        let (mut kind, mut force, mut acquired) = (kind, force, false);
        if !force {
            if !self.cache_exists(&m.name, which) {
                crate::debug!("Forcing package list update due to missing database");
                force = true;
                // A first look at the updates uses the network: the machine
                // may not know of any yet.
                if kind == ListKind::LocalUpdates {
                    kind = ListKind::Updates;
                }
            }
            let minutes = match which {
                Inventory::Installed => body.installed_ifelapsed,
                Inventory::Updates => body.updates_ifelapsed,
            };
            acquired = self.take_lock(&m.name, which, minutes);
        }
        if !force && !acquired {
            crate::debug!(
                "Skipping {} package cache update.",
                match which {
                    Inventory::Installed => "installed packages",
                    Inventory::Updates => "available updates",
                }
            );
            return true;
        }
        let dry_run = matches!(self.changes.mode(), Mode::DryRun | Mode::DryRunWarnOnly);
        if dry_run && kind == ListKind::Updates {
            crate::debug!(
                "Dry run: asking package module '{}' for the updates it knows of (list-updates-local), not to fetch new lists",
                m.name
            );
            kind = ListKind::LocalUpdates;
        }
        let ok = self.update(m, &body.default_options, kind);
        if !ok {
            crate::info!("Some error occurred while updating available updates cache.");
        }
        if acquired && self.record_locks {
            let key = lock_key(&m.name, which);
            let now = self.now;
            if let Some(st) = self.state.as_deref_mut() {
                st.record_done(&key, now);
            }
        }
        ok
    }

    /// Takes a module's cache lock: once per run, and across runs when
    /// `minutes` have passed since it was last taken (always with `-K` or
    /// 0 minutes).
    fn take_lock(&mut self, module: &str, which: Inventory, minutes: i64) -> bool {
        let taken = self.caches(module).locked(which);
        if *taken {
            return false;
        }
        *taken = true;
        if self.no_lock || minutes <= 0 {
            return true;
        }
        match self.state.as_deref() {
            Some(st) => {
                st.lock_status(&lock_key(module, which), self.now, minutes as u64)
                    == LockStatus::Free
            }
            None => true,
        }
    }

    /// cf-agent's IsPackageInCache: whether the module has a package of
    /// this name (and version and architecture, when given; `latest` is any
    /// version), refreshing the installed list first when given the
    /// module's body (which its lock may not allow).
    pub fn installed(
        &mut self,
        m: &Module,
        refresh: Option<&ModuleBody>,
        name: &str,
        version: Option<&str>,
        arch: Option<&str>,
    ) -> bool {
        if let Some(body) = refresh
            && !self.refresh(m, body, ListKind::Installed, false)
        {
            crate::error!("Can not update cache.");
        }
        let version = version.filter(|v| *v != "latest");
        self.list(&m.name, Inventory::Installed).iter().any(|r| {
            r.name == name
                && version.is_none_or(|v| r.version == v)
                && arch.is_none_or(|a| r.arch == a)
        })
    }

    /// cf-agent's GetVersionsFromUpdates: the updates the module offers for
    /// a package, as (version, architecture); `None` when there are none.
    pub fn updates_of(
        &mut self,
        m: &Module,
        body: &ModuleBody,
        name: &str,
    ) -> Option<Vec<(String, String)>> {
        if !self.refresh(m, body, ListKind::Updates, false) {
            crate::info!("Can not update packages cache.");
        }
        let found: Vec<(String, String)> = self
            .list(&m.name, Inventory::Updates)
            .iter()
            .filter(|r| r.name == name)
            .map(|r| (r.version.clone(), r.arch.clone()))
            .collect();
        (!found.is_empty()).then_some(found)
    }
}

/// The name of a module's cache lock in the state store (cf-agent's).
fn lock_key(module: &str, which: Inventory) -> String {
    match which {
        Inventory::Installed => format!("package-cache-installed-{module}"),
        Inventory::Updates => format!("package-cache-updates-{module}"),
    }
}
