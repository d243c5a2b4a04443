#!/usr/bin/env python3
"""Builds single_include/ddp/ddp.hpp from include/ddp/all.hpp.

The single header offers everything: the core (<ddp/ddp.hpp>) and every optional
feature, as <ddp/all.hpp> does; it keeps the name ddp.hpp so that users of it
change nothing.

Every `#include <ddp/...>` is replaced by that header's text, each header once,
in the order the umbrella first reaches it (so dependencies come first). System
and third-party includes are left as they are. Include guards stay, so a
program may still include a single header from include/ after this one.

The runtime's definitions (the `-inl.hpp` headers, each included by its header
under `#if DDP_DETAIL_DEFINE_RUNTIME`) go together to the end, in one such block:
a translation unit that defines DDP_SEPARATE_COMPILATION then parses none of
them, and the one that also defines DDP_IMPLEMENTATION compiles them all.

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
RUNTIME_IF = "#if DDP_DETAIL_DEFINE_RUNTIME\n"


def version() -> str:
    text = (INCLUDE / "ddp" / "config.hpp").read_text()
    parts = [re.search(rf"#define DDP_VERSION_{p} (\d+)", text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


IF = re.compile(r"^\s*#\s*if")
ENDIF = re.compile(r"^\s*#\s*endif")


def inline(rel: str, seen: set, out: list, deferred: list, region: set | None = None) -> None:
    """Inlines `rel` once. `region`: None where the text is always compiled; else the set of
    what a conditional region (an #if of the includer's beyond its guard) has inlined itself. A
    header first reached there is inlined there and again where it is next reached outside
    (its guard keeps that a no-op when both are compiled): otherwise a file without the
    condition would miss it."""
    if rel in seen or (region is not None and rel in region):
        return
    (seen if region is None else region).add(rel)
    path = INCLUDE / rel
    if not path.exists():
        sys.exit(f"amalgamate: {rel} is included but {path} does not exist")
    out.append(f"// ---- begin {rel} ----\n")
    lines = path.read_text().splitlines(keepends=True)
    depth = 0  # #if nesting in this file; 1 is its include guard
    inner = region  # the region of the conditional block open at depth >= 2
    i = 0
    while i < len(lines):
        line = lines[i]
        m = DDP_INCLUDE.match(lines[i + 1]) if line == RUNTIME_IF and i + 2 < len(lines) else None
        if m and m.group(1).endswith("-inl.hpp") and lines[i + 2].startswith("#endif"):
            deferred.append(m.group(1))  # the runtime's definitions: to the block at the end
            i += 3
            continue
        if IF.match(line):
            depth += 1
            if depth == 2 and region is None:
                inner = set()
        elif ENDIF.match(line):
            depth -= 1
            if depth < 2:
                inner = region
        m = DDP_INCLUDE.match(line)
        if m:
            inline(m.group(1), seen, out, deferred, inner)
        else:
            out.append(line)
        i += 1
    out.append(f"// ---- end {rel} ----\n")


def amalgamate() -> str:
    out = [
        f"// ddp {version()} — single-header edition, generated from include/ddp/all.hpp:\n",
        "// everything, the core of <ddp/ddp.hpp> and every optional feature.\n",
        "// Do not edit: change include/ddp/ and run `python3 tools/amalgamate.py`.\n",
        "// Header-only distributed data-parallel training for C++20; needs Gloo and\n",
        "// OpenSSL's libcrypto (and optionally Eigen). Link: -lgloo -lcrypto -pthread.\n",
    ]
    seen, deferred = set(), []
    inline("ddp/all.hpp", seen, out, deferred)
    out.append("\n// The runtime's definitions: header-only, or the one file that defines it\n")
    out.append("// (ddp/detail/common/linkage.hpp).\n")
    out.append(RUNTIME_IF)
    runtime_region = set()
    while deferred:  # an -inl header may reach headers whose own -inl joins the list
        inline(deferred.pop(0), seen, out, deferred, runtime_region)
    out.append("#endif // DDP_DETAIL_DEFINE_RUNTIME\n")
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
