//! Names the commit the agent was built from, for `--version` and the run
//! events: `CONVERGENT_COMMIT` when the builder sets it (a distribution
//! building from a tarball knows its commit), else what git says of the
//! checkout, else "unknown" (a tarball without .git still builds). No date
//! or path goes in, so two builds of one commit print the same line.

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=CONVERGENT_COMMIT");
    let commit = std::env::var("CONVERGENT_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
        .map(|c| c.trim().to_string())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".to_string());
    println!("cargo:rustc-env=CONVERGENT_COMMIT={commit}");
    // Relative relocations packed (DT_RELR, glibc 2.36+): the loader of a
    // position-independent agent otherwise reads ~0.6 MB of them at every
    // start, and that much of the file stays in its memory. A linker that
    // does not know the option ignores it with a warning; GNU ld leaves
    // it out when the C library cannot load it.
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
        static_unwinder();
    }
    refused_table();
    // The functions a check and a short run execute, placed side by side
    // (scripts/startup-symbols.py makes the list): the kernel maps 64 KB
    // around each page the agent touches, so scattered functions put most
    // of the 10 MB of text in its memory. Only LLD reads the list; names it
    // does not find (renamed since) are passed over.
    println!("cargo:rerun-if-changed=scripts/startup-symbols.txt");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    let list = std::path::Path::new(&std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default())
        .join("scripts/startup-symbols.txt");
    if links_with_rust_lld() && list.exists() {
        println!(
            "cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={}",
            list.display()
        );
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

/// Links GCC's unwinder (libgcc_eh.a) into the agent, so that it does not
/// load libgcc_s.so.1 at every start: the loader's symbol searches grow
/// with each library, and libgcc_s's constructor asks the CPU for its
/// features (cpuid, which traps in a virtual machine). Panics unwind the
/// same (they are still caught in main). Left out when the C compiler does
/// not know the archive, or when the C library is static (Rust links the
/// unwinder statically then).
fn static_unwinder() {
    println!("cargo:rerun-if-env-changed=CC");
    let features = std::env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    if features.split(',').any(|f| f == "crt-static") {
        return;
    }
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let Ok(out) = Command::new(cc)
        .arg("-print-file-name=libgcc_eh.a")
        .output()
    else {
        return;
    };
    let path = String::from_utf8_lossy(&out.stdout).trim().to_string();
    // Not found, the compiler prints the bare name back.
    if !out.status.success() || !std::path::Path::new(&path).is_absolute() {
        return;
    }
    // Whole, because libgcc_s (which Rust names first) would otherwise
    // answer the unwinder's symbols and the archive would add nothing;
    // once the agent defines them, --as-needed drops libgcc_s.
    println!("cargo:rustc-link-arg-bins=-Wl,--push-state,--whole-archive");
    println!("cargo:rustc-link-arg-bins={path}");
    println!("cargo:rustc-link-arg-bins=-Wl,--pop-state");
}

/// The rows of src/schema/support.tsv marked `refused`, as a sorted Rust
/// slice `(is a body's, type, attribute, why)` in `$OUT_DIR/refused.rs`:
/// every check asks for them, and finding them in the 67 KB table at each
/// start cost 7% of an empty policy's check. A malformed row is left for
/// the table's own test to name.
fn refused_table() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_default();
    let tsv = std::path::Path::new(&dir).join("src/schema/support.tsv");
    println!("cargo:rerun-if-changed={}", tsv.display());
    let text = std::fs::read_to_string(&tsv).expect("src/schema/support.tsv reads");
    let mut rows: Vec<(bool, &str, &str, &str)> = text
        .lines()
        .filter_map(|line| {
            let cols: Vec<&str> = line.split('\t').collect();
            let [owner, attr, "refused", why] = cols[..] else {
                return None;
            };
            let (kind, name) = owner.split_once(':')?;
            Some((kind == "body", name, attr, why))
        })
        .collect();
    // Of a row given twice, the last one counts, as in the whole table
    // (the sort is stable).
    rows.sort_by(|a, b| (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2)));
    rows.reverse();
    rows.dedup_by(|a, b| (a.0, a.1, a.2) == (b.0, b.1, b.2));
    rows.reverse();
    let mut out = String::from("&[\n");
    for row in rows {
        out.push_str(&format!("    {row:?},\n"));
    }
    out.push_str("]\n");
    let dest = std::path::Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("refused.rs");
    std::fs::write(dest, out).expect("refused.rs is written");
}

/// Whether rustc links the binaries with its own LLD: its default on
/// x86_64 Linux (GNU) since 1.90, unless the build names another linker.
fn links_with_rust_lld() -> bool {
    let target = std::env::var("TARGET").unwrap_or_default();
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    if target != "x86_64-unknown-linux-gnu"
        || std::env::var_os("RUSTC_LINKER").is_some()
        || flags.contains("linker")
    {
        return false;
    }
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_string());
    let Ok(out) = Command::new(rustc).arg("-vV").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(release) = text.lines().find_map(|l| l.strip_prefix("release: ")) else {
        return false;
    };
    let mut parts = release
        .split(['.', '-'])
        .map(|p| p.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (1, 90)
}

/// The checkout's commit, abbreviated to 12 digits; watched so that a new
/// commit rebuilds the line.
fn git_commit() -> Option<String> {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_string())
    };
    // A worktree's HEAD lives in its own git dir; refs in the common one.
    // A tarball unpacked inside some other checkout is not that
    // checkout's commit.
    let top = git(&["rev-parse", "--show-toplevel"])?;
    let here = std::env::var("CARGO_MANIFEST_DIR").ok()?;
    let same = |a: &str, b: &str| {
        std::path::Path::new(a).canonicalize().ok() == std::path::Path::new(b).canonicalize().ok()
    };
    if !same(&top, &here) {
        return None;
    }
    // Only files that exist are watched: cargo reruns for a missing one
    // every time.
    let watch = |p: Option<String>| {
        if let Some(p) = p.filter(|p| std::path::Path::new(p).exists()) {
            println!("cargo:rerun-if-changed={p}");
        }
    };
    watch(git(&["rev-parse", "--git-path", "HEAD"]));
    watch(git(&["rev-parse", "--git-path", "packed-refs"]));
    if let Some(name) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch(git(&["rev-parse", "--git-path", &name]));
    }
    git(&["rev-parse", "--short=12", "HEAD"]).filter(|c| !c.is_empty())
}
