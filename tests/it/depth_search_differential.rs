//! How far a `depth_search` goes, compared with cf-agent 3.21 when it is
//! installed ("skipped" without it): the base's entries for a depth of 0
//! or 1, and d + 2 levels down for a depth d of 2 or more, as cf-agent's
//! DepthSearch goes (its recursion level starts at 0 and is compared with
//! `<=`); a base written `DIR/.` alike. ncf's permissions methods count on
//! it. What is compared is the tree each agent leaves (modes of files and
//! directories at every level); the order of the `-I` lines differs
//! (cf-agent reports a directory after what it holds, in readdir order).

use crate::common::*;
use std::path::Path;

const POLICY: &str = r#"
bundle agent main
{
  vars:
      "root" string => getenv("DEPTH_ROOT", 4096);
  files:
      "$(root)/d0" perms => m, depth_search => ds("0");
      "$(root)/d1" perms => m, depth_search => ds("1");
      "$(root)/d2" perms => m, depth_search => ds("2");
      "$(root)/d3" perms => m, depth_search => ds("3");
      "$(root)/d3dot/." perms => m, depth_search => ds("3");
      "$(root)/dinf" perms => m, depth_search => ds("inf");
}
body perms m { mode => "o-r"; rxdirs => "false"; }
body depth_search ds(d) { depth => "$(d)"; }
"#;

/// Trees `d0` ... `dinf`, each a chain of directories 1/2/.../7 with a
/// file `f` at every level.
fn make_tree(root: &Path) {
    for top in ["d0", "d1", "d2", "d3", "d3dot", "dinf"] {
        let mut dir = root.join(top);
        for level in 0..=7 {
            if level > 0 {
                dir = dir.join(level.to_string());
            }
            std::fs::create_dir_all(&dir).expect("mkdir");
            std::fs::write(dir.join("f"), "x\n").expect("write");
        }
    }
    let _ = std::process::Command::new("chmod")
        .args(["-R", "u=rwX,go=rX"])
        .arg(root)
        .status();
}

#[test]
fn depth_search_reaches_as_far_as_in_cf_agent() {
    if !have("cf-agent") {
        println!("skipped: cf-agent not installed");
        return;
    }
    let tmp = tempfile::tempdir().expect("tmp");
    let policy = write_policy(tmp.path(), POLICY);
    let ours_root = tmp.path().join("ours-tree");
    let theirs_root = tmp.path().join("theirs-tree");
    make_tree(&ours_root);
    make_tree(&theirs_root);
    let ours = run(std::process::Command::new(agent_bin())
        .args(["-K", "-w"])
        .arg(tmp.path().join("ours-wd"))
        .arg("-f")
        .arg(&policy)
        .env("DEPTH_ROOT", &ours_root));
    assert_eq!(ours.code, Some(0), "{ours:?}");
    let theirs = run(std::process::Command::new("cf-agent")
        .args(["-K", "-w"])
        .arg(cf_workdir(tmp.path()))
        .arg("-f")
        .arg(&policy)
        .env("DEPTH_ROOT", &theirs_root));
    assert_eq!(theirs.code, Some(0), "{theirs:?}");
    let theirs_tree = tree_listing(&theirs_root, false);
    // The comparison means something: cf-agent went past depth 3.
    assert!(
        theirs_tree.contains("dir 0751 0:0 d3/1/2/3/4/5\n"),
        "{theirs_tree}"
    );
    assert_eq!(tree_listing(&ours_root, false), theirs_tree);
}
