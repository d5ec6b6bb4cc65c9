//! `transformer`: a command run on an existing file (no shell), as
//! cf-agent runs it, typically to compress or convert it in place.

use super::Verdict;
use crate::eval::expanded::ExpandedPromise;
use crate::host::exec::{CommandSpec, OutputSelect, split_command_line};
use crate::promises::ActContext;
use std::path::Path;

/// Runs the transformer `command` on `shown`. Repaired when it returns 0,
/// failed otherwise or when its program cannot be run; a dry run or a
/// warn-only promise says what it would run.
pub(super) fn transform(
    act: &mut ActContext<'_>,
    p: &ExpandedPromise,
    shown: &str,
    command: &str,
    v: &mut Verdict,
) {
    let argv = split_command_line(command);
    let program = argv.first().map(String::as_str).unwrap_or("");
    if !is_executable(act, program) {
        if act.host.lstat(Path::new(program)).ok().flatten().is_none() {
            tracing::error!("Proposed executable file '{program}' doesn't exist");
        }
        tracing::error!("Transformer '{command}' for file '{shown}' failed");
        v.failed();
        return;
    }
    if act.dry_run || p.warn_only() {
        tracing::warn!("Need to transform file '{shown}' with '{command}'");
        v.warned();
        return;
    }
    tracing::info!("Transforming '{shown}' with '{command}'");
    let spec = CommandSpec {
        argv,
        output: OutputSelect::Both,
        ..CommandSpec::default()
    };
    let result = match act.host.run(&spec) {
        Ok(r) => r,
        Err(e) => {
            tracing::error!("Transformer '{command}' for file '{shown}' failed ({e})");
            v.failed();
            return;
        }
    };
    let output = result.output_text();
    tracing::info!(
        "Transformed '{shown}' with '{command}' {}",
        output.trim_end()
    );
    match result.code {
        Some(0) => {
            tracing::info!("Transformer '{shown}' => '{command}' seemed to work ok");
            v.repaired();
        }
        code => {
            let code = code.map_or_else(|| "a signal".to_string(), |c| c.to_string());
            tracing::error!(
                "Finished command related to promiser '{shown}' -- an error occurred, returned {code}"
            );
            tracing::error!("Transformer '{shown}' => '{command}' returned error");
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
