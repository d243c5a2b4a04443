#!/bin/sh
# Builds one consumer project the way a user would, then runs it on 2 ranks with the ddprun
# that way provides (ddp::ddprun: built in the consumer's build, or the installed bin/ddprun).
# usage: run.sh KIND DDP_SOURCE_DIR DDPRUN CXX
#   KIND: find_package | add_subdirectory | fetchcontent | single_header, header-only;
#         with the suffix _runtime, the runtime compiled once (ddp::runtime, or for
#         the single header a file of its own that defines DDP_IMPLEMENTATION), launched
#         by DDPRUN (the top build's) so that ddprun is compiled once per way, not twice;
#         add_subdirectory_asked: configure only, with DDP_WITH_CUDA, DDP_WITH_NCCL and
#         DDP_WITH_TORCH on, to check that asking makes ddp look (and still not enable CUDA);
#         find_package_torch_runtime, add_subdirectory_torch_runtime: a LibTorch module under
#         ddp (common/torch_main.cpp) with the LibTorch adapter compiled once too
#         (ddp::torch_runtime); skipped without LibTorch.
#   The single header has no CMake: it is launched by DDPRUN.
# As a subproject ddp must be a quiet guest: its consumer's configure output has no line of
# ddp's, and its cache no CUDA, NCCL or LibTorch entry.
set -eu
kind=${1%_runtime}; src=$2; ddprun=$3; cxx=$4
target="-DDDP_CONSUMER_TARGET=ddp::ddp"
separate=""
launch=ON
if [ "$kind" != "$1" ]; then
  target="-DDDP_CONSUMER_TARGET=ddp::runtime"
  separate="-DDDP_SEPARATE_COMPILATION"
  launch=OFF
fi
torch=""
case "$kind" in
  *_torch)
    kind=${kind%_torch}
    target="-DDDP_CONSUMER_TARGET=ddp::torch_runtime"
    torch="-DDDP_CONSUMER_TORCH=ON -DDDP_WITH_TORCH=ON"
    [ -e /usr/include/torch/csrc/api/include/torch/torch.h ] || { echo "SKIP: LibTorch not found (Debian: libtorch-dev)"; exit 77; }
    ;;
esac
asked=""
if [ "$kind" = add_subdirectory_asked ]; then
  kind=add_subdirectory
  asked="-DDDP_WITH_CUDA=ON -DDDP_WITH_NCCL=ON -DDDP_WITH_TORCH=ON"
  launch=OFF
fi
# The ddprun a way builds is compiled as one translation unit (CMake's unity build): what is
# checked is that the way delivers a ddprun that launches, and its files one by one are
# compiled in every build of ddp itself (see docs/performance.md, Build and test costs). The
# consumer's own two files stay two (UNITY_BUILD OFF on the consumer target).
unity=""
[ $launch = OFF ] || unity="-DCMAKE_UNITY_BUILD=ON"
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ddp-consumer-$kind.XXXXXX")
trap 'rm -rf "$work"' EXIT
gen=""
command -v ninja >/dev/null && gen="-G Ninja"

# The consumer's configure, timed, its output kept for the checks below.
configure() {
  start=$(date +%s.%N)
  if ! cmake "$@" -DCMAKE_CXX_COMPILER="$cxx" "$target" -DDDP_CONSUMER_LAUNCH=$launch $asked $torch $unity \
       > "$work/configure.txt" 2>&1; then
    cat "$work/configure.txt"; exit 1
  fi
  echo "consumer configure: $(awk "BEGIN { printf \"%.2f\", $(date +%s.%N) - $start }") s"
}

# Nothing but what CMake prints for any C++ project, and no GPU or LibTorch entry in the cache.
quiet_guest() {
  noise=$(grep -v -e '^-- The CXX compiler identification' -e '^-- Detecting CXX' \
               -e '^-- Check for working CXX compiler' -e '^-- Configuring done' \
               -e '^-- Generating done' -e '^-- Build files have been written' "$work/configure.txt" || true)
  if [ -n "$noise" ]; then
    echo "ddp printed while configuring as a subproject (it must say nothing unless asked):"
    echo "$noise"; exit 1
  fi
  entries=$(grep -v -e '^//' -e '^#' -e '^DDP_' "$work/build/CMakeCache.txt" |
            grep -i -e cuda -e nccl -e torch -e caffe2 || true)
  if [ -n "$entries" ]; then
    echo "ddp wrote CUDA, NCCL or LibTorch entries into its consumer's cache (nothing asked for them):"
    echo "$entries"; exit 1
  fi
}

# Asked for ddp::cuda, ddp::nccl and ddp::torch, ddp looks for each and says what it found,
# and still leaves the CUDA language (nvcc) alone: nothing of it has a .cu file.
asked_for() {
  for t in cuda nccl torch; do
    grep -q "ddp::$t \(not \)\?available" "$work/configure.txt" ||
      { cat "$work/configure.txt"; echo "DDP_WITH_* asked for ddp::$t, and ddp said nothing of it"; exit 1; }
  done
  if grep -q '^CMAKE_CUDA_COMPILER' "$work/build/CMakeCache.txt"; then
    echo "ddp enabled the CUDA language in its consumer's build"; exit 1
  fi
  grep "ddp::" "$work/configure.txt"
}

case "$kind" in
  find_package)
    # Install ddp into a private prefix, with the commands the README gives (and $unity).
    cmake -S "$src" -B "$work/ddp-build" $gen -DDDP_BUILD_TESTS=OFF -DDDP_BUILD_EXAMPLES=OFF \
          -DDDP_BUILD_BENCHMARKS=OFF -DDDP_BUILD_TOOLS=$launch $unity -DCMAKE_INSTALL_PREFIX="$work/prefix" >/dev/null
    if [ $launch = ON ]; then
      # An install before the build says what to run, not which file it missed.
      if cmake --install "$work/ddp-build" > "$work/install.txt" 2>&1; then
        echo "cmake --install before a build succeeded without ddprun"; exit 1
      fi
      tr -s ' \n' '  ' < "$work/install.txt" | grep -q 'is not built: run `cmake --build' ||
        { cat "$work/install.txt"; exit 1; }
      if [ -e "$work/prefix" ]; then echo "the failed install left files in $work/prefix"; exit 1; fi
      cmake --build "$work/ddp-build" -j1 >/dev/null # ddprun and its crash report: tests etc. are off
    fi
    cmake --install "$work/ddp-build" >/dev/null
    want_ddprun="$work/prefix/bin/ddprun"
    configure -S "$here/find_package" -B "$work/build" $gen -DCMAKE_PREFIX_PATH="$work/prefix"
    ;;
  add_subdirectory)
    want_ddprun="$work/build/ddp/tools/ddprun"
    configure -S "$here/add_subdirectory" -B "$work/build" $gen -DDDP_SOURCE_DIR="$src"
    if [ -n "$asked" ]; then asked_for; exit 0; fi
    [ -n "$torch" ] || quiet_guest # asked for LibTorch, ddp looks for it and says so
    ;;
  fetchcontent)
    if ! git -C "$src" rev-parse HEAD >/dev/null 2>&1; then
      echo "SKIP: $src is not a git checkout"; exit 77
    fi
    want_ddprun="$work/build/_deps/ddp-build/tools/ddprun"
    configure -S "$here/fetchcontent" -B "$work/build" $gen -DDDP_SOURCE_DIR="$src" \
              -DDDP_GIT_TAG="$(git -C "$src" rev-parse HEAD)"
    quiet_guest
    ;;
  single_header)
    launch=OFF
    mkdir -p "$work/build"
    objects=""
    # -O0: what is checked is that it compiles, links and runs, not how fast (a third less
    # CPU than -O1, see docs/performance.md, Build and test costs).
    for f in main second; do
      "$cxx" -std=c++20 -O0 $separate -I"$src/single_include" -c "$here/common/$f.cpp" -o "$work/build/$f.o"
      objects="$objects $work/build/$f.o"
    done
    if [ -n "$separate" ]; then
      printf '#define DDP_IMPLEMENTATION\n#include <ddp/ddp.hpp>\n' > "$work/runtime.cpp"
      "$cxx" -std=c++20 -O0 $separate -I"$src/single_include" -c "$work/runtime.cpp" -o "$work/build/runtime.o"
      objects="$objects $work/build/runtime.o"
    fi
    "$cxx" $objects -o "$work/build/consumer" -lgloo -lcrypto -pthread
    ;;
  *) echo "unknown consumer kind '$kind'"; exit 2 ;;
esac
if [ "$kind" != single_header ]; then
  cmake --build "$work/build" -j1 # one core (the test has PROCESSORS 1); ddprun too with launch
  [ -n "$(find "$work/build/CMakeFiles/consumer.dir" -name 'second.cpp.o')" ] ||
    { echo "the consumer's second.cpp was not compiled as a translation unit of its own"; exit 1; }
fi
if [ -n "$torch" ]; then
  # Compiled once, the consumer's LibTorch file only declares the adapter: ddp::torch_runtime defines it.
  obj=$(find "$work/build/CMakeFiles/consumer.dir" -name 'torch_main.cpp.o')
  # The adapter's constructor and the registry's walks of it (explicit instantiations).
  for f in 'attached_module::attached_module(' 'parameter_registry<ddp::[a-z0-9_]*::detail::libtorch::attached_module>::refresh('; do
    nm -C "$obj" | grep -q " U ddp::.*$f" ||
      { echo "$obj does not take $f from ddp::torch_runtime:"; nm -C "$obj" | grep attached_module; exit 1; }
  done
fi
if [ $launch = ON ]; then
  # The consumer's own test, as its users would run it.
  ctest --test-dir "$work/build" -V > "$work/out.txt" 2>&1 || { cat "$work/out.txt"; exit 1; }
  grep -qF "Test command: $want_ddprun " "$work/out.txt" ||
    { cat "$work/out.txt"; echo "the test was not launched by $want_ddprun"; exit 1; }
else
  "$ddprun" --nproc-per-node 2 "$work/build/consumer" > "$work/out.txt" 2>&1 || { cat "$work/out.txt"; exit 1; }
fi
cat "$work/out.txt"
test "$(grep -c ': ok$' "$work/out.txt")" -eq 2
