#!/usr/bin/env python3
"""Run Rudder's ncf framework tests under our agent, and under cf-agent 3.21 to compare.

    NCF_DIR=/path/to/ncf scripts/ncf.py [--agent BIN] [--no-compare] [--check-only] [TEST ...]

ncf (github.com/Normation/ncf, GPL-3) is not part of this project and is never copied into it:
NCF_DIR (or --ncf-dir) names a checkout, best at PINNED below (another commit is run, with a
warning). Without one the script prints "ncf: skipped" and exits 0.

The tests are those ncf's own tests/acceptance/testall runs by default: what its
list-compatible-inputs script selects for agent version 3.21, without the unsafe, staging,
network and non_container ones (nor those needing python's testinfra when it is missing).

Two stages, for each test:
  1. the check: `cf-promises -c -f TEST` by ours (and by cf-promises when installed) must accept
     every test file, as cf-promises 3.21 accepts all of them;
  2. the run, as testall runs it: a fresh work directory WORKDIR with bin/ (cf-agent and
     cf-promises), tmp/ and inputs/, the environment CFENGINE_TEST_OVERRIDE_WORKDIR=WORKDIR,
     TEMP=WORKDIR/tmp, NCF_TREE and NCF_TESTS_ACCEPTANCE, and the command
     `cf-agent -Kf TEST -D AUTO,DEBUG`. A test passes when the agent exits 0 and prints
     `R: ... TEST Pass` (or `default.cf.sub Pass`); a test named *.x.cf passes when the agent
     fails. The real cf-agent is run only on a test its cf-promises accepted.

With cf-agent installed (and unless --no-compare) each test runs under both, one after the
other, and the sets of passing tests must be equal, but for the differences in KNOWN (each a
cf-agent bug we do not reproduce, documented in README), which are reported as such. The exit status is 1 when a test does not
load, or when the sets differ (or, without cf-agent, when a test fails under ours); 0 otherwise.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
# The ncf commit these results are for (branches/rudder/8.3).
PINNED = "007b5cc7"
CATEGORIES = ["10_ncf_internals", "20_cfe_basics", "30_generic_methods"]
SKIPPED_DIRS = ("/unsafe/", "/staging/", "/network/", "/non_container/")
TIMEOUT = 120
# Tests whose verdicts differ on purpose, each with the verdict ours gives and why (README,
# "Where we differ from CFEngine on purpose"). They are reported, never counted as differences.
KNOWN = {
    "./30_generic_methods/variable_string_from_command.cf": (
        True, "cf-agent 3.21.0's function cache (CFE-4244, fixed in 3.21.3) keys a result by its "
        "arguments alone and compares argument lists up to the shorter one's end, so "
        "execresult_as_data gets the text an execresult of the same command returned; a bug "
        "we do not reproduce"),
}


def say(*a):
    print("ncf:", *a, flush=True)


def head_commit(ncf):
    try:
        return subprocess.run(["git", "-C", ncf, "rev-parse", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def have_testinfra():
    try:
        return subprocess.run(["python", "-c", "import testinfra"], capture_output=True).returncode == 0
    except OSError:
        return False


def select_tests(acc, tree, named):
    if named:
        return [t if t.startswith(("./", "/")) else "./" + t for t in named]
    out = subprocess.run(
        ["sh", os.path.join(tree, "10_ncf_internals", "list-compatible-inputs"),
         "--capability-file", "/opt/rudder/etc/agent-capabilities", "--agent-version", "3.21",
         "--ncf-path", acc, "."],
        cwd=acc, capture_output=True, text=True, check=True).stdout
    infra = have_testinfra()
    tests = []
    for t in sorted(set(out.split())):
        if not t.endswith(".cf") or any(d in t for d in SKIPPED_DIRS):
            continue
        if not t.split("/")[1] in CATEGORIES:
            continue
        with open(os.path.join(acc, t), errors="replace") as f:
            if "testinfra" in f.read() and not infra:
                continue
        tests.append(t)
    return tests


def env_for(acc, tree, workdir=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("CFENGINE_")}
    env.update(NCF_TREE=tree, NCF_TESTS_ACCEPTANCE=acc)
    if workdir:
        env.update(CFENGINE_TEST_OVERRIDE_WORKDIR=workdir, TEMP=os.path.join(workdir, "tmp"))
    return env


# Seconds each agent spent in each stage, for the timing line at the end: ncf is a
# generic-method library as real policies use one (every test loads the whole tree).
SPENT = {}


def timed_run(key, cmd, cwd, env):
    start = time.perf_counter()
    out = run(cmd, cwd, env)
    SPENT[key] = SPENT.get(key, 0.0) + time.perf_counter() - start
    return out


def run(cmd, cwd, env):
    try:
        p = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=TIMEOUT)
        return p.returncode, p.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired as e:
        return None, (e.stdout or b"").decode("utf-8", "replace") + "\n(timed out)"


class Agent:
    """One agent: the binary run as cf-agent and the one run as cf-promises."""

    def __init__(self, name, agent, promises):
        self.name, self.agent, self.promises = name, agent, promises

    def check(self, acc, tree, test, scratch):
        rc, out = timed_run((self.name, "check"),
                            [self.promises, "-w", os.path.join(scratch, "check"), "-c", "-f",
                             test], acc, env_for(acc, tree))
        return rc == 0, out

    def run_test(self, acc, tree, test, scratch):
        flat = re.sub(r"[./]", "_", test)
        workdir = os.path.join(scratch, self.name, flat)
        shutil.rmtree(workdir, ignore_errors=True)
        for d in ("bin", "tmp", "inputs"):
            os.makedirs(os.path.join(workdir, d))
        os.chmod(os.path.join(workdir, "tmp"), 0o1777)
        os.symlink(self.agent, os.path.join(workdir, "bin", "cf-agent"))
        os.symlink(self.promises, os.path.join(workdir, "bin", "cf-promises"))
        with open(os.path.join(workdir, "inputs", "ignore_interfaces.rx"), "w") as f:
            f.write(".*\n")
        rc, out = timed_run((self.name, "run"),
                            [os.path.join(workdir, "bin", "cf-agent"), "-Kf", test, "-D",
                             "AUTO,DEBUG"], acc, env_for(acc, tree, workdir))
        if test.endswith(".x.cf"):
            passed = rc not in (0, None)
        else:
            escaped = "(%s|default\\.cf\\.sub)" % re.escape(test)
            passed = rc == 0 and re.search(r"R: .*%s Pass" % escaped, out) is not None
        if passed:
            shutil.rmtree(workdir, ignore_errors=True)
        return passed, rc, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tests", nargs="*", help="tests, relative to the checkout's tests/acceptance")
    ap.add_argument("--ncf-dir", default=os.environ.get("NCF_DIR"), help="the ncf checkout "
                    "(default: $NCF_DIR)")
    ap.add_argument("--agent", default=os.path.join(ROOT, "target", "release", "agent"),
                    help="our binary (default: target/release/agent)")
    ap.add_argument("--no-compare", action="store_true", help="do not run cf-agent")
    ap.add_argument("--check-only", action="store_true", help="only the cf-promises -c stage")
    ap.add_argument("--out", help="directory for the logs of tests that differ or fail "
                    "(default: a temporary one, removed)")
    args = ap.parse_args()

    if not args.ncf_dir:
        say("skipped (NCF_DIR names no ncf checkout)")
        return 0
    ncf = os.path.realpath(args.ncf_dir)
    acc = os.path.join(ncf, "tests", "acceptance")
    tree = os.path.join(ncf, "tree")
    if not os.path.isfile(os.path.join(acc, "default_ncf.cf.sub")):
        say("%s is not an ncf checkout (no tests/acceptance/default_ncf.cf.sub)" % ncf)
        return 2
    head = head_commit(ncf)
    if head and not head.startswith(PINNED):
        say("warning: the checkout is at %s, these results are for %s" % (head[:8], PINNED))
    agent = os.path.realpath(args.agent)
    if not os.access(agent, os.X_OK):
        say("%s is not an executable (cargo build --release)" % agent)
        return 2

    bindir = tempfile.mkdtemp(prefix="convergent-ncf-")
    ours_promises = os.path.join(bindir, "cf-promises")
    os.symlink(agent, ours_promises)
    agents = [Agent("ours", agent, ours_promises)]
    real_agent, real_promises = shutil.which("cf-agent"), shutil.which("cf-promises")
    if real_promises:
        real_promises = os.path.realpath(real_promises)
    compare = not args.no_compare and real_agent and real_promises
    if compare:
        agents.append(Agent("cf-agent", os.path.realpath(real_agent), real_promises))
    elif not args.no_compare:
        say("cf-agent not installed: our results alone")
    logs = args.out or os.path.join(bindir, "logs")
    os.makedirs(logs, exist_ok=True)

    tests = select_tests(acc, tree, args.tests)
    say("%d tests from %s (%s)" % (len(tests), ncf, (head or "?")[:8]))
    not_loaded = {a.name: [] for a in agents}
    passed = {a.name: set() for a in agents}
    differ = []
    known = []

    def log(name, test, text):
        path = os.path.join(logs, name + "-" + re.sub(r"[./]", "_", test) + ".log")
        with open(path, "w") as f:
            f.write(text)
        return path

    checkers = [agents[0]] + ([Agent("cf-promises", None, real_promises)] if real_promises else [])
    for test in tests:
        loaded = {}
        for a in checkers:
            ok, out = a.check(acc, tree, test, bindir)
            loaded[a.name] = ok
            if not ok:
                not_loaded.setdefault(a.name, []).append(test)
                say("%s does not load %s: %s" % (a.name, test, log(a.name + "-check", test, out)))
        if args.check_only:
            continue
        outcome = {}
        for a in agents:
            # cf-agent on a policy its cf-promises rejects runs its failsafe policy instead.
            if a.name == "cf-agent" and not loaded.get("cf-promises", False):
                outcome[a.name] = False
                continue
            ok, rc, out = a.run_test(acc, tree, test, bindir)
            outcome[a.name] = ok
            if ok:
                passed[a.name].add(test)
            else:
                log(a.name, test, "exit %s\n%s" % (rc, out))
        if compare and outcome["ours"] != outcome["cf-agent"]:
            verdicts = "ours %s, cf-agent %s" % tuple(
                "Pass" if outcome[n] else "FAIL" for n in ("ours", "cf-agent"))
            if KNOWN.get(test, (None,))[0] == outcome["ours"]:
                known.append(test)
                say("%s: %s, a known, documented difference: %s" % (test, verdicts, KNOWN[test][1]))
            else:
                differ.append(test)
                say("%s: %s" % (test, verdicts))
        elif not compare and not outcome["ours"]:
            say("%s: FAIL" % test)

    shutil.rmtree(os.path.join(bindir, "ours"), ignore_errors=True)
    shutil.rmtree(os.path.join(bindir, "cf-agent"), ignore_errors=True)
    for name, missed in not_loaded.items():
        if name != "cf-agent":
            say("%s -c loads %d of %d test files" % (name, len(tests) - len(missed), len(tests)))
    for stage, theirs in (("check", "cf-promises"), ("run", "cf-agent")):
        if ("ours", stage) in SPENT:
            line = "time of the %s stage: ours %.2f s" % (stage, SPENT[("ours", stage)])
            if (theirs, stage) in SPENT:
                line += ", %s %.2f s (%.1fx)" % (theirs, SPENT[(theirs, stage)],
                                                 SPENT[(theirs, stage)] / SPENT[("ours", stage)])
            say(line)
    bad = bool(not_loaded["ours"])
    if not args.check_only:
        for name, got in passed.items():
            say("%s passes %d of %d tests" % (name, len(got), len(tests)))
        if compare:
            if differ:
                say("%d tests where the verdicts differ" % len(differ))
            elif known:
                say("the sets of passing tests are equal but for %d documented difference(s): %s"
                    % (len(known), ", ".join(known)))
            else:
                say("the sets of passing tests are equal")
            bad |= bool(differ)
        else:
            bad |= len(passed["ours"]) != len(tests)
        if bad or args.out:
            say("logs in %s" % logs)
    if not (bad or args.out):
        shutil.rmtree(bindir, ignore_errors=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
