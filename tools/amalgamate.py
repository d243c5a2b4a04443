#!/usr/bin/env python3
"""Builds single_include/ddp/ddp.hpp from include/ddp/ddp.hpp.

Every `#include <ddp/...>` is replaced by that header's text, each header once,
in the order the umbrella first reaches it (so dependencies come first). System
and third-party includes are left as they are. Include guards stay, so a
program may still include a single header from include/ after this one.

    python3 tools/amalgamate.py            # regenerate
    python3 tools/amalgamate.py --check    # exit 1 if the committed file is stale
"""
import argparse
import difflib
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
INCLUDE = ROOT / "include"
OUTPUT = ROOT / "single_include" / "ddp" / "ddp.hpp"
DDP_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"](ddp/[^>"]+)[>"]')


def version() -> str:
    text = (INCLUDE / "ddp" / "config.hpp").read_text()
    parts = [re.search(rf"#define DDP_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def inline(rel: str, seen: set, out: list) -> None:
    if rel in seen:
        return
    seen.add(rel)
    path = INCLUDE / rel
    if not path.exists():
        sys.exit(f"amalgamate: {rel} is included but {path} does not exist")
    out.append(f"// ---- begin {rel} ----\n")
    for line in path.read_text().splitlines(keepends=True):
        m = DDP_INCLUDE.match(line)
        if m:
            inline(m.group(1), seen, out)
        else:
            out.append(line)
    out.append(f"// ---- end {rel} ----\n")


def amalgamate() -> str:
    out = [
        f"// ddp {version()} — single-header edition, generated from include/ddp/ddp.hpp.\n",
        "// Do not edit: change include/ddp/ and run `python3 tools/amalgamate.py`.\n",
        "// Header-only distributed data-parallel training for C++20; needs Gloo and\n",
        "// OpenSSL's libcrypto (and optionally Eigen). Link: -lgloo -lcrypto -pthread.\n",
    ]
    inline("ddp/ddp.hpp", set(), out)
    return "".join(out)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    parser.add_argument("--output", type=pathlib.Path, default=OUTPUT)
    args = parser.parse_args()
    text = amalgamate()
    if args.check:
        current = args.output.read_text() if args.output.exists() else ""
        if current != text:
            diff = difflib.unified_diff(current.splitlines(), text.splitlines(), "committed", "generated", lineterm="", n=1)
            print("\n".join(list(diff)[:40]))
            print(f"\n{args.output} is out of date: run `python3 tools/amalgamate.py` and commit the result.")
            return 1
        print(f"{args.output} is up to date")
        return 0
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(text)
    print(f"wrote {args.output} ({len(text)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
