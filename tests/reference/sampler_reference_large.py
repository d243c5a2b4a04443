#!/usr/bin/env python3
"""Prints DistributedSampler(shuffle=True) checks for data sets of 2.1e8 samples.

    /usr/bin/python3 tests/reference/sampler_reference_large.py N [N ...]

For each N it draws one torch.randperm(N) (seeded seed + epoch, as DistributedSampler
does) and prints, for a few (num_replicas, rank, drop_last) cases, one line

    shuffled n R seed epoch drop rank count sum wsum : k=v k=v ...

count = len(sampler), sum = sum of the rank's indices, wsum = sum((k % 64 + 1) * idx[k])
mod 2**64 (order-sensitive), and idx[k] at a dozen positions k. The header line says which
torch.randperm the installed PyTorch has for large n (it changed in 2.6).

DistributedSampler's own __iter__ calls .tolist() on the permutation: ~8 GB of Python ints
at this size. So the padding/truncation and striding are done here on the tensor (views,
no copy) and checked against the real DistributedSampler on small sizes first. The
permutation is drawn as int32 (same algorithm and draws as the default int64; half the
memory): peak ~1.7 GB, 20-28 s for N = 2.1e8 on the 2-core machine.
"""
import sys

import torch
from torch.utils.data import DistributedSampler

SEED, EPOCH = 7, 1
# (num_replicas, rank, drop_last) per n: the whole permutation first (one replica), then
# padded, truncated and exact shares. The C++ test draws the permutation once per n,
# through ddp::distributed_sampler with one replica, and takes the other shares from it.
CASES = {
    214748363: [(1, 0, False), (2, 1, False), (2, 0, True), (8, 5, False)],
    214748364: [(1, 0, False), (8, 7, True), (8, 6, False), (7, 6, False), (3, 2, False)],
}
DEFAULT_CASES = [(1, 0, False), (2, 1, True), (7, 3, False)]


def share(perm, n, replicas, rank, drop):
    """(main, tail): the rank's indices are main (a strided view) followed by tail."""
    num_samples = (n - replicas) // replicas + 1 if drop and n % replicas else -(-n // replicas)
    total = num_samples * replicas
    assert total - n < n, "padding longer than the data set is not modelled here"
    main = perm[rank:min(n, total):replicas]
    # Padding: positions n..total-1 repeat the head; the first of this rank's is below.
    tail = [perm[j - n] for j in range(n + (rank - n) % replicas, total, replicas)]
    assert len(main) + len(tail) == num_samples
    return main, tail, num_samples


def at(main, tail, k):
    return int(main[k]) if k < len(main) else int(tail[k - len(main)])


def self_check():
    for n in (10, 11, 13, 64, 101):
        for replicas in (1, 2, 3, 7, 8):
            if replicas > n:
                continue
            for drop in (False, True):
                g = torch.Generator()
                g.manual_seed(SEED + EPOCH)
                perm = torch.randperm(n, generator=g, dtype=torch.int32)
                for rank in range(replicas):
                    s = DistributedSampler(range(n), num_replicas=replicas, rank=rank, shuffle=True,
                                           seed=SEED, drop_last=drop)
                    s.set_epoch(EPOCH)
                    main, tail, count = share(perm, n, replicas, rank, drop)
                    got = [at(main, tail, k) for k in range(count)]
                    assert got == list(s), (n, replicas, rank, drop)


def version_mode():
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    return "since_2_6" if (major, minor) >= (2, 6) else "before_2_6"


def main():
    sizes = [int(a) for a in sys.argv[1:]] or list(CASES)
    self_check()
    out = sys.stdout
    out.write(f"# torch {torch.__version__} randperm {version_mode()}\n")
    chunk = 1 << 22
    for n in sizes:
        g = torch.Generator()
        g.manual_seed(SEED + EPOCH)
        perm = torch.randperm(n, generator=g, dtype=torch.int32)
        for replicas, rank, drop in CASES.get(n, DEFAULT_CASES):
            main_part, tail, count = share(perm, n, replicas, rank, drop)
            # In chunks: a whole-share int64 copy would be 1.7 GB for one replica.
            total = sum(int(v) for v in tail)
            wsum = 0
            for start in range(0, len(main_part), chunk):
                part = main_part[start:start + chunk].to(torch.int64)
                weights = torch.arange(start, start + len(part), dtype=torch.int64) % 64 + 1
                total += int(part.sum())
                wsum += int((part * weights).sum())
            wsum += sum((k % 64 + 1) * int(v) for k, v in enumerate(tail, start=len(main_part)))
            keys = {0, 1, 2, count // 3, count // 2, count - 2, count - 1}
            keys |= {(i * 2654435761) % count for i in range(1, 6)}
            listed = " ".join(f"{k}={at(main_part, tail, k)}" for k in sorted(keys))
            out.write(f"shuffled {n} {replicas} {SEED} {EPOCH} {int(drop)} {rank} {count} {total} "
                      f"{wsum % 2**64} : {listed}\n")
        out.flush()


if __name__ == "__main__":
    main()
