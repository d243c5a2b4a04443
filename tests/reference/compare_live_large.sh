#!/bin/sh
# Compares the C++ sampler with the installed PyTorch at n = 214,748,363 and
# 214,748,364, either side of where PyTorch 2.6+ switches torch.randperm to
# another shuffle. Exit 77 (ctest: skipped) when PyTorch is missing.
# usage: compare_live_large.sh UNIT_SAMPLER_BINARY
# Cost on the 2-core machine: ~50 s, peak ~2.5 GB (two torch processes of ~1.2 GB,
# then the C++ side's 4-byte permutation plus one rank's 8-byte share).
set -eu
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "SKIP: python3-torch is not installed (apt-get install python3-torch)"
  exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# One single-threaded torch.randperm per n (~20 s each): both at once, one per core.
OMP_NUM_THREADS=1 "$py" "$here/sampler_reference_large.py" 214748363 > "$dir/below" &
below=$!
OMP_NUM_THREADS=1 "$py" "$here/sampler_reference_large.py" 214748364 > "$dir/at" &
at=$!
wait "$below"
wait "$at"
cat "$dir/below" "$dir/at" > "$dir/reference"
cat "$dir/reference"
DDP_SAMPLER_REFERENCE_LARGE="$dir/reference" "$1" -tc='*large n*' -s
