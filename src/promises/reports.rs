//! `reports`: print a line (`R: ...`), or append it to a file.

use super::{ActContext, Actuator, ExpandedPromise, Outcome};
use std::io::Write;

pub struct Reports;

impl Actuator for Reports {
    fn evaluate(&self, act: &mut ActContext<'_>, p: &ExpandedPromise) -> Outcome {
        if let Some(path) = p.scalar("report_to_file") {
            let opened = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path);
            return match opened.and_then(|mut f| writeln!(f, "{}", p.promiser)) {
                Ok(()) => Outcome::Repaired,
                Err(e) => {
                    tracing::error!("Could not append report to '{path}': {e}");
                    Outcome::Failed
                }
            };
        }
        act.output.report_line(&p.promiser);
        if let Some(pf) = p.body("printfile") {
            print_file(act, pf);
        }
        Outcome::Kept
    }
}

/// `printfile` body: print the first `number_of_lines` lines of a file.
fn print_file(act: &mut ActContext<'_>, body: &super::ResolvedBody) {
    let Some(path) = body.scalar("file_to_print") else {
        return;
    };
    let limit = body
        .scalar("number_of_lines")
        .and_then(|n| n.parse::<usize>().ok())
        .unwrap_or(usize::MAX);
    match std::fs::read_to_string(path) {
        Ok(text) => {
            for line in text.lines().take(limit) {
                act.output.report_line(line);
            }
        }
        Err(e) => tracing::error!("Could not open file '{path}' to print it: {e}"),
    }
}
