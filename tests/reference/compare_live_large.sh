#!/bin/sh
# Compares the C++ sampler with the installed PyTorch at n = 214,748,363 and
# 214,748,364, either side of where PyTorch 2.6+ switches torch.randperm to
# another shuffle. Exit 77 (ctest: skipped) when PyTorch is missing.
# usage: compare_live_large.sh UNIT_SAMPLER_BINARY
# Cost on the 2-core machine: ~50 s (torch ~29 s, both n at once; C++ ~21 s), up to
# 110 s when other work shares the cores;
# peak ~2.5 GB (two torch processes of ~1.25 GB, then the C++ side: the sampler's
# 4-byte permutation and the whole 8-byte permutation as one replica's share).
set -eu
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "SKIP: python3-torch is not installed (apt-get install python3-torch)"
  exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# One single-threaded torch.randperm per n: both at once, one per core. glibc's malloc
# asks for transparent huge pages with this tunable (glibc >= 2.35; ignored before):
# torch.randperm(214748364) took 27.2 s without, 17.8 s with it (Debian 12, PyTorch 1.13).
export OMP_NUM_THREADS=1
GLIBC_TUNABLES=glibc.malloc.hugetlb=1 "$py" "$here/sampler_reference_large.py" 214748363 > "$dir/below" &
below=$!
GLIBC_TUNABLES=glibc.malloc.hugetlb=1 "$py" "$here/sampler_reference_large.py" 214748364 > "$dir/at" &
at=$!
wait "$below"
wait "$at"
cat "$dir/below" "$dir/at" > "$dir/reference"
cat "$dir/reference"
DDP_SAMPLER_REFERENCE_LARGE="$dir/reference" "$1" -tc='*large n*' -s
