#!/bin/sh
# Builds one consumer project the way a user would, then runs it on 2 ranks.
# usage: run.sh KIND DDP_SOURCE_DIR DDPRUN CXX
#   KIND: find_package | add_subdirectory | fetchcontent | single_header, header-only;
#         with the suffix _runtime, the runtime compiled once (ddp::runtime, or for
#         the single header a file of its own that defines DDP_IMPLEMENTATION)
set -eu
kind=${1%_runtime}; src=$2; ddprun=$3; cxx=$4
target="-DDDP_CONSUMER_TARGET=ddp::ddp"
separate=""
if [ "$kind" != "$1" ]; then
  target="-DDDP_CONSUMER_TARGET=ddp::runtime"
  separate="-DDDP_SEPARATE_COMPILATION"
fi
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ddp-consumer-$kind.XXXXXX")
trap 'rm -rf "$work"' EXIT
gen=""
command -v ninja >/dev/null && gen="-G Ninja"
case "$kind" in
  find_package)
    # Install ddp into a private prefix, as a package would.
    cmake -S "$src" -B "$work/ddp-build" $gen -DDDP_BUILD_TESTS=OFF -DDDP_BUILD_EXAMPLES=OFF \
          -DDDP_BUILD_BENCHMARKS=OFF -DDDP_BUILD_TOOLS=OFF -DCMAKE_INSTALL_PREFIX="$work/prefix" >/dev/null
    cmake --install "$work/ddp-build" >/dev/null
    cmake -S "$here/find_package" -B "$work/build" $gen -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_CXX_COMPILER="$cxx" "$target"
    ;;
  add_subdirectory)
    cmake -S "$here/add_subdirectory" -B "$work/build" $gen -DDDP_SOURCE_DIR="$src" -DCMAKE_CXX_COMPILER="$cxx" "$target"
    ;;
  fetchcontent)
    if ! git -C "$src" rev-parse HEAD >/dev/null 2>&1; then
      echo "SKIP: $src is not a git checkout"; exit 77
    fi
    cmake -S "$here/fetchcontent" -B "$work/build" $gen -DDDP_SOURCE_DIR="$src" \
          -DDDP_GIT_TAG="$(git -C "$src" rev-parse HEAD)" -DCMAKE_CXX_COMPILER="$cxx" "$target"
    ;;
  single_header)
    mkdir -p "$work/build"
    objects=""
    for f in main second; do
      "$cxx" -std=c++20 -O1 $separate -I"$src/single_include" -c "$here/common/$f.cpp" -o "$work/build/$f.o"
      objects="$objects $work/build/$f.o"
    done
    if [ -n "$separate" ]; then
      printf '#define DDP_IMPLEMENTATION\n#include <ddp/ddp.hpp>\n' > "$work/runtime.cpp"
      "$cxx" -std=c++20 -O1 $separate -I"$src/single_include" -c "$work/runtime.cpp" -o "$work/build/runtime.o"
      objects="$objects $work/build/runtime.o"
    fi
    "$cxx" $objects -o "$work/build/consumer" -lgloo -lcrypto -pthread
    ;;
  *) echo "unknown consumer kind '$kind'"; exit 2 ;;
esac
if [ "$kind" != single_header ]; then
  cmake --build "$work/build" -j1 # one file: one core (the test has PROCESSORS 1)
fi
"$ddprun" --nproc-per-node 2 "$work/build/consumer" > "$work/out.txt" 2>&1 || { cat "$work/out.txt"; exit 1; }
cat "$work/out.txt"
test "$(grep -c ': ok$' "$work/out.txt")" -eq 2
