#!/usr/bin/env python3
"""Layering of include/ddp: internals never reach back up into the public API.

A header under include/ddp/detail/ may include only other detail/ headers and
the few public headers that sit below everything (config, error, op, tensor,
model, work), plus, for the internals of one owner, the public contracts that
owner implements (OWNER_PUBLIC: the reducer's pieces sit on the communicator
concept and ddp_options; the peer-failure watch on the store). Exits 1 naming
every include that breaks the rule.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2] / "include"
ALLOWED_PUBLIC = {"ddp/config.hpp", "ddp/error.hpp", "ddp/op.hpp", "ddp/tensor.hpp", "ddp/model.hpp", "ddp/work.hpp"}
OWNER_PUBLIC = {
    "data_parallel": {"ddp/backend/communicator.hpp", "ddp/bucketing.hpp", "ddp/data_parallel/options.hpp"},
    "process_group": {"ddp/store.hpp"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](ddp/[^>"]+)[>"]', re.M)

bad = []
for header in sorted((ROOT / "ddp" / "detail").rglob("*.hpp")):
    owner = header.relative_to(ROOT / "ddp" / "detail").parts[0]
    for target in INCLUDE.findall(header.read_text()):
        if not (target.startswith("ddp/detail/") or target in ALLOWED_PUBLIC | OWNER_PUBLIC.get(owner, set())):
            bad.append(f"{header.relative_to(ROOT)} includes <{target}>, a public header above it")
for line in bad:
    print(line)
print(f"{len(bad)} layering violation(s)" if bad else "layering ok: detail/ includes only detail/, the base headers and its owner's contracts")
sys.exit(1 if bad else 0)
