#!/usr/bin/env python3
"""Prints torch.utils.data.DistributedSampler's indices for a grid of cases.

One line per (policy, n, num_replicas, seed, epoch, drop_last, rank):
    <shuffled|sequential> n R seed epoch drop rank count fnv1a64 : i0 i1 ...
Lists longer than 64 entries are given by count and hash only (FNV-1a over the
decimal indices joined by ','). tests/unit/test_sampler.cpp reads this format.

    python3 tests/reference/sampler_reference.py > tests/reference/sampler_reference.txt
"""
import hashlib
import sys

import torch
from torch.utils.data import DistributedSampler

SIZES = [0, 1, 2, 3, 5, 7, 8, 10, 17, 64, 100, 1001, 100003]
REPLICAS = [1, 2, 3, 4, 7, 8]
SEEDS = [0, 1, 2**32 + 5]
EPOCHS = [0, 1, 2, 3]


def fnv1a64(text: str) -> int:
    h = 0xCBF29CE484222325
    for b in text.encode():
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


# The byte loop above is half of this script's time, and many lists come back: seeds 0 and 1
# share seed + epoch, and shuffle=False ignores the epoch. Each text's FNV once, found again
# by a digest of the whole text (computed in C), so the hash stays a function of the text.
_FNV_SEEN: dict = {}


def fnv1a64_once(text: str) -> int:
    key = hashlib.blake2b(text.encode(), digest_size=16).digest()
    if key not in _FNV_SEEN:
        _FNV_SEEN[key] = fnv1a64(text)
    return _FNV_SEEN[key]


def main() -> None:
    out = sys.stdout
    out.write(f"# torch {torch.__version__}\n")
    for shuffle in (True, False):
        name = "shuffled" if shuffle else "sequential"
        seeds = SEEDS if shuffle else [0]
        epochs = EPOCHS if shuffle else [0, 1]
        for n in SIZES:
            data = range(n)
            for r_count in REPLICAS:
                for seed in seeds:
                    for epoch in epochs:
                        for drop in (False, True):
                            for rank in range(r_count):
                                s = DistributedSampler(data, num_replicas=r_count, rank=rank,
                                                       shuffle=shuffle, seed=seed, drop_last=drop)
                                s.set_epoch(epoch)
                                idx = list(s)
                                assert len(idx) == len(s)
                                text = ",".join(map(str, idx))
                                listed = " ".join(map(str, idx)) if len(idx) <= 64 else ""
                                out.write(f"{name} {n} {r_count} {seed} {epoch} {int(drop)} {rank} "
                                          f"{len(idx)} {fnv1a64_once(text):016x} : {listed}\n")


if __name__ == "__main__":
    main()
