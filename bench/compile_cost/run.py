#!/usr/bin/env python3
"""What a translation unit that uses ddp costs to compile, against a yardstick.

Compiles each unit below with g++ -O2 (the flags a user's Release build has), in
both of ddp's forms: header-only (the default) and separately compiled
(DDP_SEPARATE_COMPILATION: the runtime compiled once, in src/runtime.cpp, and
for LibTorch files the adapter too, in src/torch_runtime.cpp; both are timed).
Rounds are interleaved, so every unit sees the same noisy machine; each line
is the median of the rounds, and each ratio the median of the rounds' ratios
(a round's units see the same load; medians of separate samples need not).
The yardstick is a small nlohmann/json program (Debian nlohmann-json3-dev),
compiled in the same rounds. One JSON line per unit and form:
  {"unit", "form", "cpu_s", "peak_mib", "ratio" (cpu_s / the yardstick's), "rounds"}
and, for the LibTorch unit, "ratio_to_torch_alone" (against the same file without ddp).

    python3 bench/compile_cost/run.py [--rounds 3] [--units quickstart,logistic] [--cxx g++]

Goals and the figures: docs/performance.md, "Compile cost".
"""
import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
EIGEN = "/usr/include/eigen3"
TORCH = ["-isystem", "/usr/include/torch/csrc/api/include", "-D_GLIBCXX_USE_CXX11_ABI=1"]

# name -> (source, extra flags, needs)
UNITS = {
    "yardstick_json": (HERE / "yardstick_json.cpp", [], "/usr/include/nlohmann/json.hpp"),
    "include_only": (HERE / "include_only.cpp", [], None),
    "quickstart": (ROOT / "examples/quickstart/train.cpp", [], None),
    "logistic": (HERE / "logistic.cpp", [], None),
    "fashion_mnist": (ROOT / "examples/fashion_mnist/main.cpp", [], "/usr/include/CLI/CLI.hpp"),
    "torch_alone": (HERE / "torch_module.cpp", TORCH, "/usr/include/torch/csrc/api/include/torch/torch.h"),
    "torch_ddp": (HERE / "torch_module.cpp", TORCH + ["-DWITH_DDP"], "/usr/include/torch/csrc/api/include/torch/torch.h"),
    "runtime": (ROOT / "src/runtime.cpp", ["-DDDP_SEPARATE_COMPILATION"], None),
    "torch_runtime": (ROOT / "src/torch_runtime.cpp", TORCH + ["-DDDP_SEPARATE_COMPILATION"],
                      "/usr/include/torch/csrc/api/include/torch/torch.h"),
}
# Units that do not include ddp, or are a runtime itself, have one form.
ONE_FORM = {"yardstick_json": "none", "torch_alone": "none", "runtime": "runtime", "torch_runtime": "runtime"}


def compile_once(cxx, source, flags, out):
    """(cpu seconds, peak MiB) of one compile, from GNU time."""
    cmd = ["/usr/bin/time", "-f", "%U %S %M", cxx, "-std=c++20", "-O2", "-DNDEBUG", f"-I{ROOT / 'include'}",
           "-isystem", EIGEN, *flags, "-c", str(source), "-o", out]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"compile_cost: {source} failed:\n{r.stderr[-3000:]}")
    user, system, kib = r.stderr.strip().splitlines()[-1].split()
    return float(user) + float(system), int(kib) / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--units", default=",".join(UNITS))
    ap.add_argument("--cxx", default=os.environ.get("CXX", "g++"))
    args = ap.parse_args()
    if not os.path.exists("/usr/bin/time"):
        sys.exit("compile_cost: needs GNU time (Debian package time)")
    wanted = ["yardstick_json"] + [u for u in args.units.split(",") if u != "yardstick_json"]
    cases = []
    for unit in wanted:
        source, flags, needs = UNITS[unit]
        if needs and not os.path.exists(needs):
            print(json.dumps({"unit": unit, "skipped": f"{needs} is missing"}), flush=True)
            continue
        if unit in ONE_FORM:
            cases.append((unit, ONE_FORM[unit], flags))
        else:
            cases.append((unit, "header_only", flags))
            cases.append((unit, "separate", flags + ["-DDDP_SEPARATE_COMPILATION"]))
    samples = {(u, f): [] for u, f, _ in cases}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = cases if r % 2 == 0 else list(reversed(cases))
            for unit, form, flags in order:
                samples[(unit, form)].append(compile_once(args.cxx, UNITS[unit][0], flags, f"{tmp}/{unit}.o"))
    med = {k: (statistics.median(c for c, _ in v), max(m for _, m in v)) for k, v in samples.items()}

    def ratio(key, base):
        return round(statistics.median(c / b for (c, _), (b, _) in zip(samples[key], samples[base])), 2)

    for unit, form, _ in cases:
        cpu, mib = med[(unit, form)]
        row = {"unit": unit, "form": form, "cpu_s": round(cpu, 2), "peak_mib": round(mib),
               "ratio": ratio((unit, form), ("yardstick_json", "none")), "rounds": args.rounds}
        if unit == "torch_ddp" and ("torch_alone", "none") in med:
            row["ratio_to_torch_alone"] = ratio((unit, form), ("torch_alone", "none"))
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
