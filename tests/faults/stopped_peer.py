#!/usr/bin/env python3
"""A stopped rank must not hold the job's last process: 4 ranks launched by hand
(rank 0 serves the store) all-reduce in a loop (scenario_worker `loop`), one rank
other than 0 is sent SIGSTOP, and every survivor, rank 0 included, must name it
and exit within DDP_TIMEOUT + 5 s of the signal. Rank 0's store lingers on
teardown while ranks are still connected (they may be reading the failure);
the stopped rank's connections stay open, so without the survivors marking it
stalled rank 0 waited out the whole linger (DDP_TIMEOUT + 10 s more). And a
survivor that reaches the desync report late (rank 0, 1.4 s after the others,
1 run in 20 beside a CPU hog) must not wait its whole window after them.

Prints one line per run with each survivor's exit time after the signal;
exits 1 when a survivor is late, names another rank, or exits some other way.

  tests/faults/stopped_peer.py --worker build/tests/scenario_worker --runs 20 --hog
"""
import argparse
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

RESULT = re.compile(r"^RESULT kind=(\w+) rank=(-?\d+)", re.M)
READY = re.compile(r"^READY rank=(\d+) pid=(\d+)", re.M)
SLACK = 5.0  # seconds after DDP_TIMEOUT by which every survivor must have exited

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from free_port import free_port  # noqa: E402


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def run(args, victim, workdir, n):
    """One job; returns (ok, line)."""
    world, timeout = args.world, args.timeout
    port = free_port()
    base = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world),
                DDP_TIMEOUT=f"{timeout:g}s", DDP_TEST_LOOP_SECONDS="120", DDP_TOKEN=f"stopped-{port}")
    logs = [os.path.join(workdir, f"run{n}_rank{r}.log") for r in range(world)]
    procs = []
    for r in range(world):
        with open(logs[r], "w") as out:
            procs.append(subprocess.Popen([args.worker, "loop"], env=dict(base, RANK=str(r)), stdout=out,
                                          stderr=subprocess.STDOUT))
    try:
        ready_by = time.monotonic() + 60
        while not all(READY.search(read(l)) for l in logs):
            if any(p.poll() is not None for p in procs):
                return False, f"run {n}: a rank exited before the fault [{workdir}/run{n}_*]"
            if time.monotonic() > ready_by:
                return False, f"run {n}: not every rank became ready in 60 s [{workdir}/run{n}_*]"
            time.sleep(0.05)
        time.sleep(random.uniform(0.2, 1.0))  # a few collectives in
        os.kill(procs[victim].pid, signal.SIGSTOP)
        t_stop = time.monotonic()
        survivors = [r for r in range(world) if r != victim]
        limit = t_stop + timeout + SLACK
        exited = {}
        while len(exited) < len(survivors) and time.monotonic() < limit:
            for r in survivors:
                if r not in exited and procs[r].poll() is not None:
                    exited[r] = time.monotonic() - t_stop
            time.sleep(0.02)
        problems = []
        for r in survivors:
            if r not in exited:
                problems.append(f"rank {r} still running {timeout + SLACK:g} s after the stop")
                continue
            m = RESULT.search(read(logs[r]))
            if not m:
                problems.append(f"rank {r} exited {procs[r].returncode} without naming a rank")
            elif int(m.group(2)) != victim:
                problems.append(f"rank {r} named rank {m.group(2)} ({m.group(1)}), not rank {victim}")
        times = ", ".join(f"rank {r} {exited[r]:.2f} s" if r in exited else f"rank {r} late" for r in survivors)
        line = f"run {n}: stopped rank {victim}; exits after the stop: {times}"
        if problems:
            line += "\n    " + "\n    ".join(problems) + f" [{workdir}/run{n}_*]"
        return not problems, line
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()  # the stopped rank too: SIGKILL ends a stopped process
            p.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", required=True, help="tests/scenario_worker")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=5.0, help="DDP_TIMEOUT of the job, in seconds")
    ap.add_argument("--victim", type=int, default=None,
                    help="the rank to stop (default: 2, then 1, 3, ... in turn; never 0, which serves the store)")
    ap.add_argument("--hog", action="store_true", help="two busy loops beside the job")
    args = ap.parse_args()
    order = [2, 1, 3] + list(range(4, args.world))
    victims = [args.victim] if args.victim is not None else [v for v in order if v < args.world]
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(2)] if args.hog else []
    workdir = tempfile.mkdtemp(prefix="ddp-stopped-peer-")
    passed = 0
    try:
        for n in range(args.runs):
            ok, line = run(args, victims[n % len(victims)], workdir, n)
            passed += ok
            print(line, flush=True)
    finally:
        for h in hogs:
            h.kill()
            h.wait()
        if passed == args.runs:  # a failed run's line points at its logs here: then they stay
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"stopped peer: {passed} of {args.runs} runs ended by DDP_TIMEOUT + {SLACK:g} s "
          f"(DDP_TIMEOUT={args.timeout:g}s, CPU hog {'on' if args.hog else 'off'})")
    sys.exit(0 if passed == args.runs else 1)


if __name__ == "__main__":
    main()
