#!/usr/bin/env python3
"""The fault matrix of issue 11: kill -9 or SIGSTOP a random rank at a random
moment of a 4-rank job that all-reduces in a loop (scenario_worker `loop`),
launched by hand (one process per rank) and under ddprun, optionally beside a
CPU hog. Every survivor must name the rank that died or stalled; under ddprun,
ddprun must report that rank as the first to fail, with its own code
(137 for SIGKILL, 147 for SIGSTOP). Prints one row per case:

  case, runs, named right, worst detect time, hung

`detect time` is from the signal to the last survivor's error. Exits 1 when a
survivor names a wrong rank, ddprun reports a wrong one, or anything hangs.

  tests/faults/matrix.py --worker build/tests/scenario_worker --ddprun build/tools/ddprun \\
      --trials 50 --hog
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

RESULT = re.compile(r"^(?:\[(\d+)\] )?RESULT kind=(\w+) rank=(-?\d+) ms=(\d+) wall_ms=(\d+)", re.M)
READY = re.compile(r"^(?:\[\d+\] )?READY rank=(\d+) pid=(\d+)", re.M)
FIRST = re.compile(r"ddprun: the first rank to fail was rank (\d+)")


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from free_port import free_port  # noqa: E402


def parse_seconds(t):
    if t.endswith("ms"):
        return float(t[:-2]) / 1000
    if t.endswith("s"):
        return float(t[:-1])
    if t.endswith("m"):
        return float(t[:-1]) * 60
    return float(t)


def read(path):
    with open(path, errors="replace") as f:
        return f.read()


def trial(args, launch, fault, workdir, n):
    world = args.world
    port = free_port()
    base = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(world),
                DDP_TIMEOUT=args.timeout, DDP_TEST_LOOP_SECONDS="60", DDP_TOKEN=f"matrix-{port}")
    procs, logs = [], []
    if launch == "hand":
        for r in range(world):
            log = os.path.join(workdir, f"t{n}_r{r}.log")
            env = dict(base, RANK=str(r))
            procs.append(subprocess.Popen([args.worker, "loop"], env=env, stdout=open(log, "w"),
                                          stderr=subprocess.STDOUT))
            logs.append(log)
    else:
        base.pop("MASTER_PORT")
        log = os.path.join(workdir, f"t{n}_ddprun.log")
        # The grace period must outlast a survivor's detection: a survivor whose
        # send is stuck inside Gloo learns of the loss only at DDP_TIMEOUT (seen
        # with kill -9, 4 ranks), and a stall is named ~4 s after it.
        grace = str(parse_seconds(args.timeout) + 6)
        procs.append(subprocess.Popen([args.ddprun, "--nproc-per-node", str(world), "--grace-period", grace,
                                       args.worker, "loop"], env=base, stdout=open(log, "w"),
                                      stderr=subprocess.STDOUT))
        logs.append(log)
    text = lambda: "".join(read(l) for l in logs)

    deadline = time.time() + 60
    pids = {}
    while time.time() < deadline and len(pids) < world:
        pids = {int(r): int(p) for r, p in READY.findall(text())}
        time.sleep(0.05)
    row = {"named": False, "detect": None, "hung": False, "note": ""}
    if len(pids) < world:
        row["hung"] = True
        row["note"] = "not every rank became ready"
        for p in procs:
            p.kill()
        return row

    victim = random.randrange(world)
    time.sleep(random.uniform(0.0, 1.5))
    sig = signal.SIGKILL if fault == "kill" else signal.SIGSTOP
    t_fault = time.time() * 1000
    os.kill(pids[victim], sig)

    survivors = [r for r in range(world) if r != victim]
    limit = time.time() + args.detect_limit
    results = {}
    while time.time() < limit:
        results = {}
        for m in RESULT.finditer(text()):
            prefix, kind, rank, ms, wall = m.groups()
            # by hand each log is one rank's; under ddprun the prefix says whose
            results[len(results) if prefix is None else int(prefix)] = (kind, int(rank), int(wall))
        if launch == "hand":
            results = {}
            for r in survivors:
                m = RESULT.search(read(logs[r]))
                if m:
                    results[r] = (m.group(2), int(m.group(3)), int(m.group(5)))
        if all(r in results for r in survivors):
            break
        time.sleep(0.05)
    if fault == "stop" and launch == "hand":
        os.kill(pids[victim], signal.SIGKILL)  # by hand nobody else will
    end = time.time() + args.detect_limit
    for p in procs:
        try:
            p.wait(timeout=max(0.1, end - time.time()))
        except subprocess.TimeoutExpired:
            row["hung"] = True
            p.kill()
            p.wait()
    missing = [r for r in survivors if r not in results]
    if missing:
        row["hung"] = True
        row["note"] = f"no result from ranks {missing}"
        return row
    wrong = {r: v for r, v in results.items() if r in survivors and v[1] != victim}
    row["detect"] = max(results[r][2] for r in survivors) - t_fault
    row["named"] = not wrong
    if wrong:
        row["note"] = f"victim {victim}, wrong names {wrong}"
    if launch == "ddprun":
        want = 128 + sig
        first = FIRST.search(text())
        if procs[0].returncode != want or not first or int(first.group(1)) != victim:
            row["named"] = False
            row["note"] += f" ddprun rc {procs[0].returncode} (want {want}), first={first and first.group(1)}"
    if row["note"]:
        row["note"] += f" [{workdir}/t{n}_*]"
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--worker", required=True)
    ap.add_argument("--ddprun", required=True)
    ap.add_argument("--trials", type=int, default=50, help="total, spread over the four cases")
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--timeout", default="5s", help="DDP_TIMEOUT of the job")
    ap.add_argument("--detect-limit", type=float, default=40.0, help="seconds before a trial counts as hung")
    ap.add_argument("--hog", action="store_true", help="run a CPU hog (a busy loop) beside the job")
    ap.add_argument("--seed", type=int, default=None)
    args = ap.parse_args()
    if args.seed is not None:
        random.seed(args.seed)
    cases = [(l, f) for l in ("hand", "ddprun") for f in ("kill", "stop")]
    hog = subprocess.Popen(["sh", "-c", "while :; do :; done"]) if args.hog else None
    stats = {c: {"runs": 0, "named": 0, "worst": 0.0, "hung": 0, "notes": []} for c in cases}
    workdir = tempfile.mkdtemp(prefix="ddp-faults-")
    clean = False
    try:
        for n in range(args.trials):
            c = cases[n % len(cases)]
            row = trial(args, c[0], c[1], workdir, n)
            s = stats[c]
            s["runs"] += 1
            s["named"] += row["named"]
            s["hung"] += row["hung"]
            if row["detect"] is not None:
                s["worst"] = max(s["worst"], row["detect"])
            if row["note"]:
                s["notes"].append(row["note"])
            print(f"trial {n + 1}/{args.trials} {c[0]}/{c[1]}: named={row['named']} hung={row['hung']} "
                  f"detect={row['detect'] and round(row['detect'])} ms {row['note']}", flush=True)
        clean = not any(s["notes"] for s in stats.values())
    finally:
        if hog:
            hog.kill()
            hog.wait()
        if clean:  # a trial's note points at its ranks' logs here: then they stay
            shutil.rmtree(workdir, ignore_errors=True)
    print(f"\nfault matrix: world {args.world}, DDP_TIMEOUT={args.timeout}, CPU hog {'on' if args.hog else 'off'}")
    print(f"{'case':<14}{'runs':>6}{'named right':>13}{'worst detect':>15}{'hung':>6}")
    ok = True
    for c in cases:
        s = stats[c]
        if s["runs"] == 0:
            continue
        print(f"{c[0] + '/' + c[1]:<14}{s['runs']:>6}{s['named']:>13}{s['worst'] / 1000:>13.1f} s{s['hung']:>6}")
        ok &= s["named"] == s["runs"] and s["hung"] == 0
        for note in s["notes"]:
            print(f"    {note}")
    total = sum(s["runs"] for s in stats.values())
    named = sum(s["named"] for s in stats.values())
    hung = sum(s["hung"] for s in stats.values())
    print(f"{'all':<14}{total:>6}{named:>13}{'':>15}{hung:>6}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
