//! Host discovery: the hard classes and `sys.*` (and `const.*`, `def.*`,
//! `mon.*`) variables cf-agent 3.21 defines before reading any policy.
//!
//! Everything is read below [`DiscoverInput::root`] (normally `/`), so tests
//! can point discovery at a fake tree holding `etc/os-release`, `proc/...`
//! and so on. Three facts come from the kernel or the C library, because
//! no file holds them or cf-agent asks for them so: the IPv4 addresses of
//! the interfaces (cf-agent's `SIOCGIFCONF`), the local time zone offset
//! (`localtime_r`, which honours `TZ` and `/etc/localtime` exactly as
//! cf-agent does) and the host's canonical name (`gethostbyname_r`, nsswitch and DNS included). All three
//! can be injected or replaced through the input.
//!
//! cf-agent defines a hard class only once: the first definition keeps its
//! tags, later ones with the same name are ignored. Variables are the
//! opposite: a later definition replaces an earlier one (this is how
//! `sys.flavor` ends up naming the most specific release file). The
//! [`Collector`] follows both rules, and the discovery steps run in
//! cf-agent's order so the surviving tags are the same.

mod bootstrap;
mod cpu;
mod host;
mod kernel;
mod keys;
mod monitor;
mod network;
mod os;
mod paths;
mod root;
mod time;
mod user;
mod version;

pub use bootstrap::split_host_port;
pub use host::NameLookup;
pub use network::{Ipv4Iface, parse_iface_flags};
pub use paths::Layout;

/// Whether `ip` is one of this host's interface addresses (as cf-agent
/// decides, when bootstrapping, whether it is the policy server): the
/// IPv4 addresses SIOCGIFCONF lists (127.0.0.1 on `lo`, not the rest of
/// 127.0.0.0/8); of IPv6, the loopback only.
pub fn is_own_address(ip: std::net::IpAddr) -> bool {
    match ip {
        std::net::IpAddr::V4(v4) => network::kernel_ipv4(None).iter().any(|i| i.addr == v4),
        std::net::IpAddr::V6(v6) => v6.is_loopback(),
    }
}

use crate::values::canon::canonify;
use crate::values::hash::FastMap;
use crate::values::value::{DataType, Deferred, Tags, Value};
use root::Root;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// Which CFEngine component we stand in for. cf-agent and cf-promises
/// discover the same host but each defines its own component class
/// (`agent` or `common`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// A run of the policy: the `agent` class.
    Agent,
    /// Checking or showing the policy, as cf-promises: the `common` class.
    Promises,
}

/// What discovery needs to know that the host cannot tell it.
#[derive(Debug, Clone)]
pub struct DiscoverInput {
    /// The work directory and the directories derived from it.
    pub layout: Layout,
    /// The policy entry file (made absolute if it is not).
    pub entry: PathBuf,
    /// The moment of the run: time classes, `sys.date`, `sys.systime`...
    pub now: SystemTime,
    /// `/` normally; tests point it at a fake tree.
    pub root: PathBuf,
    pub role: Role,
    /// The interfaces with IPv4 addresses, in kernel order. `None` asks the
    /// kernel (SIOCGIFCONF).
    pub ipv4: Option<Vec<Ipv4Iface>>,
    /// Seconds east of UTC of local time at `now`. `None` asks the C library
    /// (`localtime_r`).
    pub utc_offset: Option<i64>,
    /// How the host's own name is resolved to its fully qualified name.
    pub name_lookup: NameLookup,
    /// The directory the networking files of `/proc` are read below
    /// (`CFENGINE_TEST_OVERRIDE_PROCDIR`); `None` reads them below `root`.
    pub procdir: Option<PathBuf>,
}

impl DiscoverInput {
    /// The input for a real run on this host, now.
    pub fn new(workdir: &Path, entry: &Path, role: Role) -> DiscoverInput {
        DiscoverInput {
            layout: Layout::for_workdir(workdir),
            entry: entry.to_path_buf(),
            now: SystemTime::now(),
            root: PathBuf::from("/"),
            role,
            ipv4: None,
            utc_offset: None,
            name_lookup: NameLookup::System,
            procdir: crate::host::local::proc_override(),
        }
    }
}

/// A hard class with its meta tags, as `cf-promises --show-classes` lists
/// them (`hardclass` last).
#[derive(Debug, Clone, PartialEq)]
pub struct HardClass {
    pub name: String,
    pub tags: Tags,
}

/// A discovered variable. `name` may carry an array key exactly as
/// cf-promises prints it (`ipv4[eth0]`).
#[derive(Debug, Clone, PartialEq)]
pub struct DiscoveredVar {
    /// `sys`, `const`, `def` or `mon` (all in the `default` namespace).
    pub scope: &'static str,
    pub name: String,
    pub value: Value,
    pub dtype: DataType,
    pub tags: Vec<String>,
    /// Made at the first read instead of `value` (which is then `Null`
    /// data): the big data containers few policies read.
    pub deferred: Option<Deferred>,
}

impl DiscoveredVar {
    /// The value, made now if it is deferred.
    pub fn value(&self) -> &Value {
        self.deferred.as_ref().map_or(&self.value, Deferred::get)
    }
}

/// Everything discovery found, in definition order.
#[derive(Debug, Clone, Default)]
pub struct Discovery {
    pub classes: Vec<HardClass>,
    pub vars: Vec<DiscoveredVar>,
}

impl Discovery {
    pub fn class(&self, name: &str) -> Option<&HardClass> {
        self.classes.iter().find(|c| c.name == name)
    }

    pub fn var(&self, scope: &str, name: &str) -> Option<&DiscoveredVar> {
        self.vars
            .iter()
            .find(|v| v.scope == scope && v.name == name)
    }
}

/// Discovers this host's hard classes and special variables, in cf-agent's
/// order. Never fails: what cannot be read is simply not defined.
pub fn discover(input: &DiscoverInput) -> Discovery {
    let root = Root::new(&input.root);
    let mut c = Collector::default();
    let clock = time::Clock::new(input.now, input.utc_offset);

    // The component class comes first (GenericAgentInitialize), then the
    // time classes, then DetectEnvironment.
    match input.role {
        Role::Agent => c.class("agent", "cfe_internal,source=agent"),
        Role::Promises => c.class("common", "cfe_internal,source=agent"),
    }
    time::time_classes(&mut c, &clock);

    let uname = kernel::Uname::read(&root);
    let names = host::discover_names(&mut c, &root, input.name_lookup, &uname.nodename);
    time::time_vars(&mut c, &clock, &root);
    kernel::class_and_arch(&mut c, &uname);
    time::date_vars(&mut c, &clock);
    kernel::uname_vars(&mut c, &uname);
    paths::dir_vars(&mut c, &input.layout);
    version::version_vars(&mut c, &input.layout);
    keys::key_digest(&mut c, &root, &input.layout);
    paths::component_vars(&mut c, &root, &input.layout);
    version::edition_class(&mut c);
    kernel::arch_classes(&mut c, &uname);
    host::alias_classes(&mut c, &names);

    // One socket for the interface ioctls; on a fake root the tree's
    // /sys/class/net tells the hardware facts instead.
    let kernel = if input.ipv4.is_none() || root.is_host() {
        crate::host::netif::Interfaces::open().ok()
    } else {
        None
    };
    let ipv4 = match &input.ipv4 {
        Some(list) => list.clone(),
        None => network::kernel_ipv4(kernel.as_ref()),
    };
    let links = network::Links {
        root: &root,
        kernel: kernel.as_ref().filter(|_| root.is_host()),
        asked: Default::default(),
    };
    network::interfaces(&mut c, &links, &input.layout, &ipv4);
    let net_root = input
        .procdir
        .as_deref()
        .map_or_else(|| root.clone(), Root::new);
    network::networking(&mut c, &net_root);
    monitor::environment(&mut c, &root, &input.layout, input.now, input.utc_offset);
    version::builtin_classes(&mut c);
    os::os_classes(&mut c, &root);
    cpu::cpus(&mut c, &root);
    let user = user::current_user(&root);
    os::crontab(&mut c, user.as_ref());
    os::doc_root(&mut c);
    user::user_data(&mut c, user.as_ref());
    version::def_vars(&mut c);
    os::os_name_human(&mut c);
    os::os_version_major(&mut c);
    version::const_vars(&mut c);
    paths::policy_entry_vars(&mut c, &input.entry);
    bootstrap::bootstrap_state(&mut c, &root, &input.layout, input.name_lookup);

    c.finish()
}

/// Applies `-D` and `-N` as cf-agent 3.21 does.
///
/// `-D` classes are defined before discovery, so they win over a hard class
/// of the same name: the class stays defined but carries only
/// `source=environment`. Names are canonified, keeping a `namespace:`
/// prefix; a value may hold several names separated by commas.
///
/// `-N` does not touch this list: cf-agent 3.21 neither cancels a hard
/// class nor a `-D` class with it (checked against cf-agent 3.21; since
/// ENT-5886 it only stops persistent classes from being loaded, which is
/// the state module's business). The names are accepted so callers pass
/// both flags through one door.
pub fn apply_command_line(classes: &mut Vec<HardClass>, defines: &[String], negates: &[String]) {
    let _ = negates;
    for d in defines.iter().flat_map(|d| d.split(',')) {
        if d.is_empty() {
            continue;
        }
        let name = crate::values::canon::canonify_class(d);
        classes.retain(|c| c.name != name);
        classes.push(HardClass {
            name,
            tags: Tags::from(["source=environment".to_string()]),
        });
    }
}

/// Accumulates classes (first definition wins) and variables (last
/// definition wins) in definition order.
///
/// Each name is allocated once: the index's key holds it, and `finish`
/// moves it into its class or variable (a start defines some 180 of them).
#[derive(Debug)]
pub(crate) struct Collector {
    /// The tags of each class, in definition order.
    class_tags: Vec<Tags>,
    /// Each list of tags made so far, by the text it was made from.
    tag_lists: Vec<(String, Tags)>,
    // foldhash: ~400 names hashed at every start, where SipHash showed.
    class_index: FastMap<String, usize>,
    vars: Vec<VarSlot>,
    /// Name to slot, one map per scope so a lookup borrows the name.
    var_index: [FastMap<String, usize>; SCOPES.len()],
}

/// The scopes discovery defines variables in.
const SCOPES: [&str; 4] = ["sys", "const", "def", "mon"];

/// A variable but its name (kept in the index).
#[derive(Debug)]
struct VarSlot {
    scope: &'static str,
    value: Value,
    dtype: DataType,
    tags: Vec<String>,
    deferred: Option<Deferred>,
}

impl Default for Collector {
    fn default() -> Collector {
        // Room for a start's definitions (~90 classes, ~90 variables on a
        // plain host), so the tables are not regrown.
        const ROOM: usize = 128;
        let map = || FastMap::with_capacity_and_hasher(ROOM, Default::default());
        Collector {
            class_tags: Vec::with_capacity(ROOM),
            tag_lists: Vec::with_capacity(32),
            class_index: map(),
            vars: Vec::with_capacity(ROOM),
            var_index: [
                map(),
                FastMap::default(),
                FastMap::default(),
                FastMap::default(),
            ],
        }
    }
}

fn scope_slot(scope: &str) -> usize {
    SCOPES
        .iter()
        .position(|s| *s == scope)
        .expect("discovery defines variables in sys, const, def or mon only")
}

impl Collector {
    /// Defines a hard class: canonified, `hardclass` appended to the tags;
    /// ignored when empty or already defined.
    pub(crate) fn class(&mut self, name: &str, tags: &str) {
        // Most names are canonical already: a repeated one costs no copy.
        if self.class_index.contains_key(name) {
            return;
        }
        let name = canonify(name);
        if name.is_empty() || self.class_index.contains_key(&name) {
            return;
        }
        let tags = match self.tag_lists.iter().find(|(text, _)| text == tags) {
            Some((_, list)) => list.clone(),
            None => {
                let mut list = split_tags(tags, 1);
                list.push("hardclass".to_string());
                let list = Tags::from(list);
                self.tag_lists.push((tags.to_string(), list.clone()));
                list
            }
        };
        self.class_index.insert(name, self.class_tags.len());
        self.class_tags.push(tags);
    }

    pub(crate) fn has_class(&self, name: &str) -> bool {
        self.class_index.contains_key(name)
    }

    /// Defines (or redefines) a variable.
    pub(crate) fn var(
        &mut self,
        scope: &'static str,
        name: &str,
        value: Value,
        dtype: DataType,
        tags: &str,
    ) {
        self.put_var(
            name,
            VarSlot {
                scope,
                value,
                dtype,
                tags: split_tags(tags, 0),
                deferred: None,
            },
        );
    }

    /// Defines (or redefines) a data variable whose value `make` makes at
    /// its first read.
    pub(crate) fn deferred_data(
        &mut self,
        scope: &'static str,
        name: &str,
        tags: &str,
        make: impl Fn() -> Value + Send + Sync + 'static,
    ) {
        self.put_var(
            name,
            VarSlot {
                scope,
                value: Value::data(serde_json::Value::Null),
                dtype: DataType::Data,
                tags: split_tags(tags, 0),
                deferred: Some(Deferred::new(make)),
            },
        );
    }

    fn put_var(&mut self, name: &str, var: VarSlot) {
        let index = &mut self.var_index[scope_slot(var.scope)];
        match index.get(name) {
            Some(&i) => self.vars[i] = var,
            None => {
                index.insert(name.to_string(), self.vars.len());
                self.vars.push(var);
            }
        }
    }

    /// A `sys.` string variable.
    pub(crate) fn sys(&mut self, name: &str, value: impl Into<String>, tags: &str) {
        self.var(
            "sys",
            name,
            Value::Scalar(value.into()),
            DataType::String,
            tags,
        );
    }

    pub(crate) fn sys_str(&self, name: &str) -> Option<&str> {
        self.var_index[0]
            .get(name)
            .and_then(|&i| self.vars[i].value.as_scalar())
    }

    fn finish(self) -> Discovery {
        // The names go back to their slots, in definition order.
        let mut class_names = vec![String::new(); self.class_tags.len()];
        for (name, i) in self.class_index {
            class_names[i] = name;
        }
        let classes = class_names
            .into_iter()
            .zip(self.class_tags)
            .map(|(name, tags)| HardClass { name, tags })
            .collect();
        let mut var_names = vec![String::new(); self.vars.len()];
        for (name, i) in self.var_index.into_iter().flatten() {
            var_names[i] = name;
        }
        let vars = var_names
            .into_iter()
            .zip(self.vars)
            .map(|(name, v)| DiscoveredVar {
                scope: v.scope,
                name,
                value: v.value,
                dtype: v.dtype,
                tags: v.tags,
                deferred: v.deferred,
            })
            .collect();
        Discovery { classes, vars }
    }
}

/// The comma-separated tags, with room for `extra` more.
fn split_tags(tags: &str, extra: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(tags.bytes().filter(|&b| b == b',').count() + 1 + extra);
    out.extend(
        tags.split(',')
            .filter(|t| !t.is_empty())
            .map(str::to_string),
    );
    out
}

#[cfg(test)]
mod tests;
