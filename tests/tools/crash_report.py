#!/usr/bin/env python3
"""tools.crash_report: libddp_crash_report.so preloaded into real processes that die on purpose
(tests/tools/crash_victim.cpp), alone and as a rank of a ddprun job; its report read back through
scripts/symbolize-crash, which must name the function and the source line that crashed.

  crash_report.py LIBRARY VICTIM DDPRUN SYMBOLIZE
"""
import os
import re
import signal
import subprocess
import sys

library, victim, ddprun, symbolize = sys.argv[1:5]
source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crash_victim.cpp")
fault_line = next(i + 1 for i, text in enumerate(open(source)) if "crash_victim: the faulting line" in text)
failures = []


def check(ok, what, output=""):
    if not ok:
        failures.append(what + (":\n" + output if output else ""))


def run(args, preload=True, extra_env=None, timeout=60):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if preload:
        env["LD_PRELOAD"] = library
    env.update(extra_env or {})
    p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def symbolized(output):
    p = subprocess.run([sys.executable, symbolize, "--build", os.path.dirname(victim)], input=output,
                       capture_output=True, text=True, timeout=120)
    return p.returncode, p.stdout + p.stderr


def frames(output):
    return [l for l in output.splitlines() if re.search(r"ddp crash report: pid \d+:\s+#\d+ ", l)]


def expect_report(case, rc, out, sig, functions, line=None):
    check(rc == -sig, "%s: died of %s (got rc %s)" % (case, signal.Signals(sig).name, rc), out)
    heads = [l for l in out.splitlines() if re.search(r"ddp crash report: pid \d+, thread \d+: ", l)]
    check(len(heads) == 1 and signal.Signals(sig).name in heads[0], "%s: one report head naming the signal" % case, out)
    found = frames(out)
    check(len(found) >= 3, "%s: at least 3 frames" % case, out)
    if sig == signal.SIGSEGV:
        faults = [l for l in found if l.endswith(" fault")]
        check(len(faults) == 1 and os.path.basename(victim) in faults[0],
              "%s: one frame marked fault, in the victim" % case, out)
        check("(address 0x0, SEGV_MAPERR" in heads[0] if heads else False, "%s: the address and the code" % case,
              out)
    src, text = symbolized(out)
    check(src == 0, "%s: symbolize-crash exit 0 (got %d)" % (case, src), text)
    for fn in functions:
        check(re.search(r"^\s+(\(anonymous namespace\)::)?%s(\(\))? at " % fn, text, re.M) is not None,
              "%s: symbolized frames name %s" % (case, fn), text)
    if line is not None:
        check(re.search(r"crash_victim\.cpp:%d\b" % line, text) is not None,
              "%s: symbolized frames name crash_victim.cpp:%d" % (case, line), text)
    return heads


# A fault on the main thread: the faulting line and its caller.
rc, out = run([victim, "segv"])
expect_report("segv", rc, out, signal.SIGSEGV, ["crash_victim_null_write", "crash_victim_caller", "main"],
              fault_line)

# On another thread: the thread named is not the main one.
rc, out = run([victim, "thread"])
heads = expect_report("thread", rc, out, signal.SIGSEGV, ["crash_victim_null_write", "crash_victim_caller"],
                      fault_line)
m = re.search(r"pid (\d+), thread (\d+)", heads[0]) if heads else None
check(m is not None and m.group(1) != m.group(2), "thread: the report names the crashing thread", out)

# An uncaught exception: libstdc++ says what, the report says where it was thrown.
rc, out = run([victim, "abort"])
expect_report("abort", rc, out, signal.SIGABRT, ["crash_victim_throw", "main"])
check("thrown on purpose" in out, "abort: the exception's what() still printed", out)

# A fatal signal sent, not caused (kill -SEGV, raise): reported, and it still ends the process.
rc, out = run([victim, "raise"])
check(rc == -signal.SIGSEGV, "raise: died of SIGSEGV (got rc %s)" % rc, out)
check(re.search(r"thread \d+: SIGSEGV$", out, re.M) is not None, "raise: reported, without an address", out)

# Nothing is printed by a process that ends well, nor by one that dies with the report off.
rc, out = run([victim, "ok"])
check(rc == 0 and "ddp crash report" not in out, "ok: exit 0, no report (rc %s)" % rc, out)
rc, out = run([victim, "segv"], extra_env={"DDP_CRASH_REPORT": "0"})
check(rc == -signal.SIGSEGV and "ddp crash report" not in out, "DDP_CRASH_REPORT=0: no report, same death", out)
rc, out = run([victim, "segv"], preload=False)
check(rc == -signal.SIGSEGV and "ddp crash report" not in out, "not preloaded: no report", out)

# A rank of a ddprun job (what scripts/gpu-check runs): the preload reaches the ranks, the
# report comes through ddprun's rank prefixes, ddprun still names the signal and fails the job.
rc, out = run([ddprun, "--nproc-per-node", "2", victim, "rank1_segv"], extra_env={"DDP_TIMEOUT": "20s"})
check(rc != 0, "ddprun: the job failed (rc %s)" % rc, out)
check(re.search(r"rank 1 .*SIGSEGV", out) is not None, "ddprun: names rank 1 and SIGSEGV", out)
rank_frames = frames(out)
check(len(rank_frames) >= 3 and all(l.lstrip().startswith("[1]") for l in rank_frames),
      "ddprun: rank 1's frames, each with its rank prefix", out)
src, text = symbolized(out)
check(re.search(r"crash_victim_null_write\(\) at .*crash_victim\.cpp:%d\b" % fault_line, text) is not None,
      "ddprun: the rank's frames symbolized", text)

# Input without a report: symbolize-crash says so (exit 1) and passes the text through.
src, text = symbolized("no crash here\n")
check(src == 1 and "no crash here" in text and "no crash report frames" in text,
      "symbolize-crash on a log without frames: exit 1 and says so (got %d)" % src, text)

if failures:
    print("\n\n".join("FAILED: " + f for f in failures))
    sys.exit(1)
print("tools.crash_report: 8 cases passed")
