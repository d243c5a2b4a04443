#!/bin/sh
# Compiles a file that must not compile, and checks that the compiler says the
# one thing the file's "// EXPECT:" line names, in exactly one error.
# usage: check.sh CXX SOURCE [compiler flags...]
set -u
cxx=$1; src=$2; shift 2
expect=$(sed -n 's|^// EXPECT: ||p' "$src" | head -n 1)
[ -n "$expect" ] || { echo "$src has no // EXPECT: line"; exit 2; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if "$cxx" -std=c++20 -fsyntax-only "$@" "$src" >"$log" 2>&1; then
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
