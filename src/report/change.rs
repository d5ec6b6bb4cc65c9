//! What a promise changes, as data. An actuator works out what differs and
//! describes each change it would make as a [`Change`]; the [`Changes`] of
//! the promise, which the scheduler sets up with the promise's [`Mode`],
//! decides whether the change is made, says so in cf-agent's words, and
//! keeps the record for the promise's event (`--json`'s `changes`).
//! Actuators never look at the mode themselves.

use super::Outcome;
use serde::{Deserialize, Serialize};

/// How a promise's changes are treated, decided once per promise by the
/// scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Changes are made.
    #[default]
    Apply,
    /// `--dry-run`: nothing is changed; later promises see what would have
    /// been written (the host's overlay).
    DryRun,
    /// The promise's `action_policy => "warn"` (or `"nop"`): nothing is
    /// changed, each change is a warning.
    WarnOnly,
    /// Both: a dry run of a promise that only warns.
    DryRunWarnOnly,
}

impl Mode {
    pub fn of(dry_run: bool, warn_only: bool) -> Mode {
        match (dry_run, warn_only) {
            (false, false) => Mode::Apply,
            (true, false) => Mode::DryRun,
            (false, true) => Mode::WarnOnly,
            (true, true) => Mode::DryRunWarnOnly,
        }
    }

    fn warn_only(self) -> bool {
        matches!(self, Mode::WarnOnly | Mode::DryRunWarnOnly)
    }
}

/// One change a promise made or would have made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// What kind of change: `create`, `delete`, `permissions`, `content`,
    /// `run`, `signal`, ... (one word per kind, stable for `--json`).
    pub what: String,
    /// What it was made to: a path, a command, a process, a user, a package.
    pub path: String,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub before: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub after: Option<String>,
    /// Whether it was made (false under a dry run or when the promise
    /// only warns).
    pub applied: bool,
    /// cf-agent's words for it: what was done, or what should have been.
    pub message: String,
    /// cf-agent's words once made.
    #[serde(skip)]
    done: Vec<String>,
    /// cf-agent's words when not made, before the `, but only warning
    /// promised` a warn-only promise adds.
    #[serde(skip)]
    should: Vec<String>,
    /// Other words when the promise only warns (cf-agent words some of
    /// these differently from a dry run's).
    #[serde(skip)]
    should_when_warning: Option<Vec<String>>,
    /// Whether the warn-only suffix is added to each `should` line.
    #[serde(skip)]
    suffix: bool,
    /// Made even under a dry run (`preview` commands).
    #[serde(skip)]
    preview: bool,
    /// The lines of a withheld change are errors, not warnings.
    #[serde(skip)]
    as_error: bool,
    /// See [`Change::dry_run_words_win`].
    #[serde(skip)]
    dry_run_wins: bool,
    /// How a promise that only warns ends when the change is withheld.
    #[serde(skip, default = "warned")]
    warn_outcome: Outcome,
    /// A file's content before and after, for `--diff`.
    #[serde(skip)]
    diff: Option<(Vec<u8>, Vec<u8>)>,
}

fn warned() -> Outcome {
    Outcome::Warned
}

impl Change {
    pub fn new(what: &str, path: impl Into<String>) -> Change {
        Change {
            what: what.to_string(),
            path: path.into(),
            before: None,
            after: None,
            applied: false,
            message: String::new(),
            done: Vec::new(),
            should: Vec::new(),
            should_when_warning: None,
            suffix: true,
            preview: false,
            as_error: false,
            dry_run_wins: false,
            warn_outcome: Outcome::Warned,
            diff: None,
        }
    }

    /// The content the change replaces and its new content: `--diff`
    /// prints them as a unified diff when the change is made, or would be
    /// under a dry run.
    pub fn content(mut self, old: &[u8], new: &[u8]) -> Change {
        self.diff = Some((old.to_vec(), new.to_vec()));
        self
    }

    pub fn before(mut self, v: impl Into<String>) -> Change {
        self.before = Some(v.into());
        self
    }

    pub fn after(mut self, v: impl Into<String>) -> Change {
        self.after = Some(v.into());
        self
    }

    /// The info line once the change is made (none: made silently).
    pub fn done(mut self, line: impl Into<String>) -> Change {
        self.done.push(line.into());
        self
    }

    /// A warning line when the change is not made ("Should ...").
    pub fn should(mut self, line: impl Into<String>) -> Change {
        self.should.push(line.into());
        self
    }

    /// The warning when the promise only warns, where cf-agent's words
    /// differ from a dry run's; it is printed as given.
    pub fn should_when_warning(mut self, line: impl Into<String>) -> Change {
        self.should_when_warning
            .get_or_insert_with(Vec::new)
            .push(line.into());
        self
    }

    /// Nothing is said when the promise only warns (something else says
    /// it).
    pub fn silent_when_warning(mut self) -> Change {
        self.should_when_warning = Some(Vec::new());
        self
    }

    /// The `should` lines are printed as given, never with the warn-only
    /// suffix.
    pub fn without_suffix(mut self) -> Change {
        self.suffix = false;
        self
    }

    /// Under a dry run of a promise that only warns, the dry run's words
    /// are said (cf-agent's commands), not the warning's.
    pub fn dry_run_words_win(mut self) -> Change {
        self.dry_run_wins = true;
        self
    }

    /// cf-agent says it as an error when it is not made.
    pub fn withheld_as_error(mut self) -> Change {
        self.as_error = true;
        self
    }

    /// A dry run makes this change too (cf-agent's `preview` commands).
    pub fn previewed(mut self) -> Change {
        self.preview = true;
        self
    }

    /// How a warn-only promise ends when this change is withheld (Warned
    /// unless said otherwise; a report is not kept).
    pub fn when_warning_ends(mut self, o: Outcome) -> Change {
        self.warn_outcome = o;
        self
    }
}

impl Change {
    /// What was said of it, each line with its level as cf-agent prints
    /// it (`info: ...` once made, `warning: ...` when not).
    pub fn said(&self) -> Vec<String> {
        let level = if self.applied { "info: " } else { "warning: " };
        // The lines of `str::lines`, found by the byte search and joined by
        // hand (an edit of a big file says thousands): a line that ends in
        // a newline loses a CR before it; the text after the last newline
        // is a line when it is not empty.
        let mut out = Vec::new();
        let mut pieces = crate::scan::split_newlines(&self.message).peekable();
        while let Some(l) = pieces.next() {
            if pieces.peek().is_none() {
                if !l.is_empty() {
                    out.push([level, l].concat());
                }
                break;
            }
            out.push([level, l.strip_suffix('\r').unwrap_or(l)].concat());
        }
        out
    }
}

/// What became of a planned change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Make it now, then report it with [`Changes::made`].
    Make,
    /// Not made; it has been said. `as_if_made`: the run goes on as if it
    /// had been (a dry run, whose later promises see what would be written).
    Withheld { outcome: Outcome, as_if_made: bool },
}

/// The changes of one promise, and the mode that decides them.
#[derive(Debug, Default)]
pub struct Changes {
    mode: Mode,
    /// `--diff`: print content changes as unified diffs.
    diff: bool,
    records: Vec<Change>,
}

impl Changes {
    /// How this promise's changes are treated.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    pub fn new(mode: Mode, diff: bool) -> Changes {
        Changes {
            mode,
            diff,
            records: Vec::new(),
        }
    }

    /// Decides a planned change. When it is withheld, says so (warnings in
    /// cf-agent's words) and records it; when it is to be made, the caller
    /// makes it and reports it with [`Changes::made`] (or an error of its
    /// own when it fails).
    pub fn plan(&mut self, change: &Change) -> Decision {
        self.plan_explained(change, Vec::new)
    }

    /// [`Changes::plan`] of a change built only when its words are needed:
    /// a change that is simply made (no dry run, no warn-only, no
    /// `--diff`) says nothing here, and an edit plans one for each line.
    pub fn plan_with(&mut self, change: impl FnOnce() -> Change) -> Decision {
        if self.mode == Mode::Apply && !self.diff {
            return Decision::Make;
        }
        self.plan(&change())
    }

    /// [`Changes::plan`], with lines that a promise that only warns says
    /// before the change's own warning, worked out only then (cf-agent's
    /// line by line account of an edit).
    pub fn plan_explained(
        &mut self,
        change: &Change,
        explain: impl FnOnce() -> Vec<String>,
    ) -> Decision {
        let make = match self.mode {
            Mode::Apply => true,
            Mode::DryRun => change.preview,
            Mode::WarnOnly | Mode::DryRunWarnOnly => false,
        };
        if self.diff
            && (make || self.mode == Mode::DryRun)
            && let Some((old, new)) = &change.diff
        {
            print_diff(&change.path, old, new);
        }
        if make {
            return Decision::Make;
        }
        let warning_words = self.mode == Mode::WarnOnly
            || (self.mode == Mode::DryRunWarnOnly && !change.dry_run_wins);
        let lines: Vec<String> = match (&change.should_when_warning, warning_words) {
            (Some(w), true) => explain().into_iter().chain(w.iter().cloned()).collect(),
            _ => change
                .should
                .iter()
                .map(|l| {
                    if change.suffix && self.mode.warn_only() {
                        format!("{l}, but only warning promised")
                    } else {
                        l.clone()
                    }
                })
                .collect(),
        };
        for l in &lines {
            if change.as_error {
                crate::error!("{l}");
            } else {
                crate::warn!("{l}");
            }
        }
        let mut record = change.clone();
        record.applied = false;
        record.message = lines.join("\n");
        self.records.push(record);
        let outcome = if self.mode.warn_only() {
            change.warn_outcome
        } else {
            Outcome::Warned
        };
        Decision::Withheld {
            outcome,
            as_if_made: self.mode == Mode::DryRun,
        }
    }

    /// A change made: says so in cf-agent's words and records it.
    pub fn made(&mut self, change: Change) {
        for l in &change.done {
            crate::info!("{l}");
        }
        let mut record = change;
        record.applied = true;
        record.message = record.done.join("\n");
        self.records.push(record);
    }

    /// A change made and said by its actuator in its own way: recorded
    /// with `message`, nothing printed.
    pub fn record(&mut self, mut change: Change, message: impl Into<String>) {
        change.applied = true;
        change.message = message.into();
        self.records.push(change);
    }

    /// `change` with the content it replaces and its new content, for
    /// `--diff`; without `--diff` the content is not kept (a big file
    /// would be copied twice for nothing).
    pub fn with_content(&self, change: Change, old: &[u8], new: &[u8]) -> Change {
        if self.diff {
            change.content(old, new)
        } else {
            change
        }
    }

    /// Whether changes of content are printed (`--diff`), so worth
    /// reading for [`Change::content`].
    pub fn shows_content(&self) -> bool {
        self.diff
    }

    /// The records so far, for the promise's event.
    pub fn take(&mut self) -> Vec<Change> {
        std::mem::take(&mut self.records)
    }
}

/// A unified diff of a file's content change on standard output; binary
/// content is summarized instead.
pub fn print_diff(shown: &str, old: &[u8], new: &[u8]) {
    use std::io::Write;
    let mut out = Vec::new();
    match (std::str::from_utf8(old), std::str::from_utf8(new)) {
        (Ok(o), Ok(n)) => {
            let diff = similar::TextDiff::from_lines(o, n);
            let _ = write!(
                out,
                "{}",
                diff.unified_diff().context_radius(3).header(shown, shown)
            );
        }
        _ => {
            let _ = writeln!(
                out,
                "Binary file {shown} differs ({} bytes -> {} bytes)",
                old.len(),
                new.len()
            );
        }
    }
    crate::host::out::write(&out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn said_lines_are_str_lines() {
        for m in [
            "", "\n", "a", "a\n", "a\r\nb", "a\n\nb\n", "a\r", "a\nb\r", "\r\n\r",
        ] {
            let mut c = Change::new("edit", "/f");
            c.message = m.to_string();
            let want: Vec<String> = m.lines().map(|l| format!("warning: {l}")).collect();
            assert_eq!(c.said(), want, "{m:?}");
        }
    }

    fn chmod() -> Change {
        Change::new("permissions", "/f")
            .before("0600")
            .after("0644")
            .done("Object '/f' had permissions 0600, changed it to 0644")
            .should("Should change permissions of '/f' from 0600 to 0644")
    }

    #[test]
    fn apply_makes_and_records() {
        let mut c = Changes::new(Mode::Apply, false);
        assert_eq!(c.plan(&chmod()), Decision::Make);
        c.made(chmod());
        let r = c.take();
        assert_eq!(r.len(), 1);
        assert!(r[0].applied);
        assert_eq!(
            r[0].message,
            "Object '/f' had permissions 0600, changed it to 0644"
        );
    }

    #[test]
    fn warn_only_withholds_with_suffix() {
        let mut c = Changes::new(Mode::WarnOnly, false);
        assert_eq!(
            c.plan(&chmod()),
            Decision::Withheld {
                outcome: Outcome::Warned,
                as_if_made: false
            }
        );
        let r = c.take();
        assert!(!r[0].applied);
        assert!(r[0].message.ends_with(", but only warning promised"));
    }

    #[test]
    fn dry_run_goes_on_as_if_made_and_previews() {
        let mut c = Changes::new(Mode::DryRun, false);
        assert_eq!(
            c.plan(&chmod()),
            Decision::Withheld {
                outcome: Outcome::Warned,
                as_if_made: true
            }
        );
        assert_eq!(
            c.take()[0].message,
            "Should change permissions of '/f' from 0600 to 0644"
        );
        assert_eq!(c.plan(&chmod().previewed()), Decision::Make);
    }
}
