#!/bin/sh
# Compares the C++ sampler with the installed PyTorch at n = 214,748,363 and
# 214,748,364, either side of where PyTorch 2.6+ switches torch.randperm to
# another shuffle (DDP_SAMPLER_LARGE_N: other sizes, one below the switch and one
# at or above it at least). Exit 77 (ctest: skipped) when PyTorch is missing.
# Ends with one JSON line {"sampler": ...} naming the PyTorch, the sizes and the result.
# usage: compare_live_large.sh UNIT_SAMPLER_BINARY
# DDP_PYTHON: the Python whose torch is compared (default /usr/bin/python3: Debian's torch
# belongs to it, and a pyenv python3 earlier on PATH may lack it).
# Cost on the 2-core machine: ~50 s (torch ~29 s, both n at once; C++ ~21 s), up to
# 110 s when other work shares the cores;
# peak ~2.5 GB (two torch processes of ~1.25 GB, then the C++ side: the sampler's
# 4-byte permutation and the whole 8-byte permutation as one replica's share).
set -eu
py=${DDP_PYTHON:-/usr/bin/python3}
sizes=${DDP_SAMPLER_LARGE_N:-214748363 214748364}
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "SKIP: $py has no torch (apt-get install python3-torch)"
  exit 77
fi
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
# One single-threaded torch.randperm per n, all at once (one per core). glibc's malloc
# asks for transparent huge pages with this tunable (glibc >= 2.35; ignored before):
# torch.randperm(214748364) took 27.2 s without, 17.8 s with it (Debian 12, PyTorch 1.13).
export OMP_NUM_THREADS=1
pids=""
for n in $sizes; do
  GLIBC_TUNABLES=glibc.malloc.hugetlb=1 "$py" "$here/sampler_reference_large.py" "$n" > "$dir/ref.$n" &
  pids="$pids $!"
done
for pid in $pids; do wait "$pid"; done
for n in $sizes; do cat "$dir/ref.$n"; done > "$dir/reference"
cat "$dir/reference"
torch=$(sed -n 's/^# torch \([^ ]*\) randperm \(.*\)$/\1 \2/p' "$dir/reference" | head -n 1)
rc=0
DDP_SAMPLER_REFERENCE_LARGE="$dir/reference" "$1" -tc='*large n*' -s || rc=$?
status=passed
[ "$rc" -eq 0 ] || status=failed
lines=$(grep -c '^shuffled ' "$dir/reference")
printf '{"sampler":"torch_live_large","torch":"%s","randperm":"%s","n":[%s],"cases":%s,"status":"%s"}\n' \
  "${torch% *}" "${torch#* }" "$(echo $sizes | tr ' ' ',')" "$lines" "$status"
exit "$rc"
