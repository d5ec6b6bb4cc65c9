//! `transformer`: a command run on an existing file (no shell), as
//! cf-agent runs it, typically to compress or convert it in place.

use super::Verdict;
use crate::host::exec::{CommandSpec, OutputSelect, split_command_line};
use crate::promises::{ActContext, Applied};
use crate::report::change::Change;
use std::path::Path;

/// Runs the transformer `command` on `shown`. Repaired when it returns 0,
/// failed otherwise or when its program cannot be run; a dry run or a
/// warn-only promise says what it would run.
pub(super) fn transform(act: &mut ActContext<'_>, shown: &str, command: &str, v: &mut Verdict) {
    let argv = split_command_line(command);
    let program = argv.first().map(String::as_str).unwrap_or("");
    if !is_executable(act, program) {
        if act.host.lstat(Path::new(program)).ok().flatten().is_none() {
            crate::error!("Proposed executable file '{program}' doesn't exist");
        }
        crate::error!("Transformer '{command}' for file '{shown}' failed");
        v.failed();
        return;
    }
    let change = Change::new("transform", shown)
        .after(command)
        .done(format!("Transforming '{shown}' with '{command}'"))
        .should(format!("Need to transform file '{shown}' with '{command}'"))
        .without_suffix();
    // Under --simulate the command works on the file's copy in the
    // changes chroot, named in its place wherever the command names it.
    let argv = match act.host.changes_chroot() {
        Some(_) => {
            let inside = act.host.map(Path::new(shown)).display().to_string();
            argv.into_iter()
                .map(|a| a.replace(shown, &inside))
                .collect()
        }
        None => argv,
    };
    let spec = CommandSpec {
        argv,
        output: OutputSelect::Both,
        ..CommandSpec::default()
    };
    let target = Path::new(shown);
    let result = match act.change(change, |h| h.overriding_immutable(target, |h| h.run(&spec))) {
        Applied::Made(r) => r,
        Applied::Withheld { .. } => {
            v.warned();
            return;
        }
        Applied::Failed(e) => {
            crate::error!("Transformer '{command}' for file '{shown}' failed ({e})");
            v.failed();
            return;
        }
    };
    let output = result.output_text();
    crate::info!(
        "Transformed '{shown}' with '{command}' {}",
        output.trim_end()
    );
    match result.code {
        Some(0) => {
            crate::info!("Transformer '{shown}' => '{command}' seemed to work ok");
            v.repaired();
        }
        code => {
            let code = code.map_or_else(|| "a signal".to_string(), |c| c.to_string());
            crate::error!(
                "Finished command related to promiser '{shown}' -- an error occurred, returned {code}"
            );
            crate::error!("Transformer '{shown}' => '{command}' returned error");
            v.failed();
        }
    }
}

fn is_executable(act: &mut ActContext<'_>, program: &str) -> bool {
    program.starts_with('/')
        && act
            .host
            .stat(Path::new(program))
            .ok()
            .flatten()
            .is_some_and(|m| m.kind == crate::host::fs::FileKind::File && m.mode & 0o111 != 0)
}
