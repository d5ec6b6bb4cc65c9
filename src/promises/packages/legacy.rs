//! The inventory half of CFEngine's old package promise (`package_method`
//! bodies): the body's `package_list_command` is run and its lines read
//! with `package_installed_regex` and the `package_list_*_regex` patterns,
//! and what is installed goes into the legacy inventory
//! (`state/software_packages.csv`) that `packagesmatching` reads. The
//! changes of the old promise are not made (see [`super`]).
//!
//! As cf-agent 3.21 does it: one list per list command and run; a command
//! whose manager already has lines in an inventory younger than the body's
//! `package_list_update_ifelapsed` minutes (a day without it) is not run,
//! those lines are its list; after each command run, the inventory is
//! written again with every list of the run, the newest first. A manager
//! is named by its command's program, without a leading `env` and its
//! `VAR=value` words, and without its directory.

use crate::eval::bodies::ResolvedBody;
use crate::host::Host;
use crate::host::exec::{CommandSpec, OutputSelect, split_command_line};
use crate::host::packages::{
    Inventory, PackageRecord, inventory_mtime, read_inventory, write_inventory,
};
use crate::values::regex::Regex;
use std::path::Path;
use std::time::Duration;

/// How long a package list command may take.
const LIST_TIMEOUT: Duration = Duration::from_secs(3600);

/// The lists of the run, newest first: list command and packages.
#[derive(Debug, Default)]
pub struct LegacyLists {
    managers: Vec<(String, Vec<PackageRecord>)>,
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
/// first blank (cf-agent's ExtractFirstReference and its `%s` scan).
fn first_group(re: &Regex, line: &str) -> Option<String> {
    let groups = re.captures(line)?;
    let g = groups.get(1)?.as_deref()?;
    g.split_whitespace().next().map(str::to_string)
}

/// Reads the installed packages of an old package promise's body into the
/// legacy inventory, unless this run or a fresh inventory already has its
/// list. Returns false when the list could not be had (said as an error).
pub fn list_installed(
    host: &Host,
    workdir: &Path,
    now: i64,
    lists: &mut LegacyLists,
    body: &ResolvedBody,
    regex: &mut dyn FnMut(&str) -> Option<std::sync::Arc<Regex>>,
) -> bool {
    let Some(command) = body
        .scalar("package_list_command")
        .filter(|c| !c.is_empty())
    else {
        return true;
    };
    if lists.managers.iter().any(|(c, _)| c == command) {
        tracing::debug!("Already have a package list for this manager");
        return true;
    }
    let manager = manager_name(command);
    let horizon = body
        .scalar("package_list_update_ifelapsed")
        .and_then(|v| crate::values::number::parse_int(v).ok())
        .unwrap_or(24 * 60);
    if let Some(mtime) = inventory_mtime(workdir, Inventory::Installed)
        && now - mtime < horizon * 60
    {
        let cached: Vec<PackageRecord> = read_inventory(workdir, Inventory::Installed)
            .into_iter()
            .filter(|r| r.method == manager)
            .collect();
        if !cached.is_empty() {
            tracing::debug!("Already have a (cached) package list for this manager");
            lists.managers.insert(0, (command.to_string(), cached));
            return true;
        }
    }
    let default_arch = "default";
    let pattern = |attr: &str| body.scalar(attr).filter(|p| !p.is_empty());
    let (Some(installed), Some(name_re), Some(version_re)) = (
        pattern("package_installed_regex"),
        pattern("package_list_name_regex"),
        pattern("package_list_version_regex"),
    ) else {
        tracing::error!(
            "The package_method body '{}' has a package_list_command but not package_installed_regex, package_list_name_regex and package_list_version_regex",
            body.name
        );
        return false;
    };
    if pattern("package_multiline_start").is_some() {
        tracing::error!(
            "package_multiline_start (package lists of several lines) of the package_method body '{}' is not supported",
            body.name
        );
        return false;
    }
    let compiled = |p: &str, regex: &mut dyn FnMut(&str) -> Option<std::sync::Arc<Regex>>| {
        let r = regex(p);
        if r.is_none() {
            tracing::error!(
                "The package_method body '{}' has an invalid regular expression '{p}'",
                body.name
            );
        }
        r
    };
    let (Some(installed), Some(name_re), Some(version_re)) = (
        compiled(installed, regex),
        compiled(name_re, regex),
        compiled(version_re, regex),
    ) else {
        return false;
    };
    let arch_re = match pattern("package_list_arch_regex") {
        Some(p) => match compiled(p, regex) {
            Some(r) => Some(r),
            None => return false,
        },
        None => None,
    };
    let shell = body
        .scalar("package_commands_useshell")
        .and_then(crate::values::number::parse_bool)
        .unwrap_or(true);
    tracing::debug!("Reading package list from '{manager}'");
    let spec = CommandSpec {
        argv: if shell {
            vec![command.to_string()]
        } else {
            split_command_line(command)
        },
        shell,
        timeout: Some(LIST_TIMEOUT),
        output: OutputSelect::StdoutPassStderr,
        ..CommandSpec::default()
    };
    let result = match host.run(&spec) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("Couldn't open the package list with command '{command}': {e}");
            tracing::error!("Could not get list of installed packages");
            return false;
        }
    };
    let mut packages = Vec::new();
    for line in result.output_text().lines() {
        if !installed.is_full_match(line) {
            tracing::debug!(
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
            (Some(name), Some(version), Some(arch)) => packages.insert(
                0,
                PackageRecord {
                    name,
                    version,
                    arch,
                    method: manager.clone(),
                },
            ),
            _ => tracing::debug!(
                "Package line '{line}' did not match one of the package_list_(name|version|arch)_regex patterns"
            ),
        }
    }
    if result.code != Some(0) || result.timed_out {
        tracing::error!("Could not get list of installed packages");
        return false;
    }
    lists.managers.insert(0, (command.to_string(), packages));
    let all: Vec<PackageRecord> = lists
        .managers
        .iter()
        .flat_map(|(_, l)| l.iter().cloned())
        .collect();
    if let Err(e) = write_inventory(workdir, Inventory::Installed, &all) {
        tracing::error!(
            "Cannot write the package inventory in '{}': {e}",
            workdir.display()
        );
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn managers_are_named_by_their_program() {
        assert_eq!(manager_name("/usr/bin/printf 'x-1'"), "printf");
        assert_eq!(manager_name("/usr/bin/env /usr/bin/printf 'x'"), "printf");
        assert_eq!(manager_name("/usr/bin/env X=Y LANG=C /bin/rpm -qa"), "rpm");
        assert_eq!(manager_name("env dpkg -l"), "dpkg");
        assert_eq!(manager_name("dpkg -l"), "dpkg");
        assert_eq!(manager_name(""), "");
    }
}
