//! `reports`: print a line (`R: ...`), or append it to a file.

use super::{ActContext, Actuator};
use crate::report::change::{Change, Decision};

use crate::eval::expanded::ExpandedPromise;

use crate::report::Outcome;
use std::path::Path;

pub struct Reports;

/// How many lines `printfile` prints when `number_of_lines` is not given,
/// as cf-agent does.
const DEFAULT_PRINTFILE_LINES: usize = 5;

impl Actuator for Reports {
    fn evaluate(&self, act: &mut ActContext<'_>, p: &ExpandedPromise) -> Outcome {
        // An action body that only warns keeps even a report from printing;
        // cf-agent counts it as not kept. A dry run (`-n`) prints no report
        // either: cf-agent 3.21 says the same of each.
        let change = || {
            Change::new("report", &p.promiser)
                .should(format!("Need to repair reports promise: {}", p.promiser))
                .without_suffix()
                .when_warning_ends(Outcome::Failed)
        };
        if let Decision::Withheld { outcome, .. } = act.changes.plan_with(change) {
            return outcome;
        }
        // As in cf-agent, a report is kept whether its line reached the
        // output or a file (a file that cannot be opened is only logged);
        // only a `printfile` that cannot be read makes it fail.
        if let Some(path) = p.scalar("report_to_file") {
            let line = format!("{}\n", p.promiser);
            if let Err(e) = act.host.append(Path::new(path), line.as_bytes()) {
                crate::error!(
                    "Could not open log file '{path}', message '{}'. ({e})",
                    p.promiser
                );
            }
        } else {
            act.output.report_line(&p.promiser);
        }
        match p.body("printfile") {
            Some(pf) if !print_file(act, pf) => Outcome::Failed,
            _ => Outcome::Kept,
        }
    }
}

/// `printfile` body: print the first `number_of_lines` lines of a file as
/// report lines, or with a negative number the last ones (cf-agent 3.18+);
/// `inf` prints them all. False when the file cannot be read.
fn print_file(act: &mut ActContext<'_>, body: &crate::eval::bodies::ResolvedBody) -> bool {
    let Some(path) = body.scalar("file_to_print") else {
        return false;
    };
    let count = body
        .scalar("number_of_lines")
        .and_then(|n| crate::values::number::parse_int(n).ok())
        .unwrap_or(DEFAULT_PRINTFILE_LINES as i64);
    let text = act.host.read(std::path::Path::new(path)).and_then(|b| {
        String::from_utf8(b).map_err(|_| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "stream did not contain valid UTF-8",
            )
        })
    });
    match text {
        Ok(text) => {
            // Lines end at '\n' only: a '\r' inside one is printed.
            let lines: Vec<&str> = text.split_terminator('\n').collect();
            let n = usize::try_from(count.unsigned_abs()).unwrap_or(usize::MAX);
            let shown = if count < 0 {
                &lines[lines.len().saturating_sub(n)..]
            } else {
                &lines[..n.min(lines.len())]
            };
            for line in shown {
                act.output.report_line(line);
            }
            true
        }
        Err(e) => {
            crate::error!("Printing of file '{path}' was not possible. ({e})");
            false
        }
    }
}
