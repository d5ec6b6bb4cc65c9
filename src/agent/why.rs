//! What `--why` needs: for each promise the run reached, per iteration,
//! whether it ran (and how it ended, with what it logged) or why it was
//! skipped — which part of its class guard was false, which `if`/`unless`
//! decided, how many minutes of its lock were left, which variables did
//! not resolve, which `depends_on` handles were not met. The run keeps
//! this in [`WhyLog`]; the pipeline saves it in WORKDIR/state/why.json
//! after every run (dry runs included), and `agent --why` reads it back.

use crate::syntax::ast::Promise;
use crate::values::hash::FastMap as HashMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::borrow::Cow;
use std::rc::Rc;

/// The file the last run's log is saved in, under the state directory.
pub const WHY_FILE: &str = "why.json";

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Status {
    Ran {
        /// One of a few fixed words: borrowed while the run records it.
        outcome: Cow<'static, str>,
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
    /// could not be expanded); shares the record's text when the same.
    #[serde(serialize_with = "ser_rc", deserialize_with = "de_rc")]
    pub promiser: Rc<str>,
    #[serde(flatten)]
    pub status: Status,
}

/// One promise as written, and what became of each of its iterations.
/// The file, namespace, bundle and type are shared by every record that
/// names the same one (a run records each promise it reaches).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromiseRecord {
    #[serde(serialize_with = "ser_rc", deserialize_with = "de_rc")]
    pub file: Rc<str>,
    pub line: usize,
    #[serde(serialize_with = "ser_rc", deserialize_with = "de_rc")]
    pub namespace: Rc<str>,
    #[serde(serialize_with = "ser_rc", deserialize_with = "de_rc")]
    pub bundle: Rc<str>,
    #[serde(serialize_with = "ser_rc", deserialize_with = "de_rc")]
    pub promise_type: Rc<str>,
    /// The promiser as written.
    #[serde(serialize_with = "ser_rc", deserialize_with = "de_rc")]
    pub promiser: Rc<str>,
    pub handle: Option<String>,
    pub iterations: Vec<Iteration>,
}

fn ser_rc<S: Serializer>(s: &Rc<str>, ser: S) -> Result<S::Ok, S::Error> {
    ser.serialize_str(s)
}

fn de_rc<'de, D: Deserializer<'de>>(de: D) -> Result<Rc<str>, D::Error> {
    Ok(Rc::from(String::deserialize(de)?))
}

/// Up to this many iterations a record's are searched in turn; a promise
/// with more (one may iterate thousands of times) gets an index.
const SCAN_ITERATIONS: usize = 16;

/// The whole run, as saved.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WhyLog {
    pub time: i64,
    pub policy: String,
    pub dry_run: bool,
    pub promises: Vec<PromiseRecord>,
    /// Each text a record shares (file, namespace, bundle, type), once.
    #[serde(skip)]
    texts: HashMap<Rc<str>, u32>,
    /// The shared texts by number.
    #[serde(skip)]
    text_list: Vec<Rc<str>>,
    /// Where each promise (file's number, line) is in `promises`.
    #[serde(skip)]
    index: HashMap<(u32, usize), usize>,
    /// Where each expanded promiser is in the iterations of a record that
    /// has more than [`SCAN_ITERATIONS`] of them.
    #[serde(skip)]
    iteration_index: HashMap<usize, HashMap<Rc<str>, usize>>,
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
    /// The shared copy of `s` and its number.
    fn text(&mut self, s: &str) -> (u32, Rc<str>) {
        if let Some(&n) = self.texts.get(s) {
            return (n, self.text_list[n as usize].clone());
        }
        let rc: Rc<str> = Rc::from(s);
        let n = u32::try_from(self.text_list.len()).unwrap_or(u32::MAX);
        self.text_list.push(rc.clone());
        self.texts.insert(rc.clone(), n);
        (n, rc)
    }

    /// Notes what became of one iteration. A later status replaces an
    /// earlier one (a promise deferred in one pass may run in the next),
    /// except that once an iteration ran, being passed over later (it is
    /// done for this run) does not hide that it ran.
    pub fn record(&mut self, site: &Site, handle: Option<&str>, promiser: &str, status: Status) {
        let (file_no, file) = self.text(site.file);
        let idx = match self.index.get(&(file_no, site.line)) {
            Some(&i) => i,
            None => {
                let namespace = self.text(site.namespace).1;
                let bundle = self.text(site.bundle).1;
                let promise_type = self.text(site.promise_type).1;
                self.promises.push(PromiseRecord {
                    file,
                    line: site.line,
                    namespace,
                    bundle,
                    promise_type,
                    promiser: Rc::from(site.promise.promiser.value.as_str()),
                    handle: None,
                    iterations: Vec::new(),
                });
                self.index
                    .insert((file_no, site.line), self.promises.len() - 1);
                self.promises.len() - 1
            }
        };
        let rec = &mut self.promises[idx];
        if let Some(h) = handle
            && rec.handle.as_deref() != Some(h)
        {
            rec.handle = Some(h.to_string());
        }
        let found = if rec.iterations.len() <= SCAN_ITERATIONS {
            rec.iterations
                .iter()
                .position(|it| *it.promiser == *promiser)
        } else {
            self.iteration_index
                .get(&idx)
                .and_then(|m| m.get(promiser).copied())
        };
        match found {
            Some(i) => {
                let it = &mut rec.iterations[i];
                if matches!(status, Status::Ran { .. }) || !matches!(it.status, Status::Ran { .. })
                {
                    it.status = status;
                }
            }
            None => {
                let promiser: Rc<str> = if *rec.promiser == *promiser {
                    rec.promiser.clone()
                } else {
                    Rc::from(promiser)
                };
                if rec.iterations.is_empty() {
                    // Most promises have one iteration.
                    rec.iterations.reserve_exact(1);
                }
                rec.iterations.push(Iteration {
                    promiser: promiser.clone(),
                    status,
                });
                let n = rec.iterations.len();
                if n > SCAN_ITERATIONS {
                    let map = self.iteration_index.entry(idx).or_default();
                    if n == SCAN_ITERATIONS + 1 {
                        for (i, it) in rec.iterations.iter().enumerate() {
                            map.insert(it.promiser.clone(), i);
                        }
                    } else {
                        map.insert(promiser, n - 1);
                    }
                }
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
            *p.file == *file
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
