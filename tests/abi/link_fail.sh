#!/usr/bin/env bash
# Builds a program of two translation units of one source with different flags,
# which must not link: the linker must say the one thing the file's "// EXPECT:"
# line names, in exactly one undefined reference (tests/compile_fail/check.sh's
# rule, at link time).
# usage: link_fail.sh CXX SOURCE [flags of both...] --second [flags of the second...] --link [link flags...]
set -u
cxx=$1; src=$2; shift 2
expect=$(sed -n 's|^// EXPECT: ||p' "$src" | head -n 1)
[ -n "$expect" ] || { echo "$src has no // EXPECT: line"; exit 2; }
both=(); second=(); link=(); group=both
for a in "$@"; do
  case "$a" in
    --second) group=second ;;
    --link) group=link ;;
    *) eval "$group+=(\"\$a\")" ;;
  esac
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$cxx" -std=c++20 -c "${both[@]}" "$src" -o "$dir/first.o" >"$dir/log" 2>&1 ||
  { echo "FAIL: the first translation unit did not compile"; cat "$dir/log"; exit 1; }
"$cxx" -std=c++20 -c "${both[@]}" "${second[@]}" "$src" -o "$dir/second.o" >"$dir/log" 2>&1 ||
  { echo "FAIL: the second translation unit did not compile"; cat "$dir/log"; exit 1; }
if "$cxx" "$dir/first.o" "$dir/second.o" "${link[@]}" -o "$dir/program" >"$dir/log" 2>&1; then
  echo "FAIL: $src linked, but must not"; exit 1
fi
if ! grep -qF -- "$expect" "$dir/log"; then
  echo "FAIL: the linker did not say: $expect"; cat "$dir/log"; exit 1
fi
refs=$(grep -c 'undefined reference' "$dir/log")
if [ "$refs" -ne 1 ]; then
  echo "FAIL: expected exactly one undefined reference, got $refs:"; grep 'undefined reference' "$dir/log"; exit 1
fi
echo "ok: $(grep 'undefined reference' "$dir/log" | sed 's/.*undefined reference to //' | cut -c1-200)"
