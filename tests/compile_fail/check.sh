#!/bin/sh
# Compiles a file that must not compile, and checks that the compiler says the
# one thing the file's "// EXPECT:" line names, in exactly one error.
# usage: check.sh CXX SOURCE [--precompiled HEADER] [compiler flags...]
#   --precompiled: HEADER (tests/compile_fail/precompile.sh) comes first, for a SOURCE whose
#   first line of code is #include <ddp/ddp.hpp>: the same text, parsed once for all cases.
set -u
cxx=$1; src=$2; shift 2
expect=$(sed -n 's|^// EXPECT: ||p' "$src" | head -n 1)
[ -n "$expect" ] || { echo "$src has no // EXPECT: line"; exit 2; }
first=""
if [ "${1:-}" = --precompiled ]; then
  # Only before the file's own first line: anything ahead of it (a macro, another
  # header) could change what ddp.hpp means.
  if [ "$(grep -v -e '^//' -e '^[[:space:]]*$' "$src" | head -n 1)" = '#include <ddp/ddp.hpp>' ]; then
    first="-Winvalid-pch -include $2"
  fi
  shift 2
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if "$cxx" -std=c++20 -fsyntax-only $first "$@" "$src" >"$log" 2>&1; then
  echo "FAIL: $src compiled, but must not"; exit 1
fi
if ! grep -qF -- "$expect" "$log"; then
  echo "FAIL: the compiler did not say: $expect"; cat "$log"; exit 1
fi
errors=$(grep -c 'error:' "$log")
if [ "$errors" -ne 1 ]; then
  echo "FAIL: expected exactly one error, got $errors:"; grep 'error:' "$log"; exit 1
fi
echo "ok: $(grep 'error:' "$log" | sed 's/.*error: //' | cut -c1-160)"
# The precompiled header is only a shortcut (GCC parses the header where it cannot use it).
grep -F -e 'Winvalid-pch' "$log" || true
