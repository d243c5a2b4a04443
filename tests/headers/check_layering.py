#!/usr/bin/env python3
"""Layering of include/ddp: a path says whether a header is public or internal.

Rules (exit 1 naming every break):
1. Internals never reach back up into the public API: a header under
   include/ddp/detail/ may include only other detail/ headers, the few public
   headers that sit below everything (config, error, op, tensor, model, work)
   and, for the internals of one owner, the public contracts that owner
   implements (OWNER_PUBLIC: the reducer's pieces sit on the communicator
   concept, the bucketing and reduction policies, ddp_options and the gradient sink, as do LibTorch's hooks and the shard engine; the peer-failure watch and the rendezvous
   building on the store, the topology and the rendezvous; the Gloo
   communicator on the rendezvous, the store and shm_array; NCCL's on the
   rendezvous and the store).
2. Internals live under detail/: a header outside it may use namespace detail
   for small helpers (functions, concepts, constants, aliases) but defines no
   class, struct or union there, except the ones DETAIL_CLASS_EXCEPTIONS lists
   with the reason each stays.
3. A forwarding header (an old path kept for one release) is nothing but its
   "// Deprecated: moved to <ddp/detail/...>" comment and the include of that
   header, which must exist.
4. The examples are what users copy: they include only public headers (none
   under detail/, no forwarding header) and never name ddp::detail.
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
    "gloo": {"ddp/backend/communicator.hpp", "ddp/store.hpp", "ddp/shm_array.hpp"},
    "nccl": {"ddp/backend/communicator.hpp", "ddp/store.hpp"},
}
# (public header, class in namespace detail) -> why it stays there.
DETAIL_CLASS_EXCEPTIONS = {
    ("data/reader.hpp", "byte_reader"): "ddp::data's own internals (zlib), which the core's detail/ never needs",
    ("model.hpp", "parameter_probe"): "a probe type for the model concept, defined where the concept is",
    ("model.hpp", "buffer_probe"): "a probe type for the model concept, defined where the concept is",
    ("sampler.hpp", "shuffle_buffer_allocator"): "used only by this file's shuffles; a candidate for detail/",
    ("tensor.hpp", "contiguous_container_traits"): "the base the public tensor_traits specializations derive from",
    ("work.hpp", "work_state"): "the shared state of ddp::work, defined beside it (a base header detail/ uses)",
}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](ddp/[^>"]+)[>"]', re.M)
FORWARD = re.compile(
    r"\A// Deprecated: moved to <(ddp/detail/[^>]+)>;\n// this forwarding header goes in the next release\.\n"
    r"#include <(ddp/detail/[^>]+)>\n\Z"
)


def forwarding_target(header):
    """The detail/ header a forwarding header names, or None if it is not one."""
    text = header.read_text()
    if not text.startswith("// Deprecated: moved to"):
        return None
    m = FORWARD.match(text)
    return m.group(1) if m and m.group(1) == m.group(2) else ""


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


bad = []
forwarding = set()
for header in sorted(DDP.rglob("*.hpp")):
    rel = header.relative_to(DDP).as_posix()
    if rel.startswith("detail/"):
        owner = header.relative_to(DDP / "detail").parts[0]
        for target in INCLUDE.findall(header.read_text()):
            if not (target.startswith("ddp/detail/") or target in ALLOWED_PUBLIC | OWNER_PUBLIC.get(owner, set())):
                bad.append(f"ddp/{rel} includes <{target}>, a public header above it")
        continue
    target = forwarding_target(header)
    if target is not None:
        forwarding.add(f"ddp/{rel}")
        if not target:
            bad.append(f"ddp/{rel} starts like a forwarding header but holds more than the comment and its include")
        elif not (ROOT / target).exists():
            bad.append(f"ddp/{rel} forwards to <{target}>, which does not exist")
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
        if target.startswith("ddp/detail/") or target in forwarding:
            bad.append(f"{source.relative_to(REPO)} includes <{target}>: examples include only public headers")
    if "ddp::detail" in text:
        bad.append(f"{source.relative_to(REPO)} names ddp::detail: examples use only the public API")
for line in bad:
    print(line)
print(
    f"{len(bad)} layering violation(s)"
    if bad
    else f"layering ok: detail/ stays below the API, no detail class outside it beyond "
    f"{len(DETAIL_CLASS_EXCEPTIONS)} listed, {len(forwarding)} forwarding headers, examples public only"
)
sys.exit(1 if bad else 0)
