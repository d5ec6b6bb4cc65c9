#!/usr/bin/env python3
"""Differential harness for the MPF's standard library (issue 29).

Lists every bundle and body of a library (by default the MPF's,
/var/lib/cfengine3/masterfiles/lib) with our own parser (`agent -p json`),
then runs each case of tests/stdlib/cases/*.cf twice under cf-agent with the
MPF's library and twice under our agent (with the same library, or with
`--ours-lib` our policies/lib), and compares what each run left: the `R:`
lines, the classes promises defined, whether errors were logged, and the
files of the case's tree (content and mode).

Both agents see the same paths: a case's tree lives in one directory that is
built afresh before each agent's runs, and each agent has its own work
directory (-w), so class names made from paths are the same on both sides.
cf-agent only runs a policy cf-promises accepts.

A case file is a policy with a header of `#` comment lines:

    # covers: m mog perms:og      names exercised (TYPE:NAME when two
                                   kinds share a name)
    # inputs: vcs.cf               more library files than stdlib.cf
    # stdlib: files.cf             the library files to load in place of
                                   stdlib.cf (a case about one file's
                                   names loads that file alone, so that
                                   --ours-lib checks it file by file)
    # file: etc/conf 0644          a file of the initial tree, its content
    # | line one                   in the `# |` lines that follow
    # dir: pub 1777                a directory of the initial tree
    # old: etc/conf                made ten days old before the runs
    # runs: 1                      one run instead of two
    # timeout: 300                 seconds each run may take (120 unless
                                   told: cf-agent's apt-get is slow)
    # bin: psql vacuumdb           commands put in each agent's WORKDIR/bin
                                   ($(sys.bindir)), each a script that
                                   appends its arguments to the tree's
                                   file bin.log and exits 0: a stand-in
                                   for a program the host lacks
    # vars: REGEX                  also compare the variables matching
                                   REGEX at the end of the run (lists as
                                   sets: the order of getindices is
                                   another matter)
    # fstab: observe               the case's mount promises edit the host's
                                   /etc/fstab: its lines naming the tree
                                   are compared after each run, and the
                                   file is put back as it was (and what
                                   was mounted under the tree unmounted)
                                   after each agent's runs
    # host-dir: DIR                a directory outside the tree that the
                                   library's bundle writes to (cronjob's
                                   crontab directory): made empty before
                                   each agent's runs and removed after
                                   them, its files compared as the tree's;
                                   the case is refused if DIR exists
    # volatile: PATH ...           files of the tree whose content depends
                                   on the second of the run (a report with
                                   the time in it, rewritten, leaves a
                                   backup from run 1 or not): their names
                                   and modes are compared, not their content
    # known-difference: WHY        cf-agent's result is a bug of its own
                                   that we do not reproduce: the case is
                                   run, and a difference is reported as
                                   "differs on purpose", not a failure

`@ROOT@` in the policy is the tree, `@LIB@` the library directory. The
policy gets `body common control` (inputs: the library's stdlib.cf, or the
`stdlib:` files, and any `inputs:`; bundlesequence: main) unless it has its own.

Usage:
    stdlib_harness.py [--agent PATH] [--lib DIR] [--ours-lib [--mpf-file F.cf]... [--without F.cf]...]
                      [--case SUBSTR]...
                      [--table FILE] [--jobs N] [--names] [-v]

Exit status: 0 when every case agrees, 1 when one differs, 77 when cf-agent
or the library is missing (nothing compared).
"""

import argparse
import concurrent.futures
import difflib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MPF_LIB = Path("/var/lib/cfengine3/masterfiles/lib")
CASES = REPO / "tests" / "stdlib" / "cases"
SKIP = 77
RUN_TIMEOUT = 120
RANK = {"agree": 0, "differs on purpose": 1, "differ": 2, "rejected": 3}


def lib_names(agent, lib):
    """Every (kind, type, name) defined in lib/*.cf, by our parser, with
    the file that defines it."""
    names = {}
    for f in sorted(lib.glob("*.cf")):
        out = subprocess.run(
            [agent, "-p", "json", "-f", str(f)],
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )
        if out.returncode != 0:
            raise SystemExit(f"our parser rejected {f}:\n{out.stderr}")
        policy = json.loads(out.stdout)
        for kind, key in (("bundle", "bundles"), ("body", "bodies")):
            for b in policy.get(key, []):
                if Path(b.get("sourcePath", "")).resolve() != f.resolve():
                    continue
                typ = b.get("bundleType") or b.get("bodyType")
                names.setdefault((kind, typ, b["name"]), f.name)
    return names


class Case:
    def __init__(self, path):
        self.path = path
        self.name = path.stem
        self.covers = []
        self.inputs = []
        self.stdlib = ["stdlib.cf"]
        self.files = []  # (rel, mode, lines) or (rel, mode, None) for a dir
        self.old = []
        self.runs = 2
        self.known = None
        self.vars = None
        self.bins = []
        self.fstab = False
        self.timeout = RUN_TIMEOUT
        self.host_dir = None
        self.volatile = []
        text = path.read_text()
        body = []
        in_header = True
        for line in text.splitlines():
            if in_header and line.startswith("#"):
                self._header(line)
            else:
                in_header = False
                body.append(line)
        self.policy = "\n".join(body) + "\n"

    def _header(self, line):
        if line.startswith("# |"):
            if not self.files or self.files[-1][2] is None:
                raise SystemExit(f"{self.path}: '# |' line outside a file")
            self.files[-1][2].append(line[4:] if len(line) > 3 else "")
            return
        m = re.match(r"#\s*([\w-]+):\s*(.*)$", line)
        if not m:
            return
        key, value = m.group(1), m.group(2).strip()
        if key == "covers":
            self.covers += value.split()
        elif key == "inputs":
            self.inputs += value.split()
        elif key == "stdlib":
            self.stdlib = value.split()
        elif key in ("file", "dir"):
            parts = value.split()
            mode = int(parts[1], 8) if len(parts) > 1 else (0o644 if key == "file" else 0o755)
            self.files.append((parts[0], mode, [] if key == "file" else None))
        elif key == "old":
            self.old += value.split()
        elif key == "runs":
            self.runs = int(value)
        elif key == "timeout":
            self.timeout = int(value)
        elif key == "vars":
            self.vars = value
        elif key == "bin":
            self.bins += value.split()
        elif key == "known-difference":
            self.known = value
        elif key == "fstab":
            self.fstab = value == "observe"
        elif key == "volatile":
            self.volatile += value.split()
        elif key == "host-dir":
            self.host_dir = Path(value)

    def matches(self, names):
        """The library names this case covers."""
        out = []
        for c in self.covers:
            typ, _, name = c.rpartition(":")
            hits = [k for k in names if k[2] == name and (not typ or k[1] == typ)]
            if not hits:
                raise SystemExit(f"{self.path}: covers {c}, which the library lacks")
            out += hits
        return out


def build_tree(case, root):
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for rel, mode, lines in case.files:
        p = root / rel
        if lines is None:
            p.mkdir(parents=True, exist_ok=True)
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text("".join(l + "\n" for l in lines))
        os.chmod(p, mode)
    ten_days_ago = time.time() - 10 * 86400
    for rel in case.old:
        os.utime(root / rel, (ten_days_ago, ten_days_ago))


def tree_listing(root, volatile=()):
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for n in sorted(dirnames + filenames):
            p = Path(dirpath) / n
            # cf-agent's time-stamped backups (backup_timestamp) differ
            # by the second they were made.
            rel = TIMESTAMP.sub("_@TIME@", str(p.relative_to(root)))
            st = p.lstat()
            mode = oct(stat.S_IMODE(st.st_mode))
            if stat.S_ISLNK(st.st_mode):
                out.append(f"{rel} -> {os.readlink(p)}")
            elif stat.S_ISDIR(st.st_mode):
                out.append(f"{rel}/ {mode} {st.st_uid}:{st.st_gid}")
            else:
                try:
                    content = "<volatile>" if rel in volatile else p.read_text()
                except UnicodeDecodeError:
                    content = f"<{st.st_size} bytes>"
                # Log lines (log_repaired) start with the time of the run.
                content = ISO_DATE.sub("@DATE@", DATE.sub("@DATE@", content))
                out.append(f"{rel} {mode} {st.st_uid}:{st.st_gid}\n" + "".join(
                    f"  | {l}\n" for l in content.splitlines()
                ).rstrip("\n"))
    return "\n".join(out)


def write_policy(case, base, lib):
    root = base / "root"
    text = case.policy.replace("@ROOT@", str(root)).replace("@LIB@", str(lib))
    if not re.search(r"body\s+common\s+control", text):
        inputs = [str(lib / i) for i in case.stdlib + case.inputs]
        control = "body common control\n{\n  inputs => { %s };\n  bundlesequence => { \"main\" };\n}\n" % (
            ", ".join(f'"{i}"' for i in inputs)
        )
        text = control + text
    policy = base / f"{case.name}.cf"
    policy.write_text(text)
    return policy


# ctime's day of the month is padded with a space, canonified to "_".
TIMESTAMP = re.compile(r"_\d{9,11}_[A-Z][a-z]{2}_[A-Z][a-z]{2}__?\d{1,2}_\d\d_\d\d_\d\d_\d{4}")
DATE = re.compile(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d \d{4}")
ISO_DATE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d")
CLASS_LINE = re.compile(r"^(\S+)\s+(\S*source=promise\S*)")


VAR_LINE = re.compile(r"^(\S+:\S+)\s+(.*?)\s+(\S*source=\S*)?\s*$")


def variables(lines):
    out = []
    started = False
    for l in lines:
        if l.startswith("Variable name"):
            started = True
            continue
        m = started and VAR_LINE.match(l)
        if not m:
            continue
        value = m.group(2).strip()
        if value.startswith("{") and value.endswith("}"):
            try:
                v = json.loads("[" + value[1:-1] + "]")
                if all(isinstance(x, str) for x in v):
                    value = "{" + ",".join(sorted(v)) + "}"
            except ValueError:
                pass
        out.append(f"{m.group(1)} = {value}")
    return sorted(out)


def outcome(proc, root, wd, lib, volatile=()):
    """What one run left: R: lines, promise-defined classes, whether it
    logged errors, the tree. Each agent's work directory is @WORKDIR@, its
    library directory @LIB@ (with --ours-lib they are not the same)."""
    lines = (
        (proc.stdout + proc.stderr)
        .replace(str(wd), "@WORKDIR@")
        .replace(str(lib), "@LIB@")
        .splitlines()
    )
    reports = [l for l in lines if l.startswith("R: ")]
    errors = [l.strip() for l in lines if re.match(r"^\s*(\S+\s+)?error: ", l)]
    in_table = False
    classes = []
    for l in lines:
        if l.startswith("Class name"):
            in_table = True
        elif l.startswith("Variable name"):
            in_table = False
        elif in_table and (m := CLASS_LINE.match(l)):
            classes.append(m.group(1))
    classes.sort()
    return {
        "reports": reports,
        "classes": classes,
        "errors": bool(errors),
        "error_lines": errors,
        "tree": tree_listing(root, volatile),
        "vars": variables(lines),
    }


def fake_bins(case, root, wd):
    """The case's stand-in commands in WORKDIR/bin."""
    (wd / "bin").mkdir(parents=True, exist_ok=True)
    for name in case.bins:
        f = wd / "bin" / name
        f.write_text(f'#!/bin/sh\necho "{name} $*" >> "{root}/bin.log"\nexit 0\n')
        os.chmod(f, 0o755)


FSTAB = Path("/etc/fstab")


def fstab_lines(root):
    """The lines of /etc/fstab that name the case's tree."""
    try:
        text = FSTAB.read_text()
    except OSError:
        return []
    return [l for l in text.splitlines() if str(root) in l]


def restore_fstab(saved, root):
    """Unmounts what a case mounted under its tree and puts /etc/fstab back."""
    mounted = [l.split()[1] for l in Path("/proc/mounts").read_text().splitlines()
               if len(l.split()) > 1 and l.split()[1].startswith(str(root))]
    for m in mounted:
        subprocess.run(["umount", "-l", m], capture_output=True)
    if saved is not None and FSTAB.read_text() != saved:
        FSTAB.write_text(saved)


def run_side(cmd, case, base, lib, wd, env=None):
    build_tree(case, base / "root")
    fake_bins(case, base / "root", wd)
    policy = write_policy(case, base, lib)
    saved = FSTAB.read_text() if case.fstab and FSTAB.exists() else None
    if case.host_dir:
        if case.host_dir.exists():
            raise SystemExit(f"{case.path}: {case.host_dir} exists: the case would change the host")
        made = case.host_dir
        while not made.parent.exists():
            made = made.parent
        case.host_dir.mkdir(parents=True)
    try:
        return run_side_runs(cmd, case, base, lib, wd, policy, env)
    finally:
        if case.fstab:
            restore_fstab(saved, base / "root")
        if case.host_dir:
            shutil.rmtree(made, ignore_errors=True)


def run_side_runs(cmd, case, base, lib, wd, policy, env):
    results = []
    for _ in range(case.runs):
        extra = [f"--show-evaluated-vars={case.vars}"] if case.vars else []
        proc = subprocess.run(
            cmd + ["-K", "-w", str(wd), "-f", str(policy), "--show-evaluated-classes"] + extra,
            capture_output=True,
            text=True,
            timeout=case.timeout,
            cwd=base,
            env=env,
        )
        results.append(outcome(proc, base / "root", wd, lib, case.volatile))
        results[-1]["fstab"] = fstab_lines(base / "root") if case.fstab else []
        if case.host_dir:
            results[-1]["tree"] += "\n" + tree_listing(case.host_dir)
    return results


def compare(a, b):
    diffs = []
    for n, (x, y) in enumerate(zip(a, b), 1):
        for key in ("reports", "classes", "errors", "tree", "vars", "fstab"):
            if x[key] != y[key]:
                diffs.append((n, key, x[key], y[key]))
    return diffs


def run_case(case, agent, mpf, ours_lib, keep):
    base = Path(tempfile.mkdtemp(prefix=f"stdlib-{case.name}-"))
    try:
        # cf-agent first, only on a policy cf-promises accepts.
        build_tree(case, base / "root")
        cf_policy = write_policy(case, base, mpf)
        check = subprocess.run(
            ["cf-promises", "-f", str(cf_policy)],
            capture_output=True, text=True, timeout=RUN_TIMEOUT,
        )
        if check.returncode != 0:
            return case, "rejected", check.stdout + check.stderr
        cf_wd = base / "cfwd"
        (cf_wd / "bin").mkdir(parents=True)
        os.symlink(shutil.which("cf-promises") or "/usr/bin/cf-promises", cf_wd / "bin" / "cf-promises")
        theirs = run_side(["cf-agent"], case, base, mpf, cf_wd)
        ours = run_side([agent], case, base, ours_lib or mpf, base / "ourwd")
        diffs = compare(theirs, ours)
        if not diffs:
            return case, "agree", ""
        verdict = "differs on purpose" if case.known else "differ"
        text = []
        for n, key, t, o in diffs:
            if key == "errors":
                text.append(
                    f"run {n}: errors: cf-agent {t}, ours {o}\n  cf-agent: "
                    + "\n  cf-agent: ".join(theirs[n - 1]["error_lines"])
                    + "\n  ours: " + "\n  ours: ".join(ours[n - 1]["error_lines"])
                )
            elif key == "tree":
                diff = difflib.unified_diff(
                    t.splitlines(), o.splitlines(), "cf-agent", "ours", lineterm="", n=2
                )
                text.append(f"run {n}: tree\n" + "\n".join(diff))
            else:
                only_t = [x for x in t if x not in o]
                only_o = [x for x in o if x not in t]
                text.append(f"run {n}: {key}: only cf-agent {only_t}, only ours {only_o}")
        if case.known:
            text.insert(0, f"known: {case.known}")
        return case, verdict, "\n".join(text)
    finally:
        if not keep:
            shutil.rmtree(base, ignore_errors=True)


def write_table(path, names, status, ours=None):
    """The status table. With `ours` (our library's names, --ours-lib), a
    name our library lacks, or keeps in another file than the MPF, says so
    whatever its case did."""
    counts = {}
    rows = []
    for key in sorted(names, key=lambda k: (names[k], k[2], k[1])):
        st, case = status.get(key, ("not exercised", ""))
        # Control bodies are each file's own plumbing, not names.
        mine = ours is not None and key[2] != "control"
        if mine and key not in ours:
            st = "missing from ours"
        elif mine and ours[key] != names[key]:
            st = f"in our {ours[key]}"
        counts[st] = counts.get(st, 0) + 1
        rows.append(f"| {names[key]} | {key[0]} {key[1]} | `{key[2]}` | {st} | {case} |")
    summary = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    if ours is None:
        head = (
            "# The MPF 3.21 library under our agent\n\n"
            "Generated by `scripts/stdlib_harness.py --table`: each bundle and body of\n"
            "the MPF's `lib/`, the case of `tests/stdlib/cases/` that exercises it, and\n"
            "whether our agent did what cf-agent 3.21 did with it (reports, classes,\n"
            "errors, files, over two runs).\n\n"
        )
    else:
        head = (
            "# Our policies/lib beside the MPF 3.21 library\n\n"
            "Generated by `scripts/stdlib_harness.py --ours-lib --table`: each bundle\n"
            "and body of the MPF's `lib/`, whether our `policies/lib/` has it in the\n"
            "same file, the case of `tests/stdlib/cases/` that exercises it, and\n"
            "whether our agent with our library did what cf-agent 3.21 did with the\n"
            "MPF's (reports, classes, errors, files, over two runs).\n\n"
        )
    path.write_text(
        head
        + f"{len(names)} names: {summary}.\n\n"
        "| File | Kind | Name | Status | Case |\n|---|---|---|---|---|\n"
        + "\n".join(rows) + "\n"
    )
    return summary


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agent", default=str(REPO / "target" / "release" / "agent"))
    ap.add_argument("--lib", default=str(MPF_LIB), help="the MPF's lib directory")
    ap.add_argument("--ours-lib", action="store_true",
                    help="run our agent with our policies/lib instead of the MPF's")
    ap.add_argument("--mpf-file", action="append", default=[],
                    help="with --ours-lib, take this file of the MPF's lib instead of ours "
                         "(e.g. one of ours not written yet)")
    ap.add_argument("--without", action="append", default=[],
                    help="with --mpf-file, leave this file of ours out")
    ap.add_argument("--case", action="append", default=[], help="only cases whose name contains this")
    ap.add_argument("--table", help="write the status table (markdown) here")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--names", action="store_true", help="list the library's names and stop")
    ap.add_argument("--keep", action="store_true", help="keep the temporary directories")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    lib = Path(args.lib)
    if not (lib / "stdlib.cf").is_file():
        print(f"skipped: no library at {lib}")
        return SKIP
    args.agent = str(Path(args.agent).resolve())
    if not Path(args.agent).is_file():
        raise SystemExit(f"no agent at {args.agent} (cargo build --release)")
    names = lib_names(args.agent, lib)
    if args.names:
        for key in sorted(names, key=lambda k: (names[k], k)):
            print(f"{names[key]}\t{key[0]} {key[1]} {key[2]}")
        print(f"{len(names)} names")
        return 0
    if not shutil.which("cf-agent") or not shutil.which("cf-promises"):
        print("skipped: cf-agent or cf-promises is not installed")
        return SKIP

    # Commits made by the vcs bundles get the same time on both sides.
    os.environ["GIT_AUTHOR_DATE"] = os.environ["GIT_COMMITTER_DATE"] = "2000-01-01T00:00:00Z"
    cases = [Case(p) for p in sorted(CASES.glob("*.cf"))]
    if args.case:
        cases = [c for c in cases if any(s in c.name for s in args.case)]
    ours_lib = (REPO / "policies" / "lib") if args.ours_lib else None
    mixed = None
    if ours_lib and args.mpf_file:
        # A copy of our library with some of the MPF's files in it.
        mixed = Path(tempfile.mkdtemp(prefix="stdlib-mixed-lib-"))
        shutil.copytree(ours_lib, mixed / "lib")
        for f in args.mpf_file:
            shutil.copy(lib / f, mixed / "lib" / f)
        for f in args.without:
            (mixed / "lib" / f).unlink()
        ours_lib = mixed / "lib"
    status = {}
    failed = 0
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_case, c, args.agent, lib, ours_lib, args.keep) for c in cases]
        for fut in concurrent.futures.as_completed(futures):
            case, verdict, detail = fut.result()
            print(f"{verdict:8} {case.name}", flush=True)
            if verdict != "agree":
                failed += verdict != "differs on purpose"
                if args.verbose or verdict != "differs on purpose":
                    print("  " + detail.replace("\n", "\n  "), flush=True)
            for key in case.matches(names):
                prev = status.get(key)
                # A name is as good as the worst case that uses it.
                if prev is None or RANK[verdict] > RANK[prev[0]]:
                    status[key] = (verdict, case.name)
    print(f"{len(cases) - failed} of {len(cases)} cases agree or differ on purpose; "
          f"{sum(1 for v in status.values() if v[0] == 'agree')} of {len(names)} names agree")
    if args.table:
        ours = lib_names(args.agent, ours_lib) if ours_lib else None
        print(write_table(Path(args.table), names, status, ours))
    if mixed:
        shutil.rmtree(mixed, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
