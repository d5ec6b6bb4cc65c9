//! The lists of CFEngine's old package promise (`package_method` bodies):
//! the body's `package_list_command` is run and its lines read with
//! `package_installed_regex` and the `package_list_*_regex` patterns (or,
//! with `package_multiline_start`, several lines a package), and what is
//! installed goes into the legacy inventory (`state/software_packages.csv`)
//! that `packagesmatching` reads. The promise itself is [`super::method`].
//!
//! As cf-agent 3.21 does it: one list per list command and pass of a
//! bundle's package promises (the schedule's run forgets them); a command
//! whose manager already has lines in an inventory younger than the body's
//! `package_list_update_ifelapsed` minutes (a day without it) is not run,
//! those lines are its list; after each command run, the inventory is
//! written again with every list of the run, the newest first. A manager
//! is named by its command's program, without a leading `env` and its
//! `VAR=value` words, and without its directory.

use super::method::{MethodBody, Scheduled};
use crate::host::Host;
use crate::host::exec::{OutputSelect, split_command_line};
use crate::host::packages::{
    Inventory, PackageRecord, inventory_mtime, read_inventory, write_inventory,
};
use crate::values::regex::Regex;
use std::path::Path;
use std::sync::Arc;

/// The lists of a pass of the bundle's package promises, newest first,
/// and the operations they scheduled (cf-agent's INSTALLED_PACKAGE_LISTS
/// and PACKAGE_SCHEDULE).
#[derive(Debug, Default)]
pub struct LegacyLists {
    managers: Vec<Manager>,
    schedule: Vec<Scheduled>,
}

#[derive(Debug, Default)]
struct Manager {
    /// The list command.
    command: String,
    installed: Vec<PackageRecord>,
    /// Patches installed, and patches available.
    patches: Vec<PackageRecord>,
    patches_available: Vec<PackageRecord>,
}

impl LegacyLists {
    fn manager(&self, command: &str) -> Option<&Manager> {
        self.managers.iter().find(|m| m.command == command)
    }

    /// The installed packages of a list command, as read in this pass.
    pub fn installed_of(&self, command: &str) -> &[PackageRecord] {
        self.manager(command).map_or(&[], |m| &m.installed)
    }

    /// The installed patches of a list command, as read in this pass.
    pub fn patches_of(&self, command: &str) -> &[PackageRecord] {
        self.manager(command).map_or(&[], |m| &m.patches)
    }

    /// Puts an operation on the schedule: with the operations of the same
    /// command and `package_changes`, else first (cf-agent's
    /// GetPackageManager and PrependPackageItem).
    pub fn schedule(&mut self, mut op: Scheduled) {
        if let Some(s) = self
            .schedule
            .iter_mut()
            .find(|s| s.command == op.command && s.changes == op.changes)
        {
            for item in op.items.drain(..).rev() {
                s.items.insert(0, item);
            }
            return;
        }
        self.schedule.insert(0, op);
    }

    /// The schedule, emptied.
    pub fn take_schedule(&mut self) -> Vec<Scheduled> {
        std::mem::take(&mut self.schedule)
    }

    /// Forgets the lists read (at the end of a pass's package promises).
    pub fn forget_installed(&mut self) {
        self.managers.clear();
    }
}

/// The manager's name in the inventory: the program of `command`, without
/// a leading `env` and its `VAR=value` words, without its directory.
pub fn manager_name(command: &str) -> String {
    let words = split_command_line(command);
    let mut rest = words.iter().map(String::as_str).peekable();
    if rest
        .peek()
        .is_some_and(|w| *w == "env" || w.ends_with("/env"))
    {
        rest.next();
        while rest.peek().is_some_and(|w| w.contains('=')) {
            rest.next();
        }
    }
    let program = rest.next().unwrap_or_default();
    program.rsplit('/').next().unwrap_or(program).to_string()
}

/// The first group of the first match of `pattern` in `line`, up to its
/// first blank (cf-agent's ExtractFirstReference and its `%s` scan);
/// `None` for cf-agent's "CF_NOMATCH".
fn first_group(re: &Regex, line: &str) -> Option<String> {
    let groups = re.captures(line)?;
    let g = groups.get(1)?.as_deref()?;
    Some(g.split_whitespace().next().unwrap_or_default().to_string())
}

type RegexFn<'r> = dyn FnMut(&str) -> Option<Arc<Regex>> + 'r;

/// Compiles a body's pattern, saying so when it is not one.
fn compiled(body: &MethodBody, p: &str, regex: &mut RegexFn<'_>) -> Option<Arc<Regex>> {
    let r = regex(p);
    if r.is_none() {
        crate::error!(
            "The package_method body '{}' has an invalid regular expression '{p}'",
            body.name
        );
    }
    r
}

/// Reads the installed packages of an old package promise's body, unless
/// this pass or a fresh inventory already has them (cf-agent's
/// VerifyInstalledPackages); after a list command ran, the inventory is
/// written again with every list of the pass. False when the list could
/// not be had (said as an error).
#[allow(clippy::too_many_arguments)]
pub fn list_method(
    host: &Host,
    workdir: &Path,
    now: i64,
    lists: &mut LegacyLists,
    body: &MethodBody,
    default_arch: &str,
    dry_run: bool,
    regex: &mut RegexFn<'_>,
) -> bool {
    let command = body.manager().to_string();
    // A manager is met once per pass; its list is read again while it
    // has none (cf-agent's manager envelope and its empty list).
    let at = match lists.managers.iter().position(|m| m.command == command) {
        Some(i) if !lists.managers[i].installed.is_empty() => {
            crate::debug!("Already have a package list for this manager");
            return true;
        }
        Some(i) => i,
        None => {
            lists.managers.insert(
                0,
                Manager {
                    command: command.clone(),
                    ..Manager::default()
                },
            );
            0
        }
    };
    let horizon = body.list_update_ifelapsed.unwrap_or(24 * 60);
    let manager = manager_name(&command);
    if let Some(mtime) = inventory_mtime(workdir, Inventory::Installed)
        && now - mtime < horizon * 60
    {
        let cached: Vec<PackageRecord> = read_inventory(workdir, Inventory::Installed)
            .into_iter()
            .filter(|r| r.method == manager)
            .rev()
            .map(|mut r| {
                if r.arch == "default" {
                    r.arch = default_arch.to_string();
                }
                r
            })
            .collect();
        if !cached.is_empty() {
            crate::debug!("Already have a (cached) package list for this manager");
            lists.managers[at].installed = cached;
            return true;
        }
    }
    if command.is_empty() {
        return true;
    }
    // What the command printed before it failed stays the list, as
    // cf-agent's does.
    let (installed, ok) = read_list(host, workdir, now, body, default_arch, dry_run, regex);
    lists.managers[at].installed = installed;
    if !ok {
        crate::error!("Could not get list of installed packages");
        return false;
    }

    let all: Vec<PackageRecord> = lists
        .managers
        .iter()
        .flat_map(|m| m.installed.iter().cloned())
        .collect();
    if let Err(e) = write_inventory(workdir, Inventory::Installed, &all) {
        crate::error!(
            "Cannot write the package inventory in '{}': {e}",
            workdir.display()
        );
    }
    if let Some(patch_command) = &body.patch_list_command
        && !read_patches(
            host,
            body,
            patch_command,
            default_arch,
            regex,
            &mut lists.managers[at],
        )
    {
        return false;
    }
    crate::debug!("Done checking packages and patches");
    true
}

/// Runs `package_list_update_command` when its timestamp says so (cf-agent
/// keeps one per manager in its state directory).
/// A dry run does not run it, as cf-agent's does not.
fn update_list(host: &Host, workdir: &Path, now: i64, body: &MethodBody, dry_run: bool) -> bool {
    let Some(update) = &body.list_update_command else {
        return true;
    };
    let Some(add) = &body.add_command else {
        crate::error!(
            "package_add_command missing while trying to generate list of installed packages"
        );
        return false;
    };
    let stamp = workdir
        .join("state")
        .join(format!("software_update_timestamp_{}", manager_name(add)));
    let mut call = true;
    if let Some(mtime) = crate::host::packages::state_file_mtime(&stamp) {
        let horizon = body.list_update_ifelapsed.unwrap_or(24 * 60);
        call = now - mtime >= horizon * 60;
    }
    if call {
        crate::debug!("Calling package list update command: '{update}'");
        if dry_run {
            // cf-agent touches the timestamp all the same.
        } else if let Err(e) =
            super::method::run_command(host, update, body.useshell, OutputSelect::Both)
        {
            crate::error!("Couldn't start command '{update}': {e}");
        }
        if let Err(e) = crate::host::packages::touch_state_file(&stamp) {
            crate::error!(
                "Could not update timestamp file '{}'. ({e})",
                stamp.display()
            );
        }
    }
    true
}

/// Runs the list command and reads its lines.
fn read_list(
    host: &Host,
    workdir: &Path,
    now: i64,
    body: &MethodBody,
    default_arch: &str,
    dry_run: bool,
    regex: &mut RegexFn<'_>,
) -> (Vec<PackageRecord>, bool) {
    if !update_list(host, workdir, now, body, dry_run) {
        return (Vec::new(), false);
    }
    let command = body.manager();
    let manager = manager_name(command);
    let pattern = |p: &Option<String>, regex: &mut RegexFn<'_>| match p {
        Some(p) => compiled(body, p, regex).map(Some),
        None => Some(None),
    };
    let (Some(installed), Some(name_re), Some(version_re), Some(arch_re), Some(multiline)) = (
        pattern(&body.installed_regex, regex),
        pattern(&body.list_name_regex, regex),
        pattern(&body.list_version_regex, regex),
        pattern(&body.list_arch_regex, regex),
        pattern(&body.multiline_start, regex),
    ) else {
        return (Vec::new(), false);
    };
    crate::debug!("Reading package list from '{command}'");
    let result = match super::method::run_command(host, command, body.useshell, OutputSelect::Both)
    {
        Ok(r) => r,
        Err(e) => {
            crate::error!("Couldn't open the package list with command '{command}'. ({e})");
            return (Vec::new(), false);
        }
    };
    let record = |name: String, version: String, arch: String| PackageRecord {
        name,
        version,
        arch,
        method: manager.clone(),
    };
    let mut packages: Vec<PackageRecord> = Vec::new();
    let text = result.output_text();
    if let Some(start) = multiline {
        // One package over several lines: a line matching the start
        // pattern closes the package before it.
        let (mut name, mut version, mut arch) = (String::new(), String::new(), String::new());
        let close = |name: &mut String,
                     version: &mut String,
                     arch: &mut String,
                     packages: &mut Vec<PackageRecord>| {
            if name != "CF_NOMATCH"
                && version != "CF_NOMATCH"
                && (!name.is_empty() || !version.is_empty())
                && !name.is_empty()
                && !version.is_empty()
                && !arch.is_empty()
            {
                packages.insert(0, record(name.clone(), version.clone(), arch.clone()));
            }
            *name = "CF_NOMATCH".into();
            *version = "CF_NOMATCH".into();
            *arch = default_arch.to_string();
        };
        for line in text.lines() {
            if start.is_full_match(line) {
                close(&mut name, &mut version, &mut arch, &mut packages);
            }
            let grab = |re: &Option<Arc<Regex>>| {
                re.as_ref()
                    .filter(|r| r.is_full_match(line))
                    .and_then(|r| first_group(r, line))
            };
            if let Some(n) = grab(&name_re) {
                name = n;
            }
            if let Some(v) = grab(&version_re) {
                version = v;
            }
            if let Some(a) = grab(&arch_re) {
                arch = a;
            }
        }
        close(&mut name, &mut version, &mut arch, &mut packages);
    } else {
        let (Some(installed), Some(name_re), Some(version_re)) = (installed, name_re, version_re)
        else {
            return (Vec::new(), false);
        };
        for line in text.lines() {
            if !installed.is_full_match(line) {
                crate::debug!(
                    "Package line '{line}' did not match the package_installed_regex pattern"
                );
                continue;
            }
            let arch = match &arch_re {
                Some(r) => first_group(r, line),
                None => Some(default_arch.to_string()),
            };
            match (
                first_group(&name_re, line),
                first_group(&version_re, line),
                arch,
            ) {
                (Some(n), Some(v), Some(a)) if !n.is_empty() && !v.is_empty() && !a.is_empty() => {
                    packages.insert(0, record(n, v, a))
                }
                _ => crate::debug!(
                    "Package line '{line}' did not match one of the package_list_(name|version|arch)_regex patterns"
                ),
            }
        }
    }
    (packages, result.code == Some(0) && !result.timed_out)
}

/// Reads the patch list command's lines into the manager's installed and
/// available patches (cf-agent's PrependPatchItem).
fn read_patches(
    host: &Host,
    body: &MethodBody,
    command: &str,
    default_arch: &str,
    regex: &mut RegexFn<'_>,
    m: &mut Manager,
) -> bool {
    if !body.useshell
        && crate::host::exec::check_executable(
            &split_command_line(command)
                .first()
                .cloned()
                .unwrap_or_default(),
        )
        .is_err()
    {
        crate::error!("The proposed patch list command '{command}' was not executable");
        return false;
    }
    let result = match super::method::run_command(host, command, body.useshell, OutputSelect::Both)
    {
        Ok(r) => r,
        Err(e) => {
            crate::error!("Couldn't open the patch list with command '{command}'. ({e})");
            return false;
        }
    };
    let re = |p: &Option<String>, regex: &mut RegexFn<'_>| {
        p.as_deref().and_then(|p| compiled(body, p, regex))
    };
    let installed = re(&body.patch_installed_regex, regex);
    let name_re = re(&body.patch_name_regex, regex);
    let version_re = re(&body.patch_version_regex, regex);
    let arch_re = re(&body.patch_arch_regex, regex);
    for line in result.output_text().lines() {
        let grab = |r: &Option<Arc<Regex>>| r.as_ref().and_then(|r| first_group(r, line));
        let (Some(name), Some(version)) = (grab(&name_re), grab(&version_re)) else {
            continue;
        };
        let arch = match &arch_re {
            Some(_) => match grab(&arch_re) {
                Some(a) => a,
                None => continue,
            },
            None => default_arch.to_string(),
        };
        if name.is_empty() || version.is_empty() || arch.is_empty() {
            continue;
        }
        if m.patches
            .iter()
            .any(|p| p.name == name && p.version == version && p.arch == arch)
        {
            crate::debug!(
                "Patch for ({name},{version},{arch}) [name,version,arch] found, but it appears to be installed already"
            );
            continue;
        }
        let rec = PackageRecord {
            name,
            version,
            arch,
            method: manager_name(body.manager()),
        };
        if installed.as_ref().is_some_and(|r| r.is_full_match(line)) {
            m.patches.insert(0, rec);
        } else {
            m.patches_available.insert(0, rec);
        }
    }
    true
}

/// Marks the inventory out of date after the package manager changed
/// something (cf-agent's InvalidateSoftwareCache).
pub fn invalidate_inventory(workdir: &Path) {
    if let Err(e) = crate::host::packages::invalidate_inventory(workdir, Inventory::Installed)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        crate::error!("Cannot mark software cache as invalid. ({e})");
    }
}
