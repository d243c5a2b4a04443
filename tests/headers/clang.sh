#!/bin/sh
# ddp under clang (the main suite builds with GCC): every public header (an -inl header is
# reached through its own header) in one translation unit, the quick start and the runtime
# compiled once, both forms, with ddp's warnings as errors. That each header compiles alone
# is checked with GCC by the header_alone targets, on the same standard library: one clang
# parse of them all costs about what <ddp/all.hpp> alone does, where 35 parses cost most of
# this test (see docs/performance.md, Build and test costs).
# usage: clang.sh CLANGXX DDP_SOURCE_DIR [include flags...]
set -eu
cxx=$1; src=$2; shift 2
# clang's -Wconversion also warns on sign changes, GCC's (C++) does not: one standard for both.
flags="-std=c++20 -Wall -Wextra -Wconversion -Wno-sign-conversion -Wshadow -Werror -I$src/include $*"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
: > "$tmp/all.cpp"
for h in $(cd "$src/include" && ls ddp/*.hpp ddp/*/*.hpp | grep -v -e torch -e nccl -e cuda -e device_ -e runtime.hpp -e -inl.hpp); do
  printf '#include <%s>\n' "$h" >> "$tmp/all.cpp"
  n=$((n + 1))
done
$cxx $flags -fsyntax-only "$tmp/all.cpp" || { echo "FAIL: the public headers together (list: $tmp/all.cpp)"; cat "$tmp/all.cpp"; exit 1; }
# Code generation too (templates instantiated), at -O0: the quick start in both forms and the runtime.
$cxx $flags -O0 -c "$src/examples/quickstart/train.cpp" -o "$tmp/header_only.o"
$cxx $flags -O0 -DDDP_SEPARATE_COMPILATION -c "$src/examples/quickstart/train.cpp" -o "$tmp/separate.o"
$cxx $flags -O0 -DDDP_SEPARATE_COMPILATION -c "$src/src/runtime.cpp" -o "$tmp/runtime.o"
$cxx "$tmp/separate.o" "$tmp/runtime.o" -o "$tmp/quickstart" -lgloo -lcrypto -pthread
echo "ok: $n public headers, the quick start (both forms) and the runtime compile and link under $($cxx --version | head -n 1)"
