//! Reading the host's files below a root directory, so tests can use a
//! fake tree. A file that cannot be read is `None`, never an error:
//! discovery defines what it finds.

use crate::host::local;
use std::cell::RefCell;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

#[derive(Debug, Clone)]
pub(crate) struct Root {
    base: PathBuf,
    /// The `/proc/net` files read so far, shared by the clones of a root:
    /// discovery reads some twice (ifconfig's view, then `sys.inet6`), and
    /// the kernel formats them anew at each read.
    proc_net: Rc<RefCell<HashMap<String, Option<String>>>>,
}

impl Root {
    pub(crate) fn new(base: &Path) -> Root {
        Root {
            base: base.to_path_buf(),
            proc_net: Rc::default(),
        }
    }

    /// The directory this root reads below.
    pub(crate) fn base(&self) -> &Path {
        &self.base
    }

    /// Whether this is the host's own root (`/`), not a test's fake tree.
    pub(crate) fn is_host(&self) -> bool {
        self.base == Path::new("/")
    }

    /// The real location of an absolute host path.
    pub(crate) fn path(&self, host_path: &str) -> PathBuf {
        self.base.join(host_path.trim_start_matches('/'))
    }

    pub(crate) fn read(&self, host_path: &str) -> Option<String> {
        if !host_path.starts_with("/proc/net/") {
            return self.read_now(host_path);
        }
        if let Some(text) = self.proc_net.borrow().get(host_path) {
            return text.clone();
        }
        let text = self.read_now(host_path);
        self.proc_net
            .borrow_mut()
            .insert(host_path.to_string(), text.clone());
        text
    }

    fn read_now(&self, host_path: &str) -> Option<String> {
        let path = self.path(host_path);
        let bytes = if host_path.starts_with("/proc/") || host_path.starts_with("/sys/") {
            local::read_generated(path)
        } else {
            local::read(path)
        }
        .ok()?;
        // Valid UTF-8 (nearly every file) is kept as read; checking it
        // costs a seventh of what the lossy conversion's scan does.
        Some(
            String::from_utf8(bytes)
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
        )
    }

    /// The first line without its newline, as cf-agent's ReadLine; `None`
    /// for a missing or empty file.
    pub(crate) fn first_line(&self, host_path: &str) -> Option<String> {
        let text = self.read(host_path)?;
        if text.is_empty() {
            return None;
        }
        Some(text.lines().next().unwrap_or("").to_string())
    }

    /// The names in a directory, unsorted; empty when it cannot be read.
    pub(crate) fn list(&self, host_path: &str) -> Vec<String> {
        local::list_dir(self.path(host_path))
            .map(|v| {
                v.iter()
                    .filter_map(|p| p.file_name())
                    .map(|n| n.to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    pub(crate) fn exists(&self, host_path: &str) -> bool {
        // A /proc/net file read already is there: no second probe.
        if let Some(Some(_)) = self.proc_net.borrow().get(host_path) {
            return true;
        }
        local::exists(self.path(host_path))
    }

    /// Which of `names` a directory holds (following symbolic links, as
    /// [`Root::exists`]). One listing replaces a failing `stat` per
    /// absent name, for a directory known to be small.
    pub(crate) fn present_in(&self, host_dir: &str, names: &[&str]) -> Vec<bool> {
        let dir = host_dir.trim_end_matches('/');
        let entry = |n: &str| format!("{dir}/{n}");
        match local::small_dir_names(self.path(host_dir)) {
            Ok(listed) => names
                .iter()
                .map(|n| listed.iter().any(|l| l.to_str() == Some(*n)) && self.exists(&entry(n)))
                .collect(),
            // No such directory: nothing in it.
            Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
                vec![false; names.len()]
            }
            // Unreadable (perhaps still searchable): ask name by name.
            Err(_) => names.iter().map(|n| self.exists(&entry(n))).collect(),
        }
    }

    /// Resolves symbolic links of a host path inside the root, returning a
    /// host path.
    pub(crate) fn realpath(&self, host_path: &str) -> Option<String> {
        let real = local::canonicalize(self.path(host_path)).ok()?;
        let base = local::canonicalize(&self.base).ok()?;
        let rel = real.strip_prefix(&base).ok()?;
        Some(format!("/{}", rel.to_string_lossy()))
    }
}
