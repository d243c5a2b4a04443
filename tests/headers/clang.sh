#!/bin/sh
# ddp under clang (the main suite builds with GCC): each public header alone (an -inl
# header alone is its own header alone: it includes that first), the
# quick start and the runtime compiled once, both forms, with ddp's warnings as errors.
# usage: clang.sh CLANGXX DDP_SOURCE_DIR [include flags...]
set -eu
cxx=$1; src=$2; shift 2
# clang's -Wconversion also warns on sign changes, GCC's (C++) does not: one standard for both.
flags="-std=c++20 -Wall -Wextra -Wconversion -Wno-sign-conversion -Wshadow -Werror -I$src/include $*"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0
for h in $(cd "$src/include" && ls ddp/*.hpp ddp/*/*.hpp | grep -v -e torch -e nccl -e cuda -e device_ -e runtime.hpp -e -inl.hpp); do
  printf '#include <%s>\n' "$h" > "$tmp/alone.cpp"
  $cxx $flags -fsyntax-only "$tmp/alone.cpp" || { echo "FAIL: <$h> alone"; exit 1; }
  n=$((n + 1))
done
# Code generation too (templates instantiated), at -O0: the quick start in both forms and the runtime.
$cxx $flags -O0 -c "$src/examples/quickstart/train.cpp" -o "$tmp/header_only.o"
$cxx $flags -O0 -DDDP_SEPARATE_COMPILATION -c "$src/examples/quickstart/train.cpp" -o "$tmp/separate.o"
$cxx $flags -O0 -DDDP_SEPARATE_COMPILATION -c "$src/src/runtime.cpp" -o "$tmp/runtime.o"
$cxx "$tmp/separate.o" "$tmp/runtime.o" -o "$tmp/quickstart" -lgloo -lcrypto -pthread
echo "ok: $n public headers alone, the quick start (both forms) and the runtime compile and link under $($cxx --version | head -n 1)"
