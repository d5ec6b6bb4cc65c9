#!/usr/bin/env python3
"""Times the stock Masterfiles Policy Framework as a host runs it, under
cf-agent 3.21 and under convergent, side by side.

    python3 scripts/bench_mpf.py [--agent target/release/agent] [--runs 5]

For each agent and each iteration, a fresh work directory gets a copy of the
installed MPF (/var/lib/cfengine3/masterfiles) as its `inputs` (what an update
from the hub leaves there), a key pair (made once by cf-key), and its
`bin/cf-promises` links to that agent's cf-promises. Then, as a host's first
minutes under the MPF go:

  run1      the inputs' `promises.cf`, a first time (it sets up the host)
  run2      `promises.cf` again: what every later run pays
  check     `cf-promises -c` of the inputs' `promises.cf`

every one with `-K` (no locks, as the bench in ../shared/bench/perf runs).
Agents alternate within each iteration, so slow drifts of the machine hit
both. Each phase goes through /usr/bin/time (a small fork/exec, so peak RSS
is the agent's own, not this script's). Medians are printed with the ratio
cf-agent / convergent, and the peak RSS ratio convergent / cf-agent.

The MPF is run as root with a private work directory: what it manages lies
below that directory (its daemons are not there to start, and it says so).
A phase that exits non-zero is reported; its time is still counted.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

MPF = "/var/lib/cfengine3/masterfiles"
PHASES = ["run1", "run2", "check"]


def timed(cmd, log):
    """Wall time, CPU time and peak RSS (KB) of one command, and its exit
    code. The wall time is taken here (GNU time's has 10 ms steps); it
    includes starting /usr/bin/time, a millisecond."""
    with open(log, "ab") as out:
        start = time.perf_counter()
        r = subprocess.run(["/usr/bin/time", "-f", "%U %S %M", "-o", log + ".time"] + cmd,
                           stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        wall = time.perf_counter() - start
    with open(log + ".time") as f:
        last = f.read().strip().splitlines()[-1].split()
    user, sys_, rss = float(last[0]), float(last[1]), int(last[2])
    return wall, user + sys_, rss, r.returncode


def one_iteration(agent, promises, scratch, keys, i):
    """The phases for one agent in a fresh work directory."""
    wd = os.path.join(scratch, f"wd-{os.path.basename(os.path.dirname(agent))}-{i}")
    shutil.rmtree(wd, ignore_errors=True)
    os.makedirs(os.path.join(wd, "bin"))
    os.symlink(promises, os.path.join(wd, "bin", "cf-promises"))
    shutil.copytree(MPF, os.path.join(wd, "inputs"), symlinks=True)
    shutil.copytree(keys, os.path.join(wd, "ppkeys"))
    os.chmod(os.path.join(wd, "ppkeys"), 0o700)
    log = os.path.join(scratch, f"log-{os.path.basename(os.path.dirname(agent))}")
    inputs = os.path.join(wd, "inputs")
    cmds = {
        "run1": [agent, "-K", "-w", wd, "-f", os.path.join(inputs, "promises.cf")],
        "run2": [agent, "-K", "-w", wd, "-f", os.path.join(inputs, "promises.cf")],
        "check": [promises, "-c", "-w", wd, "-f", os.path.join(inputs, "promises.cf")],
    }
    out = {}
    for phase in PHASES:
        out[phase] = timed(cmds[phase], log)
    shutil.rmtree(wd, ignore_errors=True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agent", default="target/release/agent", help="convergent's binary")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--keep", action="store_true", help="keep the scratch directory")
    a = ap.parse_args()
    for need in ["/usr/bin/cf-agent", "/usr/bin/cf-promises", "/usr/bin/cf-key", "/usr/bin/time",
                 MPF]:
        if not os.path.exists(need):
            print(f"skipped: {need} is not installed")
            return 0
    scratch = tempfile.mkdtemp(prefix="bench-mpf.")
    keys = os.path.join(scratch, "ppkeys")
    os.makedirs(keys, mode=0o700)
    subprocess.run(["/usr/bin/cf-key", "-f", os.path.join(keys, "localhost")], check=True,
                   stdout=subprocess.DEVNULL)
    # Our binary acts by the name it is called with.
    ours = os.path.join(scratch, "convergent")
    os.makedirs(ours)
    for name in ["cf-agent", "cf-promises"]:
        os.symlink(os.path.abspath(a.agent), os.path.join(ours, name))
    theirs = os.path.join(scratch, "cfengine")
    os.makedirs(theirs)
    for name in ["cf-agent", "cf-promises"]:
        os.symlink(f"/usr/bin/{name}", os.path.join(theirs, name))
    agents = {
        "cf-agent": (os.path.join(theirs, "cf-agent"), os.path.join(theirs, "cf-promises")),
        "convergent": (os.path.join(ours, "cf-agent"), os.path.join(ours, "cf-promises")),
    }
    samples = {name: {p: [] for p in PHASES} for name in agents}
    failed = set()
    for i in range(a.runs):
        for name, (agent, promises) in agents.items():
            for phase, (wall, cpu, rss, code) in one_iteration(agent, promises, scratch, keys, i).items():
                samples[name][phase].append((wall, cpu, rss))
                if code != 0:
                    failed.add((name, phase, code))
        print(f"iteration {i + 1}/{a.runs} done", file=sys.stderr)
    print("| phase | cf-agent 3.21 (s) | convergent (s) | ratio | CPU (s), cf-agent / convergent "
          "| RSS convergent / cf-agent |")
    print("|---|---:|---:|---:|---:|---:|")
    for phase in PHASES:
        t = [statistics.median(s[0] for s in samples[n][phase]) for n in agents]
        c = [statistics.median(s[1] for s in samples[n][phase]) for n in agents]
        m = [max(s[2] for s in samples[n][phase]) for n in agents]
        print(f"| {phase} | {t[0]:.3f} | {t[1]:.3f} | {t[0] / t[1]:.1f}x | "
              f"{c[0]:.2f} / {c[1]:.2f} | {m[1] / m[0]:.2f} |")
    for name, phase, code in sorted(failed):
        print(f"note: {name} {phase} exited {code} (see {scratch}/log-*)")
    if a.keep or failed:
        print(f"scratch kept: {scratch}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
