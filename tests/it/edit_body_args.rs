//! A body argument that names `$(match.N)` (the MPF's `value(...)`-style
//! replace_with bodies) is passed on as text and bound per match, as
//! cf-agent does; checked against `cf-agent -K` when it is installed.

use crate::common::*;
use std::process::Command;

const POLICY: &str = r#"
body replace_with value_of(v) { replace_value => "$(v)"; occurrences => "all"; }
body edit_defaults nobackup { edit_backup => "false"; }
bundle agent main { files: "FILE" edit_line => e, edit_defaults => nobackup; }
bundle edit_line e {
  replace_patterns:
    "^(key_[0-9]+) = old_value$" replace_with => value_of("$(match.1) = new_value");
}
"#;

const BEFORE: &str = "key_1 = old_value\nkey_2 = other\nkey_3 = old_value\n";
const AFTER: &str = "key_1 = new_value\nkey_2 = other\nkey_3 = new_value\n";

fn converge(agent: &dyn Fn() -> Command, dir: &std::path::Path, wd: &std::path::Path) -> String {
    let file = dir.join("f.conf");
    std::fs::write(&file, BEFORE).unwrap();
    let policy = dir.join("p.cf");
    std::fs::write(&policy, POLICY.replace("FILE", &file.display().to_string())).unwrap();
    for _ in 0..2 {
        let out = run(agent().arg("-K").arg("-w").arg(wd).arg("-f").arg(&policy));
        assert_eq!(out.code, Some(0), "{out:?}");
    }
    std::fs::read_to_string(&file).unwrap()
}

#[test]
fn match_references_in_body_arguments_bind_per_match() {
    let dir = tempfile::tempdir().unwrap();
    let ours = converge(
        &|| Command::new(agent_bin()),
        dir.path(),
        &dir.path().join("wd"),
    );
    assert_eq!(ours, AFTER);
    if have("cf-agent") {
        let wd = cf_workdir(dir.path());
        let reference = converge(&|| Command::new("cf-agent"), dir.path(), &wd);
        assert_eq!(ours, reference);
    } else {
        eprintln!("skipped the cf-agent comparison: cf-agent is not installed");
    }
}

/// Files are bytes (issue 15): an edit changes only the bytes its promises
/// change. A Latin-1 byte in a line no promise touches, and one in a line a
/// regex rewrites, both come back as they were (they became U+FFFD before).
#[test]
fn an_edit_keeps_every_byte_it_does_not_change() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("f.conf");
    std::fs::write(&file, b"name=caf\xe9\nkey_1 = old_value \xff\n\xfe\xfe\n").unwrap();
    let policy = write_policy(
        dir.path(),
        &format!(
            r#"body edit_defaults nobackup {{ edit_backup => "false"; }}
bundle agent main {{ files: "{}" edit_line => e, edit_defaults => nobackup; }}
bundle edit_line e {{
  replace_patterns:
    "^key_1 = old_value (.)$" replace_with => v;
  insert_lines:
    "added";
}}
body replace_with v {{ replace_value => "key_1 = new_value $(match.1)"; }}
"#,
            file.display()
        ),
    );
    let out = run(Command::new(agent_bin())
        .arg("-K")
        .arg("-w")
        .arg(dir.path().join("wd"))
        .arg("-f")
        .arg(&policy));
    assert_eq!(out.code, Some(0), "{out:?}");
    assert_eq!(
        std::fs::read(&file).unwrap(),
        b"name=caf\xe9\nkey_1 = new_value \xff\n\xfe\xfe\nadded\n",
        "{out:?}"
    );
}
