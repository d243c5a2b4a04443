#!/bin/sh
# Precompiles <ddp/ddp.hpp> once for the compile-fail cases that start with it (check.sh
# --precompiled): they are front-end errors, and parsing the headers is most of what each
# case costs (see docs/performance.md, Build and test costs).
# usage: precompile.sh CXX HEADER [compiler flags...]   (the flags check.sh gets)
#        precompile.sh --remove HEADER                  (the fixture's cleanup)
# Writes HEADER (one line: #include <ddp/ddp.hpp>) and HEADER.gch beside it. GCC uses the
# .gch only where the flags match, and parses HEADER itself otherwise: the same text either
# way. A .gch is never checked against the headers it came from, so the cleanup removes it.
set -eu
if [ "$1" = --remove ]; then
  rm -f "$2" "$2.gch"
  exit 0
fi
cxx=$1; header=$2; shift 2
mkdir -p "$(dirname "$header")"
rm -f "$header.gch"
printf '#include <ddp/ddp.hpp>\n' > "$header"
"$cxx" -std=c++20 "$@" -x c++-header "$header" -o "$header.gch"
echo "ok: $header.gch ($(du -k "$header.gch" | cut -f1) KiB)"
