#!/usr/bin/env python3
"""Layering of include/ddp: internals never reach back up into the public API.

A header under include/ddp/detail/ may include only other detail/ headers and
the few public headers that sit below everything (config, error, op, tensor,
model, work). Exits 1 naming every include that breaks the rule.
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2] / "include"
ALLOWED_PUBLIC = {"ddp/config.hpp", "ddp/error.hpp", "ddp/op.hpp", "ddp/tensor.hpp", "ddp/model.hpp", "ddp/work.hpp"}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](ddp/[^>"]+)[>"]', re.M)

bad = []
for header in sorted((ROOT / "ddp" / "detail").rglob("*.hpp")):
    for target in INCLUDE.findall(header.read_text()):
        if not (target.startswith("ddp/detail/") or target in ALLOWED_PUBLIC):
            bad.append(f"{header.relative_to(ROOT)} includes <{target}>, a public header above it")
for line in bad:
    print(line)
print(f"{len(bad)} layering violation(s)" if bad else "layering ok: detail/ includes only detail/ and the base headers")
sys.exit(1 if bad else 0)
