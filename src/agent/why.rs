//! What `--why` needs: for each promise the run reached, per iteration,
//! whether it ran (and how it ended, with what it logged) or why it was
//! skipped — which part of its class guard was false, which `if`/`unless`
//! decided, how many minutes of its lock were left, which variables did
//! not resolve, which `depends_on` handles were not met. The run keeps
//! this in [`WhyLog`]; the pipeline saves it in WORKDIR/state/why.json
//! after every run (dry runs included), and `agent --why` reads it back.

use crate::syntax::ast::Promise;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The file the last run's log is saved in, under the state directory.
pub const WHY_FILE: &str = "why.json";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Status {
    Ran {
        outcome: String,
        /// What the promise logged while acting.
        changes: Vec<String>,
    },
    Skipped {
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Iteration {
    /// The promiser as expanded for this iteration (as written when it
    /// could not be expanded).
    pub promiser: String,
    #[serde(flatten)]
    pub status: Status,
}

/// One promise as written, and what became of each of its iterations.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromiseRecord {
    pub file: String,
    pub line: usize,
    pub namespace: String,
    pub bundle: String,
    pub promise_type: String,
    /// The promiser as written.
    pub promiser: String,
    pub handle: Option<String>,
    pub iterations: Vec<Iteration>,
}

/// The whole run, as saved.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WhyLog {
    pub time: i64,
    pub policy: String,
    pub dry_run: bool,
    pub promises: Vec<PromiseRecord>,
    #[serde(skip)]
    index: IndexMap<(String, usize), usize>,
    /// Where each (promise, expanded promiser) is in its record's
    /// iterations: a promise may iterate thousands of times.
    #[serde(skip)]
    iteration_index: HashMap<(usize, String), usize>,
}

/// Which promise an iteration belongs to.
pub struct Site<'a> {
    pub file: &'a str,
    pub line: usize,
    pub namespace: &'a str,
    pub bundle: &'a str,
    pub promise_type: &'a str,
    pub promise: &'a Promise,
}

impl WhyLog {
    /// Notes what became of one iteration. A later status replaces an
    /// earlier one (a promise deferred in one pass may run in the next),
    /// except that once an iteration ran, being passed over later (it is
    /// done for this run) does not hide that it ran.
    pub fn record(&mut self, site: &Site, handle: Option<&str>, promiser: &str, status: Status) {
        let key = (site.file.to_string(), site.line);
        let idx = match self.index.get(&key) {
            Some(&i) => i,
            None => {
                self.promises.push(PromiseRecord {
                    file: site.file.to_string(),
                    line: site.line,
                    namespace: site.namespace.to_string(),
                    bundle: site.bundle.to_string(),
                    promise_type: site.promise_type.to_string(),
                    promiser: site.promise.promiser.value.clone(),
                    handle: None,
                    iterations: Vec::new(),
                });
                self.index.insert(key, self.promises.len() - 1);
                self.promises.len() - 1
            }
        };
        let rec = &mut self.promises[idx];
        if let Some(h) = handle {
            rec.handle = Some(h.to_string());
        }
        match self.iteration_index.get(&(idx, promiser.to_string())) {
            Some(&i) => {
                let it = &mut rec.iterations[i];
                if matches!(status, Status::Ran { .. }) || !matches!(it.status, Status::Ran { .. })
                {
                    it.status = status;
                }
            }
            None => {
                self.iteration_index
                    .insert((idx, promiser.to_string()), rec.iterations.len());
                rec.iterations.push(Iteration {
                    promiser: promiser.to_string(),
                    status,
                });
            }
        }
    }

    /// The promises a query names: a handle, or FILE:LINE (FILE may be a
    /// path suffix; LINE may be any line of the promise, which is taken to
    /// be the last promise of that file starting at or before it).
    pub fn find(&self, query: &str) -> Vec<&PromiseRecord> {
        let by_handle: Vec<&PromiseRecord> = self
            .promises
            .iter()
            .filter(|p| p.handle.as_deref() == Some(query))
            .collect();
        if !by_handle.is_empty() {
            return by_handle;
        }
        let Some((file, line)) = query.rsplit_once(':') else {
            return Vec::new();
        };
        let Ok(line) = line.parse::<usize>() else {
            return Vec::new();
        };
        let same_file = |p: &&PromiseRecord| {
            p.file == file
                || p.file
                    .ends_with(&format!("/{}", file.trim_start_matches("./")))
        };
        let best = self
            .promises
            .iter()
            .filter(same_file)
            .filter(|p| p.line <= line)
            .map(|p| p.line)
            .max();
        self.promises
            .iter()
            .filter(same_file)
            .filter(|p| Some(p.line) == best)
            .collect()
    }
}
