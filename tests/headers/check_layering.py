#!/usr/bin/env python3
"""Layering of include/ddp: a path says whether a header is public or internal.

Rules (exit 1 naming every break):
1. Internals never reach back up into the public API: a header under
   include/ddp/detail/ may include only other detail/ headers, the few public
   headers that sit below everything (config, error, op, tensor, model, work)
   and, for the internals of one owner, the public contracts that owner
   implements (OWNER_PUBLIC: the reducer's pieces sit on the communicator
   concept, the bucketing and reduction policies, ddp_options and the gradient sink, as do LibTorch's hooks and the shard engine; the peer-failure watch and the rendezvous
   building on the store, the topology and the rendezvous, as does the
   survivors' meeting of in-process recovery; the Gloo
   communicator on the rendezvous, the store and shm_array; NCCL's on the
   rendezvous and the store).
2. Internals live under detail/: a header outside it may use namespace detail
   for small helpers (functions, concepts, constants, aliases) but defines no
   class, struct or union there, except the ones DETAIL_CLASS_EXCEPTIONS lists
   with the reason each stays.
3. A header's include guard spells its path: include/ddp/a/b_c.hpp opens with
   #ifndef DDP_A_B_C_HPP / #define DDP_A_B_C_HPP and ends with
   #endif // DDP_A_B_C_HPP (the generated single header keeps the guards, so a
   later <ddp/...> include of the same file is a no-op; two files sharing a
   guard would hide one).
4. The examples are what users copy: they include only public headers (none
   under detail/) and never name ddp::detail.
5. The runtime's definitions (x-inl.hpp) are reached only through their own
   header x.hpp, under #if DDP_DETAIL_DEFINE_RUNTIME (the LibTorch adapter's
   under #if DDP_DETAIL_DEFINE_TORCH_RUNTIME) or from another -inl.hpp:
   a file compiled with DDP_SEPARATE_COMPILATION then parses none of them
   (detail/common/linkage.hpp), and tools/amalgamate.py moves them together to
   the end of the single header.
6. <ddp/ddp.hpp> is the core: it reaches none of the optional features
   (OPTIONAL_FEATURES, each in its own header, which a file that uses it
   includes), and <ddp/all.hpp> includes every one of them, so that it and the
   single header built from it still offer everything.
"""
import pathlib
import re
import sys

REPO = pathlib.Path(__file__).resolve().parents[2]
ROOT = REPO / "include"
DDP = ROOT / "ddp"
ALLOWED_PUBLIC = {"ddp/config.hpp", "ddp/error.hpp", "ddp/op.hpp", "ddp/tensor.hpp", "ddp/model.hpp", "ddp/work.hpp"}
OWNER_PUBLIC = {
    "data_parallel": {"ddp/backend/communicator.hpp", "ddp/bucketing.hpp", "ddp/data_parallel/options.hpp",
                      "ddp/data_parallel/gradient_sink.hpp", "ddp/reduction.hpp"},
    "torch": {"ddp/data_parallel/gradient_sink.hpp"},
    "sharded": {"ddp/backend/communicator.hpp"},
    "process_group": {"ddp/backend/communicator.hpp", "ddp/store.hpp", "ddp/topology.hpp"},
    "elastic": {"ddp/backend/communicator.hpp", "ddp/store.hpp", "ddp/topology.hpp"},
    "gloo": {"ddp/backend/communicator.hpp", "ddp/store.hpp", "ddp/shm_array.hpp"},
    "nccl": {"ddp/backend/communicator.hpp", "ddp/store.hpp"},
}
# (public header, class in namespace detail) -> why it stays there.
DETAIL_CLASS_EXCEPTIONS = {
    ("data/reader.hpp", "byte_reader"): "ddp::data's own internals (zlib), which the core's detail/ never needs",
    ("model.hpp", "parameter_probe"): "a probe type for the model concept, defined where the concept is",
    ("model.hpp", "buffer_probe"): "a probe type for the model concept, defined where the concept is",
    ("shm_array.hpp", "shm_memory"): "what a backend makes for make_shm_array<T> before it is typed, beside the template that types it",
    ("sampler.hpp", "shuffle_buffer_allocator"): "used only by this file's shuffles; a candidate for detail/",
    ("tensor.hpp", "contiguous_container_traits"): "the base the public tensor_traits specializations derive from",
    ("work.hpp", "work_state"): "the shared state of ddp::work, defined beside it (a base header detail/ uses)",
}
# Rule 6: features outside the core umbrella, each reached through its own header.
OPTIONAL_FEATURES = {"ddp/checkpoint.hpp", "ddp/elastic.hpp", "ddp/global_batches.hpp", "ddp/hybrid_groups.hpp",
                     "ddp/sharded_data_parallel.hpp", "ddp/step_batches.hpp", "ddp/sync_batch_stats.hpp"}
# Headers with a check after their guard (it runs again each time they are included), and
# the comment that opens it.
CHECKED_AFTER_GUARD = {"ddp/detail/common/linkage.hpp": "// Outside the guard"}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](ddp/[^>"]+)[>"]', re.M)
GUARD_OPEN = re.compile(r"^#ifndef (\w+)\n#define (\w+)$", re.M)


def guard_problem(header):
    """Why a header's include guard does not spell its path, or None if it does."""
    want = re.sub(r"[^A-Za-z0-9]", "_", header.relative_to(ROOT).as_posix()).upper()
    text = header.read_text()
    m = GUARD_OPEN.search(text)
    if not m or any(line.strip() and not line.startswith("//") for line in text[: m.start()].splitlines()):
        return f"has no include guard before its code (want {want})"
    if m.group(1) != want or m.group(2) != want:
        return f"has include guard {m.group(1)}/{m.group(2)}, want {want}"
    if header.relative_to(ROOT).as_posix() in CHECKED_AFTER_GUARD:
        text = text[: text.index(CHECKED_AFTER_GUARD[header.relative_to(ROOT).as_posix()])]
    last = text.rstrip().splitlines()[-1]
    if last != f"#endif // {want}":
        return f"ends with `{last}`, want `#endif // {want}`"
    return None


def detail_classes(text):
    """Names of the classes, structs and unions defined at the top of each namespace detail block."""
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r'"(?:\\.|[^"\\\n])*"', '""', text)
    text = re.sub(r"'(?:\\.|[^'\\\n])*'", "''", text)
    token = re.compile(r"\{|\}|\b(?:class|struct|union)\s+(\w+)(?:\s+final)?\s*(?::[^;{]*)?\{")
    names = []
    for block in re.finditer(r"\bnamespace\s+detail\s*\{", text):
        depth, pos = 0, block.end()
        while depth >= 0:
            m = token.search(text, pos)
            if not m:
                break
            if m.group(0) == "{":
                depth += 1
            elif m.group(0) == "}":
                depth -= 1
            else:
                if depth == 0:
                    names.append(m.group(1))
                depth += 1
            pos = m.end()
    return names


# The LibTorch adapter's definitions have a condition of their own (detail/torch/linkage.hpp):
# its headers' under DDP_DETAIL_DEFINE_TORCH_RUNTIME, every other's under DDP_DETAIL_DEFINE_RUNTIME.
RUNTIME_INCLUDE = re.compile(r"^#if DDP_DETAIL_DEFINE_(TORCH_)?RUNTIME\n#include <(ddp/[^>]+-inl\.hpp)>\n#endif$", re.M)


def is_torch_header(rel):
    return rel.startswith(("detail/torch/", "torch/"))


def runtime_include_problems(rel, text):
    """Rule 5: where a header reaches -inl.hpp headers other than as rule 5 allows."""
    if rel.endswith("-inl.hpp"):
        return []
    found = RUNTIME_INCLUDE.findall(text)
    guarded = [t for _, t in found]
    want = "DDP_DETAIL_DEFINE_TORCH_RUNTIME" if is_torch_header(rel) else "DDP_DETAIL_DEFINE_RUNTIME"
    problems = [f"includes <{t}> under DDP_DETAIL_DEFINE_{torch}RUNTIME, not {want}"
                for torch, t in found if bool(torch) != is_torch_header(rel)]
    problems += [f"includes <{t}>, the definitions of another header" for t in guarded if t != f"ddp/{rel[:-4]}-inl.hpp"]
    loose = [t for t in INCLUDE.findall(text) if t.endswith("-inl.hpp")]
    if len(loose) != len(guarded):
        problems.append("includes an -inl.hpp header outside #if DDP_DETAIL_DEFINE_RUNTIME (or _TORCH_RUNTIME)")
    if (DDP / f"{rel[:-4]}-inl.hpp").exists() and not guarded:
        problems.append(f"does not include its definitions <ddp/{rel[:-4]}-inl.hpp> under #if DDP_DETAIL_DEFINE_RUNTIME")
    return problems


bad = []
headers = sorted(DDP.rglob("*.hpp"))
for header in headers:
    rel = header.relative_to(DDP).as_posix()
    problem = guard_problem(header)
    if problem:
        bad.append(f"ddp/{rel} {problem}")
    for problem in runtime_include_problems(rel, header.read_text()):
        bad.append(f"ddp/{rel} {problem}")
    if rel.startswith("detail/"):
        owner = header.relative_to(DDP / "detail").parts[0]
        for target in INCLUDE.findall(header.read_text()):
            if not (target.startswith("ddp/detail/") or target in ALLOWED_PUBLIC | OWNER_PUBLIC.get(owner, set())):
                bad.append(f"ddp/{rel} includes <{target}>, a public header above it")
        continue
    for name in detail_classes(header.read_text()):
        if (rel, name) not in DETAIL_CLASS_EXCEPTIONS:
            bad.append(f"ddp/{rel} defines detail::{name}: internals live under detail/ (or list it, with the reason)")
for rel, name in sorted(DETAIL_CLASS_EXCEPTIONS):
    if not (DDP / rel).exists() or name not in detail_classes((DDP / rel).read_text()):
        bad.append(f"exception ({rel}, {name}) is stale: remove it from DETAIL_CLASS_EXCEPTIONS")
for source in sorted((REPO / "examples").rglob("*")):
    if source.suffix not in {".hpp", ".cpp", ".cu", ".cuh", ".h"}:
        continue
    text = source.read_text()
    for target in INCLUDE.findall(text):
        if target.startswith("ddp/detail/"):
            bad.append(f"{source.relative_to(REPO)} includes <{target}>: examples include only public headers")
    if "ddp::detail" in text:
        bad.append(f"{source.relative_to(REPO)} names ddp::detail: examples use only the public API")


def reached(rel):
    """Every ddp header that `rel` includes, directly or not (conditional includes too)."""
    seen, todo = set(), [rel]
    while todo:
        for target in INCLUDE.findall((ROOT / todo.pop()).read_text()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


for feature in sorted(reached("ddp/ddp.hpp") & OPTIONAL_FEATURES):
    bad.append(f"ddp/ddp.hpp reaches <{feature}>, an optional feature: include it from <ddp/all.hpp> instead")
for feature in sorted(OPTIONAL_FEATURES - set(INCLUDE.findall((DDP / "all.hpp").read_text()))):
    bad.append(f"ddp/all.hpp does not include <{feature}>: the convenience header offers every feature")
for line in bad:
    print(line)
print(
    f"{len(bad)} layering violation(s)"
    if bad
    else f"layering ok: detail/ stays below the API, no detail class outside it beyond "
    f"{len(DETAIL_CLASS_EXCEPTIONS)} listed, {len(headers)} include guards spell their paths, definitions behind their headers, examples public only, "
    f"the core umbrella without the {len(OPTIONAL_FEATURES)} optional features"
)
sys.exit(1 if bad else 0)
