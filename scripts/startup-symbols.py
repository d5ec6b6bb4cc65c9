#!/usr/bin/env python3
"""Regenerate scripts/startup-symbols.txt: the agent's functions that a policy
check and a short run execute, in tiers: those a check of a one-report policy
executes first, then those the checks of the bigger policies add (in the
order given, the MPF last), then those the runs add; hottest first within a
tier.

build.rs hands the list to the linker (LLD's --symbol-ordering-file), which
places these functions side by side at the start of the text: a check then
touches a few hundred KB of the 10 MB binary instead of pages all over it
(the kernel maps 64 KB around each page fault, and every mapped page counts
in the process's memory). Tiers keep the smallest check's functions on the
fewest pages: a short check faults in only the first part of the list.

    python3 scripts/startup-symbols.py --agent target/release/agent \
        [--workdir DIR] [POLICY...]

Each POLICY is checked as cf-promises checks it (plain, -c, --show-vars)
and run once by the agent in dry-run mode (-K -n), under valgrind's
callgrind; so are a one-report policy and, when installed, the MPF's
promises.cf. Use policies like the ones to be fast, smallest first (the
bench's edit-big, files-1000, classes-heavy and files-10000 were given for
the list here). Names the linker
does not find later (a function renamed or gone) are passed over, so a stale
list only lays out less. Make the list from a binary that `cargo build
--release` linked: one that `cargo test` linked has other symbol hashes
(the dev-dependencies change its features), and the list made from it
finds a quarter of the functions of the real build.
"""

import argparse
import collections
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "startup-symbols.txt")
MPF = "/var/lib/cfengine3/masterfiles/promises.cf"
HELLO = """body common control
{
      bundlesequence => { "main" };
}

bundle agent main
{
  reports:
      "hello";
}
"""


def costs(callgrind_file, binary, acc, tier, tiers):
    """Adds each function of `binary` in one callgrind output to `acc`,
    with its own instruction count, and notes in `tiers` the first run
    (`tier`) that executed it."""
    obj = fn = None
    with open(callgrind_file, errors="replace") as f:
        for line in f:
            if line.startswith("ob="):
                obj = line[3:].strip()
            elif line.startswith("fn="):
                name = line[3:].strip().split("'")[0]
                fn = name if obj and os.path.realpath(obj) == binary else None
                if fn:
                    acc[fn] += 0
                    tiers.setdefault(fn, tier)
            elif fn and line[:1].isdigit():
                parts = line.split()
                if len(parts) >= 2 and parts[1].isdigit():
                    acc[fn] += int(parts[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--agent", required=True)
    ap.add_argument("--workdir", help="work directory for the runs (default: a temporary one)")
    ap.add_argument("policies", nargs="*")
    args = ap.parse_args()
    binary = os.path.realpath(args.agent)
    acc = collections.Counter()
    with tempfile.TemporaryDirectory() as tmp:
        hello = os.path.join(tmp, "hello.cf")
        with open(hello, "w") as f:
            f.write(HELLO)
        policies = [hello] + args.policies + ([MPF] if os.path.exists(MPF) else [])
        workdir = args.workdir or os.path.join(tmp, "wd")
        os.makedirs(os.path.join(workdir, "bin"), exist_ok=True)
        names = {}
        for name in ("cf-promises", "cf-agent"):
            names[name] = os.path.join(tmp, name)
            os.symlink(binary, names[name])
            link = os.path.join(workdir, "bin", name)
            if not os.path.lexists(link):
                os.symlink(binary, link)
        # The order of the runs is the order of the tiers: the plain checks
        # of every policy first (a check is all start, so its time is most
        # sensitive to the pages it touches), then the runs, then the rest.
        runs = []
        for flags in ([], ["-c"]):
            for policy in policies:
                runs.append([names["cf-promises"]] + flags + ["-w", workdir, "-f", policy])
        for policy in policies:
            runs.append([names["cf-agent"], "-K", "-n", "-w", workdir, "-f", policy])
        for policy in policies:
            runs.append([names["cf-promises"], "--show-vars", "-w", workdir, "-f", policy])
        tiers = {}
        for i, cmd in enumerate(runs):
            out = os.path.join(tmp, "cg.%d" % i)
            subprocess.run(["valgrind", "--tool=callgrind", "--demangle=no",
                            "--compress-strings=no", "--callgrind-out-file=" + out] + cmd,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            if os.path.exists(out):
                costs(out, binary, acc, i, tiers)
    nm = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True,
                        check=True).stdout
    defined = {f[2] for f in (l.split() for l in nm.splitlines())
               if len(f) == 3 and f[1] in "tTwW"}
    hot = sorted((s for s in acc if s in defined), key=lambda s: (tiers[s], -acc[s], s))
    with open(OUT, "w") as f:
        f.write("".join(s + "\n" for s in hot))
    print("startup-symbols.py: %d functions from %d runs -> %s" % (len(hot), len(runs), OUT),
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
