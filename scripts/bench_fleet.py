#!/usr/bin/env python3
"""The fleet benchmark: the stock MPF's update.cf from a real cf-serverd,
convergent beside cf-agent 3.21 on the same hub.

A hub (Debian's cf-serverd 3.21, a private work directory, a spare port on
127.0.0.1) serves a copy of the MPF as `masterfiles`, as
tests/it/fleet.rs sets it up. Two host work directories get keys, the
hub's key trusted, policy_server.dat and the MPF's update policy. Each
round, alternating the two agents:

- first update: the host's inputs hold only the update policy (as after a
  bootstrap that kept nothing), so update.cf copies the stamp and then all
  of masterfiles;
- no change: update.cf again, which finds the stamp unchanged and copies
  nothing.

Prints the median wall time of each, and the ratio. Not a test: the
numbers depend on the machine (its disk's flush time above all).

    python3 scripts/bench_fleet.py [--runs N] [--agent target/release/agent]
"""

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

MPF = "/usr/share/cfengine3/masterfiles"
UPDATE_FILES = [
    "update.cf",
    "standalone_self_upgrade.cf",
    "controls/update_def.cf",
    "controls/update_def_inputs.cf",
    "cfe_internal/update/cfe_internal_dc_workflow.cf",
    "cfe_internal/update/cfe_internal_update_from_repository.cf",
    "cfe_internal/update/lib.cf",
    "cfe_internal/update/systemd_units.cf",
    "cfe_internal/update/update_bins.cf",
    "cfe_internal/update/update_policy.cf",
    "cfe_internal/update/update_processes.cf",
    "cfe_internal/update/windows_unattended_upgrade.cf",
]


def spare_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(cmd, env=None):
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def wd_env(wd):
    return dict(os.environ, CFENGINE_TEST_OVERRIDE_WORKDIR=wd)


def start_hub(dir):
    hub = os.path.join(dir, "hub")
    os.makedirs(os.path.join(hub, "bin"))
    os.symlink(shutil.which("cf-promises"), os.path.join(hub, "bin/cf-promises"))
    run(["cf-key"], wd_env(hub))
    shutil.copytree(MPF, os.path.join(hub, "masterfiles"), symlinks=True)
    run(["cf-promises", "-T", os.path.join(hub, "masterfiles")], wd_env(hub))
    port = spare_port()
    policy = os.path.join(hub, "server.cf")
    with open(policy, "w") as f:
        f.write(f"""body common control {{ bundlesequence => {{ "main" }}; }}
bundle agent main {{ }}
body server control
{{
  port => "{port}";
  allowconnects => {{ "127.0.0.0/8" }};
  allowallconnects => {{ "127.0.0.0/8" }};
  trustkeysfrom => {{ "127.0.0.0/8" }};
  allowusers => {{ "root" }};
}}
bundle server access_rules
{{
  access:
    "{hub}/masterfiles/"
      shortcut => "masterfiles",
      admit_ips => {{ "127.0.0.0/8" }};
}}
""")
    # A policy cf-promises rejects would start the failsafe server: check.
    run(["cf-promises", "-c", policy], wd_env(hub))
    log = open(os.path.join(hub, "serverd.log"), "w")
    proc = subprocess.Popen(["cf-serverd", "-F", "-K", "-f", policy],
                            env=wd_env(hub), stdout=log, stderr=log,
                            stdin=subprocess.DEVNULL)
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return hub, port, proc
        except OSError:
            if proc.poll() is not None:
                sys.exit(f"cf-serverd exited; see {log.name}")
            time.sleep(0.1)
    proc.kill()
    sys.exit("cf-serverd did not listen within 60 s")


def host(dir, name, hub, port):
    wd = os.path.join(dir, name)
    os.makedirs(os.path.join(wd, "bin"))
    os.symlink(shutil.which("cf-promises"), os.path.join(wd, "bin/cf-promises"))
    run(["cf-key"], wd_env(wd))
    run(["cf-key", "-t", f"127.0.0.1:{hub}/ppkeys/localhost.pub"], wd_env(wd))
    with open(os.path.join(wd, "policy_server.dat"), "w") as f:
        f.write(f"127.0.0.1:{port}\n")
    return wd


def reset_inputs(wd):
    inputs = os.path.join(wd, "inputs")
    shutil.rmtree(inputs, ignore_errors=True)
    for f in UPDATE_FILES:
        to = os.path.join(inputs, f)
        os.makedirs(os.path.dirname(to), exist_ok=True)
        shutil.copy2(os.path.join(MPF, f), to)


def timed(cmd, env=None):
    t = time.perf_counter()
    r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    if r.returncode != 0:
        sys.exit(f"{cmd} exited {r.returncode}")
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--agent", default="target/release/agent")
    args = ap.parse_args()
    agent = os.path.abspath(args.agent)
    with tempfile.TemporaryDirectory(prefix="bench-fleet.") as dir:
        hub, port, proc = start_hub(dir)
        try:
            ours = host(dir, "ours", hub, port)
            theirs = host(dir, "theirs", hub, port)

            def run_ours(wd):
                return timed([agent, "-K", "-w", wd, "-f",
                              os.path.join(wd, "inputs/update.cf")])

            def run_theirs(wd):
                return timed(["cf-agent", "-K", "-f",
                              os.path.join(wd, "inputs/update.cf")], wd_env(wd))

            times = {k: [] for k in ("ours-first", "theirs-first",
                                     "ours-again", "theirs-again")}
            for _ in range(args.runs):
                for name, wd, go in (("ours", ours, run_ours),
                                     ("theirs", theirs, run_theirs)):
                    reset_inputs(wd)
                    times[f"{name}-first"].append(go(wd))
                    times[f"{name}-again"].append(go(wd))
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"{'phase':<14}{'cf-agent 3.21':>15}{'convergent':>12}{'ratio':>8}")
    for phase, key in (("first update", "first"), ("no change", "again")):
        t, o = med[f"theirs-{key}"], med[f"ours-{key}"]
        print(f"{phase:<14}{t:>14.3f}s{o:>11.3f}s{t / o:>7.2f}x")


if __name__ == "__main__":
    main()
