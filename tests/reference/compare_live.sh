#!/bin/sh
# Regenerates the sampler reference with the installed PyTorch and compares the
# C++ sampler against it. Exit 77 (ctest: skipped) when PyTorch is missing.
# usage: compare_live.sh UNIT_SAMPLER_BINARY
set -eu
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "SKIP: python3-torch is not installed (apt-get install python3-torch)"
  exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp)
trap 'rm -f "$out"' EXIT
"$py" "$here/sampler_reference.py" > "$out"
DDP_SAMPLER_REFERENCE="$out" "$1" -tc='*index-identical*'
