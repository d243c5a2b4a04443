#!/usr/bin/env python3
"""tools.crash_report: libddp_crash_report.so preloaded into real processes that die on purpose
(tests/tools/crash_victim.cpp), alone and as a rank of a ddprun job; its report read back through
scripts/dev/symbolize-crash, which must name the function and the source line that crashed; and
`ddprun --crash-report`, from the build tree and from an installed prefix.

  crash_report.py LIBRARY VICTIM VICTIM_WITHOUT_BUILD_ID SLOW_INIT_LIBRARY DDPRUN SYMBOLIZE
                  BUILD_TREE_TO_INSTALL|-
"""
import os
import platform
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time

library, victim, victim_no_id, slow_init, ddprun, symbolize, install_from = sys.argv[1:8]
source = os.path.join(os.path.dirname(os.path.abspath(__file__)), "crash_victim.cpp")
fault_line = next(i + 1 for i, text in enumerate(open(source)) if "crash_victim: the faulting line" in text)
spin_line = next(i + 1 for i, text in enumerate(open(source)) if "crash_victim: the spinning line" in text)
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
    try:
        p = subprocess.run(args, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"") + (e.stderr or b"")
        return "timeout after %d s" % timeout, out.decode(errors="replace") if isinstance(out, bytes) else out
    return p.returncode, p.stdout + p.stderr


def symbolized(output, build=None, cwd=None):
    p = subprocess.run([sys.executable, symbolize, "--build", build or os.path.dirname(victim)], input=output,
                       capture_output=True, text=True, timeout=120, cwd=cwd)
    return p.returncode, p.stdout + p.stderr


def frames(output):
    return [l for l in output.splitlines() if re.search(r"ddp crash report: pid \d+:\s+#\d+ ", l)]


def expect_report(case, rc, out, sig, functions, line=None, fault=None):
    check(rc == -sig, "%s: died of %s (got rc %s)" % (case, signal.Signals(sig).name, rc), out)
    heads = [l for l in out.splitlines() if re.search(r"ddp crash report: pid \d+, thread \d+: ", l)]
    check(len(heads) == 1 and signal.Signals(sig).name in heads[0], "%s: one report head naming the signal" % case, out)
    found = frames(out)
    check(len(found) >= 3, "%s: at least 3 frames" % case, out)
    check(not any("crash_report" in l for l in found), "%s: the handler's own frames are not shown" % case, out)
    if fault is None:
        fault = sig == signal.SIGSEGV
    if fault:
        faults = [l for l in found if l.endswith(" fault")]
        check(len(faults) == 1 and os.path.realpath(victim) in faults[0],
              "%s: one frame marked fault, in the victim (named by its full path)" % case, out)
    if sig == signal.SIGSEGV and fault:
        check("(address 0x0, SEGV_MAPERR" in heads[0] if heads else False, "%s: the address and the code" % case,
              out)
    modules = re.findall(r"ddp crash report: pid \d+: module (\S+) build-id ([0-9a-f]{16,})$", out, re.M)
    check(any(m == os.path.realpath(victim) for m, _ in modules),
          "%s: the victim's build ID listed after the frames" % case, out)
    src, text = symbolized(out)
    check(src == 0, "%s: symbolize-crash exit 0 (got %d)" % (case, src), text)
    for fn in functions:
        check(re.search(r"^\s+(\(anonymous namespace\)::)?%s(\([^)]*\))? at " % fn, text, re.M) is not None,
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

# Four threads fault at the same moment: one report, whole (frames, then the module lines), and
# the process dies of the signal (the other threads wait for the report instead of ending it).
for attempt in range(5):
    rc, out = run([victim, "threads"])
    heads = re.findall(r"ddp crash report: pid \d+, thread \d+: SIGSEGV", out)
    check(rc == -signal.SIGSEGV and len(heads) == 1, "threads: one report, died of SIGSEGV (rc %s)" % rc, out)
    lines = [l for l in out.splitlines() if "ddp crash report" in l]
    kinds = ["head" if ", thread " in l else "module" if ": module " in l else "frame" for l in lines]
    check(len(frames(out)) >= 3 and kinds[-1] == "module" and kinds == sorted(kinds, key=["head", "frame",
                                                                                           "module"].index),
          "threads: the report is whole and in order (head, frames, modules)", out)

# The frames as an older glibc finds them (dladdr1): the same frames, the build IDs too.
rc, out = run([victim, "segv"], extra_env={"DDP_CRASH_REPORT_LOOKUP": "dladdr"})
expect_report("segv, dladdr lookup", rc, out, signal.SIGSEGV, ["crash_victim_null_write", "main"], fault_line)

def default_quit_no_core():
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def signal_when_ready(args, ready, ready_lines, sig, env_extra=None, whole_group=False):
    """Starts a program, waits for `ready_lines` lines holding `ready`, sends it `sig` (to its
    process group too when `whole_group`, as a terminal's Ctrl-\\ and `timeout` do):
    (rc, output, seconds from the signal to the end). The program starts with SIGQUIT at its
    default (a shell may start a background job with it ignored) and dumps no core."""
    env = dict(os.environ, **(env_extra or {}))
    # Unbuffered: what follows the ready lines stays in the pipe for communicate().
    p = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, bufsize=0,
                         preexec_fn=default_quit_no_core, start_new_session=True)
    started = time.monotonic()
    seen = b""
    try:
        while seen.count(ready.encode()) < ready_lines and time.monotonic() - started < 30:
            line = p.stdout.readline()
            if not line:
                break
            seen += line
        time.sleep(0.3)  # from its write to the loop it waits in
        sent = time.monotonic()
        if whole_group:
            os.killpg(p.pid, sig)
        else:
            p.send_signal(sig)
        out = seen + p.communicate(timeout=30)[0]
        return p.returncode, out.decode(errors="replace"), time.monotonic() - sent
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)  # a launcher and its ranks
        return "timeout", (seen + p.communicate()[0]).decode(errors="replace"), 30


# A signal sent from outside (timeout -s ABRT, kill): the frame it stopped is marked, and its
# address is taken as it is (not as a return address, one byte earlier). The victim says it is
# about to spin; a signal that still finds it finishing that write is tried again.
for attempt in range(3):
    rc, out, _ = signal_when_ready([victim, "spin"], "crash_victim: spinning", 1, signal.SIGABRT,
                                   {"LD_PRELOAD": library})
    interrupted = [l for l in frames(out) if l.endswith(" interrupted")]
    if interrupted and os.path.realpath(victim) in interrupted[0]:
        break
check(rc == -signal.SIGABRT, "spin: died of SIGABRT (rc %s)" % rc, out)
check(len(interrupted) == 1 and os.path.realpath(victim) in interrupted[0],
      "spin: the frame the signal stopped is marked interrupted, in the victim", out)
src, text = symbolized(out)
check(re.search(r" interrupted\n\s+(\(anonymous namespace\)::)?crash_victim_spin\(\) at .*crash_victim\.cpp:%d\b"
                % spin_line, text) is not None, "spin: symbolized to the spinning line", text)

# A hung program sent SIGQUIT: every thread's frames (the one the signal reached first, then each
# other one it asks), a line for the thread that blocks SIGQUIT, then death by SIGQUIT.
rc, out, took = signal_when_ready([victim, "hang"], "crash_victim: hanging", 1, signal.SIGQUIT,
                                  {"LD_PRELOAD": library})
check(rc == -signal.SIGQUIT and took < 5, "hang: died of SIGQUIT within 5 s (rc %s, %.1f s)" % (rc, took), out)
check(len(re.findall(r"thread \d+: SIGQUIT: the frames of every thread follow", out)) == 1
      and len(re.findall(r"thread \d+: frames$", out, re.M)) == 1
      and len(re.findall(r"thread \d+: blocks SIGQUIT: its frames cannot be shown", out)) == 1,
      "hang: one head, one other thread's frames, one thread named as blocking SIGQUIT", out)
check(re.search(r": module \S+/%s build-id" % re.escape(os.path.basename(victim)), out) is not None,
      "hang: the module lines follow", out)
src, text = symbolized(out)
for fn in ("crash_victim_sleeper", "crash_victim_hang"):
    check(re.search(r"^\s+(\(anonymous namespace\)::)?%s\(\) at .*crash_victim\.cpp:\d+" % fn, text, re.M)
          is not None, "hang: symbolized frames name %s" % fn, text)

# The same through `ddprun --crash-report`, SIGQUIT sent to the whole process group (each rank
# gets it from there and from ddprun, which passes it on): each rank's report once, each other
# thread answering once; ddprun stays to pass the frames on and names the signal (exit 128 + 3).
rc, out, took = signal_when_ready([ddprun, "--crash-report", "--nproc-per-node", "2", victim, "hang"],
                                  "crash_victim: hanging", 2, signal.SIGQUIT, {"DDP_TIMEOUT": "20s"},
                                  whole_group=True)
check(rc == 128 + signal.SIGQUIT, "ddprun, hang: exit 131 (got %s)" % rc, out)
check("ddprun: got signal %d, forwarding it to every rank" % signal.SIGQUIT in out,
      "ddprun, hang: says it passed SIGQUIT on", out)
for r in (0, 1):
    check(len(re.findall(r"^\[%d\] ddp crash report: pid \d+, thread \d+: SIGQUIT: the frames" % r, out, re.M)) == 1
          and len(re.findall(r"^\[%d\] ddp crash report: pid \d+, thread \d+: frames$" % r, out, re.M)) == 1
          and re.search(r"^\[%d\] ddp crash report: pid \d+: module " % r, out, re.M) is not None,
          "ddprun, hang: rank %d's report once, its sleeper's frames once, then the module lines" % r, out)

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

# Other faults the kernel reports: a division by zero, an illegal instruction (x86-64's ud2).
rc, out = run([victim, "fpe"])
expect_report("fpe", rc, out, signal.SIGFPE, ["crash_victim_divide", "main"], fault=True)
check("FPE_INTDIV" in out, "fpe: the code named", out)
if platform.machine() == "x86_64":
    rc, out = run([victim, "ill"])
    expect_report("ill", rc, out, signal.SIGILL, ["crash_victim_trap", "main"], fault=True)

# A call through a null function pointer: the fault is outside every file, and the report names
# the caller (the unwinder alone stops at the signal frame).
rc, out = run([victim, "nullfn"])
check(rc == -signal.SIGSEGV, "nullfn: died of SIGSEGV (got rc %s)" % rc, out)
check("outside any loaded file: a call through a bad function pointer?" in out, "nullfn: says what it likely was",
      out)
src, text = symbolized(out)
check(re.search(r"crash_victim_call_null\(\) at .*crash_victim\.cpp:\d+", text) is not None,
      "nullfn: the caller of the bad call symbolized", text)

# A program that installs its own handler later and passes the signal on to the preload's: one
# report, and the process still dies of its signal (no loop between the two handlers).
rc, out = run([victim, "chain"], timeout=20)
check(rc == -signal.SIGSEGV, "chain: died of SIGSEGV (got %s)" % rc, out)
check(out.count("the program's own handler, passing the signal on") == 1, "chain: the program's handler ran once",
      out)
check(len(re.findall(r"ddp crash report: pid \d+, thread \d+: SIGSEGV", out)) == 1, "chain: one report", out)

# A crash while another thread holds the loader's lock (its library's initializer is running): the
# report must not wait for the lock (dladdr would, for the initializer's 30 s).
started = time.monotonic()
rc, out = run([victim, "dlopen_lock", slow_init], timeout=60)
took = time.monotonic() - started
expect_report("dlopen_lock", rc, out, signal.SIGSEGV, ["crash_victim_null_write", "crash_victim_caller"],
              fault_line)
check(took < 10, "dlopen_lock: reported and died within 10 s, not after the loader's lock (took %.1f s)" % took)

# What scripts/dev/gpu-check does: the binary that ran is a stripped copy under .gpu-carry/bin, the
# log comes back, and symbolize-crash finds the unstripped original in the build by its build ID.
# A different file in that place (a rebuild) is refused, with a note saying why.
scratch = tempfile.mkdtemp(prefix="crash_report.")
try:
    carried = os.path.join(scratch, ".gpu-carry", "bin", "tests", os.path.basename(victim))
    os.makedirs(os.path.dirname(carried))
    shutil.copy(victim, carried)
    subprocess.run(["strip", "--strip-debug", carried], check=True)
    rc, out = run([carried, "segv"])
    check(rc == -signal.SIGSEGV and os.path.realpath(carried) in out, "carried: the stripped copy reported by its path", out)
    build_root = os.path.dirname(os.path.dirname(os.path.abspath(victim)))  # .../tests/crash_victim
    src, text = symbolized(out, build=build_root, cwd="/")
    check(re.search(r"crash_victim_null_write\(\) at .*crash_victim\.cpp:%d\b" % fault_line, text) is not None,
          "carried: symbolized through the build's unstripped copy", text)
    other = os.path.join(scratch, "other-build")
    os.makedirs(os.path.join(other, "tests"))
    shutil.copy(ddprun, os.path.join(other, "tests", os.path.basename(victim)))
    src, text = symbolized(out, build=other, cwd="/")
    check("crash_victim_null_write" not in text and "no copy with line tables and build ID" in text,
          "carried: a file with another build ID is not used, and a note says so", text)
finally:
    shutil.rmtree(scratch, ignore_errors=True)

# A program linked without a build ID: symbolized from the file found, with a note that the
# match is unverified (it may have been rebuilt since).
rc, out = run([victim_no_id, "segv"])
check(rc == -signal.SIGSEGV and re.search(r": module \S*%s build-id" % re.escape(os.path.basename(victim_no_id)),
                                          out) is None, "no build ID: died, no build ID line for the victim", out)
src, text = symbolized(out)
check(re.search(r"crash_victim_null_write\(\) at .*crash_victim\.cpp:%d\b" % fault_line, text) is not None
      and "names no build ID for it" in text, "no build ID: symbolized, with a note that it is unverified", text)

# A rank of a ddprun job (what scripts/dev/gpu-check runs): the preload reaches the ranks, the
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

# `ddprun --crash-report` preloads it itself (no LD_PRELOAD given), after what the user preloads.
rc, out = run([ddprun, "--crash-report", "--nproc-per-node", "2", victim, "rank1_segv"], preload=False,
              extra_env={"DDP_TIMEOUT": "20s"})
check(rc != 0 and len(frames(out)) >= 3 and all(l.lstrip().startswith("[1]") for l in frames(out)),
      "ddprun --crash-report: rank 1's frames (rc %s)" % rc, out)
rc, out = run([ddprun, "--crash-report", "--no-prefix", "sh", "-c", 'echo "preload=$LD_PRELOAD"'], preload=False,
              extra_env={"LD_PRELOAD": "libm.so.6"})
check(rc == 0 and re.search(r"^preload=libm\.so\.6 \S+/libddp_crash_report\.so$", out, re.M) is not None,
      "ddprun --crash-report: the user's preload kept, first", out)

# Installed: `cmake --install` puts the library where the installed ddprun looks (lib/ddp).
if install_from != "-":
    prefix = tempfile.mkdtemp(prefix="crash_report_install.")
    try:
        p = subprocess.run(["cmake", "--install", install_from, "--prefix", prefix], capture_output=True, text=True,
                           timeout=120)
        check(p.returncode == 0, "install: cmake --install exit 0", p.stdout + p.stderr)
        rc, out = run([os.path.join(prefix, "bin", "ddprun"), "--crash-report", "--no-prefix", victim, "segv"],
                      preload=False)
        check(rc != 0 and len(frames(out)) >= 3,
              "install: the installed ddprun preloads the installed library (rc %s)" % rc, out)
        installed = [os.path.join(d, f) for d, _, fs in os.walk(prefix) for f in fs if f == "libddp_crash_report.so"]
        check(len(installed) == 1 and installed[0].endswith("/ddp/libddp_crash_report.so"),
              "install: one libddp_crash_report.so, in <libdir>/ddp", repr(installed))
        for path in installed:
            os.remove(path)
        rc, out = run([os.path.join(prefix, "bin", "ddprun"), "--crash-report", "true"], preload=False)
        check(rc == 2 and "--crash-report: libddp_crash_report.so is neither at" in out,
              "install: without the library, --crash-report says where it looked (rc %s)" % rc, out)
    finally:
        shutil.rmtree(prefix, ignore_errors=True)

# Input without a report: symbolize-crash says so (exit 1) and passes the text through.
src, text = symbolized("no crash here\n")
check(src == 1 and "no crash here" in text and "no crash report frames" in text,
      "symbolize-crash on a log without frames: exit 1 and says so (got %d)" % src, text)

if failures:
    print("\n\n".join("FAILED: " + f for f in failures))
    sys.exit(1)
print("tools.crash_report: all cases passed")
