//! Regression tests for issue 14: an attack on the agent running as root.
//! Each test is one finding of the issue (cf-agent 3.21 behaves safely in
//! each); each failed before the fix.
//!
//! The race findings run as loops against an attacker: a second uid made
//! by the test (`useradd --system`, removed again by a Drop guard, even
//! when the test fails), running a child process (this test binary again,
//! see [`attacker_process`]) in a directory it owns. The victims are
//! root-owned 0600 files outside that directory; after the loop their
//! content, owner and mode must be what they were, and no file in the
//! attacker's directory may hold their secret. The assertions are on the
//! victims, never on the mechanism the agent uses to protect them.
//!
//! Tests that need root say "skipped: needs root" and return when not
//! root; CI runs as root.

use crate::common::*;
use std::collections::HashSet;
use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Iterations of every race loop.
const ITERATIONS: usize = 200;

/// The environment variable that turns [`attacker_process`] into an attacker.
const ATTACK: &str = "CVG_SAFE_ACCESS_ATTACK";

/// The race tests run one at a time: each attacker spins on a CPU.
static RACES: Mutex<()> = Mutex::new(());

fn skipped_unless_root() -> bool {
    if is_root() {
        false
    } else {
        eprintln!("skipped: needs root");
        true
    }
}

// ---------------------------------------------------------------------------
// The attacker
// ---------------------------------------------------------------------------

/// Not a test: the attacker's body, run when this binary is started again
/// with `CVG_SAFE_ACCESS_ATTACK` set (under the attacker's uid). Without
/// the variable it does nothing. It never returns; the test kills it.
#[test]
fn attacker_process() {
    let Ok(mode) = std::env::var(ATTACK) else {
        return;
    };
    let dir = PathBuf::from(std::env::var("CVG_DIR").expect("CVG_DIR"));
    let victim = PathBuf::from(std::env::var("CVG_VICTIM").unwrap_or_default());
    let list = |key: &str| -> Vec<String> {
        std::env::var(key)
            .unwrap_or_default()
            .split(',')
            .filter(|s| !s.is_empty())
            .map(str::to_string)
            .collect()
    };
    match mode.as_str() {
        "plant" => plant(&dir, &victim, &list("CVG_BASES"), &list("CVG_KEEP")),
        "exchange" => exchange(&dir, &list("CVG_PAIRS")),
        other => panic!("unknown attack {other}"),
    }
}

/// The pid the kernel gave last (the fifth field of /proc/loadavg).
fn last_pid() -> u32 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().nth(4)?.parse().ok())
        .unwrap_or(0)
}

/// Finding 1's attacker: plants symlinks to the victim at every name the
/// old code used for its temporary files (`.BASE.convergent-PID`) for the
/// pids about to be given out, and keeps replacing any other new entry of
/// its directory (whatever its name: a temporary file of any naming) by a
/// symlink to the victim.
fn plant(dir: &Path, victim: &Path, bases: &[String], keep: &[String]) -> ! {
    let mut planted: HashSet<String> = HashSet::new();
    let mut ready = false;
    let mut n = 0u64;
    loop {
        let last = last_pid();
        for pid in last.saturating_sub(20)..last + 400 {
            for base in bases {
                let name = format!(".{base}.convergent-{pid}");
                if planted.insert(name.clone()) {
                    let _ = std::os::unix::fs::symlink(victim, dir.join(&name));
                }
            }
        }
        if let Ok(rd) = std::fs::read_dir(dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if planted.contains(&name)
                    || keep.contains(&name)
                    || name.starts_with(".attacker")
                    || e.file_type().map(|t| t.is_symlink()).unwrap_or(true)
                {
                    continue;
                }
                n += 1;
                let tmp = dir.join(format!(".attacker-swap-{n}"));
                if std::os::unix::fs::symlink(victim, &tmp).is_ok()
                    && std::fs::rename(&tmp, e.path()).is_err()
                {
                    let _ = std::fs::remove_file(&tmp);
                }
            }
        }
        if !ready {
            let _ = std::fs::write(dir.join(".attacker-ready"), b"");
            ready = true;
        }
        std::thread::yield_now();
    }
}

/// The races' attacker: swaps, atomically and again and again, each pair of
/// names `a:b` of its directory (a file or directory with a symlink to a
/// victim), with `renameat2(RENAME_EXCHANGE)`.
fn exchange(dir: &Path, pairs: &[String]) -> ! {
    let pairs: Vec<(CString, CString)> = pairs
        .iter()
        .map(|p| {
            let (a, b) = p.split_once(':').expect("pair a:b");
            let c = |n: &str| CString::new(dir.join(n).as_os_str().as_bytes()).unwrap();
            (c(a), c(b))
        })
        .collect();
    let _ = std::fs::write(dir.join(".attacker-ready"), b"");
    let mut n = 0u64;
    loop {
        for (a, b) in &pairs {
            // SAFETY: two valid NUL-terminated paths.
            unsafe {
                libc::renameat2(
                    libc::AT_FDCWD,
                    a.as_ptr(),
                    libc::AT_FDCWD,
                    b.as_ptr(),
                    libc::RENAME_EXCHANGE,
                );
            }
        }
        n += 1;
        if n.is_multiple_of(64) {
            std::thread::yield_now();
        }
    }
}

/// A second uid for one test, and its running attacker process: the
/// process is killed and the user removed when this goes out of scope.
struct Attacker {
    name: String,
    uid: u32,
    gid: u32,
    child: Option<Child>,
}

impl Attacker {
    fn new(tag: &str) -> Attacker {
        let name = format!("cvg-attacker-{}-{tag}", std::process::id());
        let _g = serial(&USERS);
        let _ = Command::new("userdel").arg(&name).output();
        let out = Command::new("useradd")
            .args(["--system", "--no-create-home", "--shell", "/bin/false"])
            .arg(&name)
            .output()
            .expect("run useradd");
        assert!(out.status.success(), "useradd {name}: {out:?}");
        let id = |flag: &str| -> u32 {
            let out = Command::new("id").arg(flag).arg(&name).output().unwrap();
            String::from_utf8_lossy(&out.stdout).trim().parse().unwrap()
        };
        let (uid, gid) = (id("-u"), id("-g"));
        Attacker {
            name,
            uid,
            gid,
            child: None,
        }
    }

    /// The attacker's ids, to give files to.
    fn who(&self) -> Who {
        Who {
            uid: self.uid,
            gid: self.gid,
        }
    }

    /// A directory of the attacker's, 0755.
    fn dir(&self, p: &Path) {
        self.who().dir(p);
    }

    /// Starts the attack in `dir` (this binary, copied where the attacker
    /// can run it) and waits until it has made its first round.
    fn start(&mut self, tmp: &Path, dir: &Path, env: &[(&str, String)]) {
        let exe = tmp.join("attacker-bin");
        std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
        std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut cmd = Command::new(&exe);
        // The test's full name in the one test binary (`it`), whose other
        // tests `--exact` leaves out.
        cmd.args([
            "--exact",
            "safe_access::attacker_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CVG_DIR", dir)
        .current_dir(dir)
        .uid(self.uid)
        .gid(self.gid)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        self.child = Some(cmd.spawn().expect("start the attacker"));
        let ready = dir.join(".attacker-ready");
        let start = Instant::now();
        while !ready.exists() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the attacker did not start"
            );
            if let Some(st) = self.child.as_mut().unwrap().try_wait().unwrap() {
                panic!("the attacker exited: {st}");
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Attacker {
    fn drop(&mut self) {
        self.stop();
        let _g = serial(&USERS);
        let _ = Command::new("userdel").arg(&self.name).output();
    }
}

// ---------------------------------------------------------------------------
// Victims and the agent
// ---------------------------------------------------------------------------

/// A root-owned 0600 file holding a secret.
struct Victim {
    path: PathBuf,
    secret: String,
}

impl Victim {
    fn new(path: PathBuf) -> Victim {
        let secret = format!(
            "TOP-SECRET-{}-{}\n",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        );
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &secret).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::os::unix::fs::lchown(&path, Some(0), Some(0)).unwrap();
        Victim { path, secret }
    }

    /// What changed of the victim: content, owner, mode, kind.
    fn damage(&self) -> Option<String> {
        let m = match std::fs::symlink_metadata(&self.path) {
            Ok(m) => m,
            Err(e) => return Some(format!("{} is gone: {e}", self.path.display())),
        };
        let mut d = Vec::new();
        if !m.file_type().is_file() {
            d.push(format!("is no longer a regular file ({:?})", m.file_type()));
        }
        if (m.uid(), m.gid()) != (0, 0) {
            d.push(format!("owner is now {}:{}", m.uid(), m.gid()));
        }
        if m.mode() & 0o7777 != 0o600 {
            d.push(format!("mode is now {:04o}", m.mode() & 0o7777));
        }
        match std::fs::read(&self.path) {
            Ok(c) if c == self.secret.as_bytes() => {}
            Ok(c) => d.push(format!(
                "content is now {:?}",
                String::from_utf8_lossy(&c[..c.len().min(200)])
            )),
            Err(e) => d.push(format!("cannot be read: {e}")),
        }
        (!d.is_empty()).then(|| format!("victim {}: {}", self.path.display(), d.join(", ")))
    }

    /// Files under `dir` (not following symlinks) that hold the secret.
    fn leaks_in(&self, dir: &Path) -> Vec<String> {
        let mut found = Vec::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            let Ok(rd) = std::fs::read_dir(&d) else {
                continue;
            };
            for e in rd.flatten() {
                let Ok(m) = std::fs::symlink_metadata(e.path()) else {
                    continue;
                };
                if m.is_dir() {
                    todo.push(e.path());
                    continue;
                }
                // Read what was checked: opened without following a link and
                // judged by its descriptor, since the attacker keeps swapping
                // names while we look (a read by name would follow a link
                // swapped in after the lstat, as root).
                let Ok(mut f) = std::fs::OpenOptions::new()
                    .read(true)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                    .open(e.path())
                else {
                    continue;
                };
                let Ok(m) = f.metadata() else { continue };
                let mut c = Vec::new();
                if m.is_file()
                    && std::io::Read::read_to_end(&mut f, &mut c).is_ok()
                    && c.windows(self.secret.len())
                        .any(|w| w == self.secret.as_bytes())
                {
                    found.push(format!(
                        "{} (owner {}:{}, mode {:04o}) holds the secret",
                        e.path().display(),
                        m.uid(),
                        m.gid(),
                        m.mode() & 0o7777
                    ));
                }
            }
        }
        found
    }
}

/// A test's temporary directory, traversable by the attacker (0711).
fn traversable_tempdir() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    tmp
}

/// One run of the agent: `agent -K -I --detailed-exitcodes -w WD -f POLICY`.
fn agent(wd: &Path, policy: &Path) -> Captured {
    run(Command::new(agent_bin())
        .args(["-K", "-I", "--detailed-exitcodes", "-w"])
        .arg(wd)
        .arg("-f")
        .arg(policy))
}

/// A uid and gid to give files to.
#[derive(Clone, Copy)]
struct Who {
    uid: u32,
    gid: u32,
}

impl Who {
    /// Gives a path (not following a symlink) to the attacker.
    fn own(self, p: &Path) {
        std::os::unix::fs::lchown(p, Some(self.uid), Some(self.gid)).expect("lchown");
    }

    /// A directory of the attacker's, 0755.
    fn dir(self, p: &Path) {
        std::fs::create_dir_all(p).unwrap();
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        self.own(p);
    }
}

/// Makes `p` a fresh regular file of the attacker's with `content` and
/// `mode`, whatever was there. The mode and owner are set through the open
/// file, so that a swapping attacker never has the test change anything
/// else.
fn fresh_file(a: Who, p: &Path, content: &str, mode: u32) {
    use std::io::Write;
    let _ = std::fs::remove_file(p);
    let _ = std::fs::remove_dir_all(p);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(p)
        .unwrap();
    f.write_all(content.as_bytes()).unwrap();
    f.set_permissions(std::fs::Permissions::from_mode(mode))
        .unwrap();
    std::os::unix::fs::fchown(&f, Some(a.uid), Some(a.gid)).unwrap();
}

/// Makes `p` a symlink of the attacker's to `target`, whatever was there.
///
/// The link is made and given to the attacker outside the attacker's
/// directory, then renamed in: made in place, it would be root's for an
/// instant, and a swap in that instant would leave a root-owned link to the
/// victim there, which the agent rightly follows (the attacker could never
/// make one).
fn fresh_link(a: Who, target: &Path, p: &Path) {
    let _ = std::fs::remove_file(p);
    let _ = std::fs::remove_dir_all(p);
    let outside = p
        .parent()
        .and_then(Path::parent)
        .expect("the attacker's directory has a parent")
        .join(format!(
            ".staging-{}",
            p.file_name().unwrap().to_string_lossy()
        ));
    let _ = std::fs::remove_file(&outside);
    std::os::unix::fs::symlink(target, &outside).unwrap();
    a.own(&outside);
    std::fs::rename(&outside, p).unwrap();
}

// ---------------------------------------------------------------------------
// Finding 1: the temporary file's name
// ---------------------------------------------------------------------------

/// Finding 1 (critical): edits, `content` and copies wrote
/// `DIR/.NAME.convergent-PID` with O_CREAT|O_TRUNC and no O_EXCL or
/// O_NOFOLLOW, then chowned, chmoded and renamed it (backups likewise): a
/// user owning DIR who planted a symlink at that name had a root-only file
/// overwritten and given to them. The attacker plants symlinks at every
/// old-style name for the coming pids and replaces any other new entry of
/// its directory by a symlink, for 200 runs.
#[test]
fn temp_files_never_write_through_a_planted_symlink() {
    if skipped_unless_root() {
        return;
    }
    let _serial = serial(&RACES);
    let tmp = traversable_tempdir();
    let mut a = Attacker::new("tmp");
    let home = tmp.path().join("home");
    a.dir(&home);
    let victim = Victim::new(tmp.path().join("root/shadow"));
    let source = tmp.path().join("root/source");
    std::fs::write(&source, "fresh data from root\n").unwrap();
    let (conf, motd, data) = (home.join("conf"), home.join("motd"), home.join("data"));
    let policy = write_policy(
        tmp.path(),
        &format!(
            r#"bundle agent main
{{
  files:
      "{conf}" edit_line => add, edit_defaults => backup;
      "{motd}" content => "welcome";
      "{data}" copy_from => cp("{source}");
}}
bundle edit_line add {{ insert_lines: "added by policy"; }}
body edit_defaults backup {{ edit_backup => "true"; }}
body copy_from cp(s) {{ source => "$(s)"; compare => "digest"; copy_backup => "true"; }}
"#,
            conf = conf.display(),
            motd = motd.display(),
            data = data.display(),
            source = source.display()
        ),
    );
    a.start(
        tmp.path(),
        &home,
        &[
            (ATTACK, "plant".into()),
            ("CVG_VICTIM", victim.path.display().to_string()),
            (
                "CVG_BASES",
                "conf,conf.cf-before-edit,motd,data,data.cfnew,data.cfsaved".into(),
            ),
            ("CVG_KEEP", "conf,motd,data".into()),
        ],
    );
    let wd = tmp.path().join("wd");
    let mut edited = 0;
    for i in 0..ITERATIONS {
        fresh_file(a.who(), &conf, "setting=1\n", 0o644);
        fresh_file(a.who(), &motd, "old motd\n", 0o644);
        fresh_file(a.who(), &data, "old data\n", 0o644);
        let out = agent(&wd, &policy);
        if std::fs::read_to_string(&conf).is_ok_and(|c| c.contains("added by policy")) {
            edited += 1;
        }
        if let Some(d) = victim.damage() {
            a.stop();
            panic!("iteration {i}: {d}\nlast run: {out:?}");
        }
    }
    a.stop();
    let leaks = victim.leaks_in(&home);
    assert!(leaks.is_empty(), "{}", leaks.join("\n"));
    assert!(edited > 0, "no run edited the file: nothing was tested");
}

// ---------------------------------------------------------------------------
// Finding 2: a symlinked parent directory
// ---------------------------------------------------------------------------

fn mog_policy(dir: &Path, target: &Path, user: &str) -> PathBuf {
    write_policy(
        dir,
        &format!(
            r#"bundle agent main
{{
  files:
      "{target}" perms => mog("600", "{user}", "{user}");
}}
body perms mog(mode, user, group)
{{
  mode => "$(mode)";
  owners => {{ "$(user)" }};
  groups => {{ "$(group)" }};
}}
"#,
            target = target.display()
        ),
    )
}

/// Finding 2 (high): with `home/.ssh -> /root/.ssh` planted by the user,
/// `perms => mog("600", "user", "user")` on `home/.ssh/authorized_keys`
/// gave root's file away. cf-agent refuses ("Cannot follow symlink"): a
/// symlink is followed only when it is owned by root, or by the agent's
/// uid, or when its owner and group are its destination's.
#[test]
fn perms_refuse_a_symlinked_parent_owned_by_the_user() {
    if skipped_unless_root() {
        return;
    }
    let tmp = traversable_tempdir();
    let a = Attacker::new("par");
    let home = tmp.path().join("home");
    a.dir(&home);
    let rootssh = tmp.path().join("rootssh");
    std::fs::create_dir(&rootssh).unwrap();
    std::fs::set_permissions(&rootssh, std::fs::Permissions::from_mode(0o700)).unwrap();
    let victim = Victim::new(rootssh.join("authorized_keys"));
    fresh_link(a.who(), &rootssh, &home.join(".ssh"));
    let policy = mog_policy(tmp.path(), &home.join(".ssh/authorized_keys"), &a.name);
    let out = agent(&tmp.path().join("wd"), &policy);
    if let Some(d) = victim.damage() {
        panic!("{d}\n{out:?}");
    }
    assert!(
        out.stdout.contains("error:"),
        "the refusal must be reported as an error: {out:?}"
    );
    assert!(
        matches!(out.code, Some(4 | 6)),
        "the promise must not be kept: {out:?}"
    );
}

/// The other side of finding 2's rule, so that the fix does not refuse
/// too much: a parent symlink owned by root is followed, and so is a
/// user's link to a directory with the same owner and group. (This passes
/// before the fix too.)
#[test]
fn trusted_symlinked_parents_are_followed() {
    if skipped_unless_root() {
        return;
    }
    let tmp = traversable_tempdir();
    let a = Attacker::new("tru");
    // The user's own link to the user's own directory.
    let home = tmp.path().join("home");
    a.dir(&home);
    let real = tmp.path().join("dotfiles/ssh");
    a.dir(&tmp.path().join("dotfiles"));
    a.dir(&real);
    fresh_file(a.who(), &real.join("authorized_keys"), "key\n", 0o644);
    fresh_link(a.who(), &real, &home.join(".ssh"));
    let policy = mog_policy(tmp.path(), &home.join(".ssh/authorized_keys"), &a.name);
    let out = agent(&tmp.path().join("wd"), &policy);
    let m = std::fs::metadata(real.join("authorized_keys")).unwrap();
    assert_eq!(m.mode() & 0o7777, 0o600, "{out:?}");
    // A root-owned link to a root-owned directory.
    let etc = tmp.path().join("etc");
    let conf = tmp.path().join("conf.d");
    std::fs::create_dir(&conf).unwrap();
    std::fs::write(conf.join("app.conf"), "x\n").unwrap();
    std::fs::set_permissions(
        conf.join("app.conf"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    std::os::unix::fs::symlink(&conf, &etc).unwrap();
    let policy = mog_policy(tmp.path(), &etc.join("app.conf"), &a.name);
    let out = agent(&tmp.path().join("wd"), &policy);
    let m = std::fs::metadata(conf.join("app.conf")).unwrap();
    assert_eq!(
        (m.uid(), m.mode() & 0o7777),
        (a.uid, 0o600),
        "a root-owned link is followed: {out:?}"
    );
}

/// Finding 2 with a swapping attacker: `home/.ssh` flips, atomically and
/// all the time, between the user's own directory and a symlink to root's
/// directory, for 200 runs of the same perms promise.
#[test]
fn perms_never_follow_a_swapped_parent_symlink() {
    if skipped_unless_root() {
        return;
    }
    let _serial = serial(&RACES);
    let tmp = traversable_tempdir();
    let mut a = Attacker::new("swp");
    let home = tmp.path().join("home");
    a.dir(&home);
    let rootssh = tmp.path().join("rootssh");
    std::fs::create_dir(&rootssh).unwrap();
    std::fs::set_permissions(&rootssh, std::fs::Permissions::from_mode(0o700)).unwrap();
    let victim = Victim::new(rootssh.join("authorized_keys"));
    let (ssh, other) = (home.join(".ssh"), home.join(".ssh-other"));
    a.dir(&ssh);
    // The user's own file is root's and 0644: the first run has work to do
    // there too; through the link there is always work (a chown).
    let keys = ssh.join("authorized_keys");
    std::fs::write(&keys, "user key\n").unwrap();
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o644)).unwrap();
    fresh_link(a.who(), &rootssh, &other);
    let policy = mog_policy(tmp.path(), &ssh.join("authorized_keys"), &a.name);
    a.start(
        tmp.path(),
        &home,
        &[
            (ATTACK, "exchange".into()),
            ("CVG_PAIRS", ".ssh:.ssh-other".into()),
        ],
    );
    let wd = tmp.path().join("wd");
    for i in 0..ITERATIONS {
        let out = agent(&wd, &policy);
        if let Some(d) = victim.damage() {
            a.stop();
            panic!("iteration {i}: {d}\nlast run: {out:?}");
        }
    }
    a.stop();
    let leaks = victim.leaks_in(&home);
    assert!(leaks.is_empty(), "{}", leaks.join("\n"));
}

// ---------------------------------------------------------------------------
// Finding 3: check, then read
// ---------------------------------------------------------------------------

/// Finding 3 (high): the agent checked a path with lstat and then opened it
/// by name. Swapping a file of the user's and a symlink to a root-only file
/// in a loop leaked the root-only content into the user's files (an edit, a
/// copy_from), or changed the root file's mode (perms). Here three promises
/// on three swapped paths of the user's, for 200 runs.
#[test]
fn swapped_symlinks_never_leak_or_change_root_files() {
    if skipped_unless_root() {
        return;
    }
    let _serial = serial(&RACES);
    let tmp = traversable_tempdir();
    let mut a = Attacker::new("chk");
    let home = tmp.path().join("home");
    a.dir(&home);
    let victim = Victim::new(tmp.path().join("root/shadow"));
    let names = ["edit", "perm", "src"];
    let policy = write_policy(
        tmp.path(),
        &format!(
            r#"bundle agent main
{{
  files:
      "{home}/edit" edit_line => add;
      "{home}/perm" perms => m("644");
      "{home}/copy" copy_from => cp("{home}/src"), perms => o("{user}");
}}
bundle edit_line add {{ insert_lines: "added by policy"; }}
body perms m(mode) {{ mode => "$(mode)"; }}
body perms o(user) {{ owners => {{ "$(user)" }}; }}
body copy_from cp(s) {{ source => "$(s)"; compare => "digest"; copy_backup => "false"; }}
"#,
            home = home.display(),
            user = a.name
        ),
    );
    let who = a.who();
    let reset = || {
        for n in names {
            fresh_file(who, &home.join(n), "user data\n", 0o600);
            fresh_link(who, &victim.path, &home.join(format!(".{n}-other")));
        }
        let _ = std::fs::remove_file(home.join("copy"));
    };
    reset();
    let pairs: Vec<String> = names.iter().map(|n| format!("{n}:.{n}-other")).collect();
    a.start(
        tmp.path(),
        &home,
        &[(ATTACK, "exchange".into()), ("CVG_PAIRS", pairs.join(","))],
    );
    let wd = tmp.path().join("wd");
    for i in 0..ITERATIONS {
        reset();
        let out = agent(&wd, &policy);
        let leaks = victim.leaks_in(&home);
        if let Some(d) = victim.damage().or_else(|| leaks.first().cloned()) {
            a.stop();
            panic!("iteration {i}: {d}\nlast run: {out:?}");
        }
    }
    a.stop();
    let leaks = victim.leaks_in(&home);
    assert!(leaks.is_empty(), "{}", leaks.join("\n"));
}

// ---------------------------------------------------------------------------
// Finding 4: copy_from a symlink
// ---------------------------------------------------------------------------

/// Finding 4 (medium-high): copy_from of a source that is a symlink copied
/// its target's content: a 0600 file became a 0644 copy under
/// `perms => m("644")`. cf-agent copies the link: the destination becomes a
/// symlink with the same target text, and the target keeps its mode.
#[test]
fn copy_from_a_symlink_source_copies_the_link() {
    let tmp = tempfile::tempdir().unwrap();
    let secret = tmp.path().join("secret");
    std::fs::write(&secret, "private\n").unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::os::unix::fs::symlink(&secret, src.join("link")).unwrap();
    let dest = tmp.path().join("dest");
    let policy = write_policy(
        tmp.path(),
        &format!(
            r#"bundle agent main
{{
  files:
      "{dest}" copy_from => cp("{src}/link"), perms => m("644");
}}
body copy_from cp(s) {{ source => "$(s)"; }}
body perms m(mode) {{ mode => "$(mode)"; }}
"#,
            dest = dest.display(),
            src = src.display()
        ),
    );
    let out = agent(&tmp.path().join("wd"), &policy);
    let m = std::fs::symlink_metadata(&dest).expect("the destination exists");
    assert!(
        !(m.is_file() && std::fs::read(&dest).unwrap() == b"private\n"),
        "the link's target was copied into a {:04o} file: {out:?}",
        m.mode() & 0o7777
    );
    assert!(m.is_symlink(), "the destination is not a symlink: {out:?}");
    assert_eq!(std::fs::read_link(&dest).unwrap(), secret, "{out:?}");
    assert_eq!(
        std::fs::metadata(&secret).unwrap().mode() & 0o7777,
        0o600,
        "the link's target changed mode: {out:?}"
    );
    assert_eq!(std::fs::read(&secret).unwrap(), b"private\n");
}

// ---------------------------------------------------------------------------
// Finding 5: a promiser that is a symlink
// ---------------------------------------------------------------------------

/// Finding 5 (medium): a promiser that is a symlink was silently reported
/// kept, its edits and perms skipped. On a trusted link (owned by root or
/// by the agent's own uid, like /etc/resolv.conf) cf-agent edits and
/// changes the target, and the link stays a link.
#[test]
fn a_trusted_symlink_promiser_edits_and_changes_its_target() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("run/resolv.conf");
    std::fs::create_dir_all(real.parent().unwrap()).unwrap();
    std::fs::write(&real, "nameserver 9.9.9.9\n").unwrap();
    std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o600)).unwrap();
    let etc = tmp.path().join("etc");
    std::fs::create_dir(&etc).unwrap();
    let link = etc.join("resolv.conf");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let policy = write_policy(
        tmp.path(),
        &format!(
            r#"bundle agent main
{{
  files:
      "{link}" edit_line => add, perms => m("644");
}}
bundle edit_line add {{ insert_lines: "nameserver 1.2.3.4"; }}
body perms m(mode) {{ mode => "$(mode)"; }}
"#,
            link = link.display()
        ),
    );
    let out = agent(&tmp.path().join("wd"), &policy);
    assert!(
        std::fs::symlink_metadata(&link).unwrap().is_symlink(),
        "the link was replaced: {out:?}"
    );
    assert_eq!(std::fs::read_link(&link).unwrap(), real, "{out:?}");
    assert_eq!(
        std::fs::read_to_string(&real).unwrap(),
        "nameserver 9.9.9.9\nnameserver 1.2.3.4\n",
        "the link's target was not edited: {out:?}"
    );
    assert_eq!(
        std::fs::metadata(&real).unwrap().mode() & 0o7777,
        0o644,
        "the link's target kept its mode: {out:?}"
    );
}

// ---------------------------------------------------------------------------
// Finding 7: leftovers and lost edits
// ---------------------------------------------------------------------------

fn big_content(lines: usize) -> String {
    let mut s = String::with_capacity(lines * 45);
    for i in 0..lines {
        s.push_str(&format!("line {i:07} some filler text for size ....\n"));
    }
    s
}

fn insert_policy(dir: &Path, name: &str, target: &Path, line: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!(
            r#"body edit_defaults big {{ max_file_size => "0"; edit_backup => "false"; }}
bundle agent main
{{
  files:
      "{}" edit_line => e, edit_defaults => big;
}}
bundle edit_line e {{ insert_lines: "{line}"; }}
"#,
            target.display()
        ),
    )
    .unwrap();
    p
}

fn entries(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Finding 7 (low), first half: a run killed while writing left its
/// temporary file beside the target for ever. The next run that writes in
/// that directory removes the temporary files of runs that are dead: after
/// it, the directory holds only what an undisturbed run leaves there.
#[test]
fn the_next_run_removes_a_killed_runs_temp_file() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("d");
    std::fs::create_dir(&dir).unwrap();
    let target = dir.join("big.txt");
    let old = big_content(400_000);
    let policy = insert_policy(tmp.path(), "p.cf", &target, "the end");
    let wd = tmp.path().join("wd");
    let agent_in = |wd: &Path| {
        run(Command::new(agent_bin())
            .args(["-K", "-I", "-w"])
            .arg(wd)
            .arg("-f")
            .arg(&policy))
    };
    // What an undisturbed run leaves in the directory.
    std::fs::write(&target, &old).unwrap();
    let out = agent_in(&wd);
    assert!(
        std::fs::read_to_string(&target).is_ok_and(|c| c.ends_with("the end\n")),
        "the undisturbed run did not edit: {out:?}"
    );
    let baseline: HashSet<String> = entries(&dir).into_iter().collect();
    let extra = || -> Vec<String> {
        entries(&dir)
            .into_iter()
            .filter(|e| !baseline.contains(e))
            .collect()
    };
    // Kill runs while they write: each is killed as soon as something new
    // shows in the directory, or when it ends. (Writing to a file without a
    // name, the agent leaves nothing when killed; an agent that names its
    // temporary file leaves it.)
    let mut left = Vec::new();
    for _ in 0..20 {
        std::fs::write(&target, &old).unwrap();
        let mut child = Command::new(agent_bin())
            .args(["-K", "-w"])
            .arg(&wd)
            .arg("-f")
            .arg(&policy)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while extra().is_empty()
            && start.elapsed() < Duration::from_secs(20)
            && child.try_wait().unwrap().is_none()
        {
            std::thread::sleep(Duration::from_micros(200));
        }
        // SIGKILL: no handler, no clean-up.
        let _ = child.kill();
        let _ = child.wait();
        left.extend(extra());
    }
    // The next run has the edit to make again, in that directory.
    std::fs::write(&target, &old).unwrap();
    let out = agent_in(&wd);
    assert!(
        std::fs::read_to_string(&target).is_ok_and(|c| c.ends_with("the end\n")),
        "the next run did not edit: {out:?}"
    );
    let still = extra();
    assert!(
        still.is_empty(),
        "the killed run left {left:?}; after the next run these remain: {still:?}\n{out:?}"
    );
}

/// Finding 7 (low), second half: two agents on different work directories
/// editing one file at once: one edit was silently lost (each read, edited
/// and renamed its copy over the other's). An edit must notice that the
/// file changed since it was read; it may fail the promise (the next run
/// converges), but an agent whose line is missing must not report success.
#[test]
fn concurrent_edits_of_one_file_are_never_silently_lost() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("shared.txt");
    let base = big_content(200_000);
    let pa = insert_policy(tmp.path(), "a.cf", &target, "from agent a");
    let pb = insert_policy(tmp.path(), "b.cf", &target, "from agent b");
    let (wa, wb) = (tmp.path().join("wa"), tmp.path().join("wb"));
    let spawn = |wd: &Path, p: &Path| {
        Command::new(agent_bin())
            .args(["-K", "-I", "--detailed-exitcodes", "-w"])
            .arg(wd)
            .arg("-f")
            .arg(p)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut problems = Vec::new();
    for round in 0..10 {
        std::fs::write(&target, &base).unwrap();
        let (ca, cb) = (spawn(&wa, &pa), spawn(&wb, &pb));
        let (oa, ob) = (
            ca.wait_with_output().unwrap(),
            cb.wait_with_output().unwrap(),
        );
        let now = std::fs::read_to_string(&target).unwrap();
        for (who, out) in [("a", &oa), ("b", &ob)] {
            let line = format!("from agent {who}\n");
            // 0 (kept) or 2 (repaired): the agent says all is well.
            let said_ok = matches!(out.status.code(), Some(0 | 2));
            if !now.contains(&line) && said_ok {
                problems.push(format!(
                    "round {round}: agent {who}'s edit is lost, and it exited {:?}: {}",
                    out.status.code(),
                    String::from_utf8_lossy(&out.stdout)
                ));
            }
        }
    }
    // The next runs converge.
    agent(&wa, &pa);
    agent(&wb, &pb);
    let now = std::fs::read_to_string(&target).unwrap();
    assert!(
        now.contains("from agent a\n") && now.contains("from agent b\n"),
        "the next runs did not converge"
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
