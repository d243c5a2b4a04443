#!/usr/bin/python3
"""The LibTorch example's epoch in Python: PyTorch's own DDP (gloo) training the
same CNN (examples/libtorch_fashion_mnist/cnn.py) with the same batch, optimizer,
schedule, sampler and evaluation, one thread per rank. One JSON line (rank 0).

    /usr/bin/python3 bench/torch_cnn_epoch.py --ranks 2 --limit 12000
"""
import argparse
import gzip
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples",
                                "libtorch_fashion_mnist"))
from cnn import Cnn  # noqa: E402


def load(data, kind):
    with gzip.open(f"{data}/{kind}-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28).astype(np.float32) / 255.0
    with gzip.open(f"{data}/{kind}-labels-idx1-ubyte.gz") as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def rank_main(rank, a):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=a.ranks)
    x, y = load(a.data, "train")
    tx, ty = load(a.data, "t10k")
    if a.limit:
        x, y = x[:a.limit], y[:a.limit]
    torch.manual_seed(0)
    model = DDP(Cnn())
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sampler = DistributedSampler(TensorDataset(x, y), shuffle=True, seed=0)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, sampler=sampler)
    dist.barrier()
    t0 = time.perf_counter()
    sampler.set_epoch(0)
    steps = len(loader)
    for step, (bx, by) in enumerate(loader):
        for g in opt.param_groups:
            g["lr"] = 0.5 * 0.05 * (1 + math.cos(math.pi * step / steps))
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(bx), by).backward()
        opt.step()
    train_s = time.perf_counter() - t0
    correct = torch.zeros(2, dtype=torch.float64)
    with torch.no_grad():
        for i in range(rank * 1000, len(ty), a.ranks * 1000):
            pred = model.module(tx[i:i + 1000]).argmax(1)
            correct += torch.tensor([float((pred == ty[i:i + 1000]).sum()), float(len(pred))], dtype=torch.float64)
    dist.all_reduce(correct)
    secs = time.perf_counter() - t0
    if rank == 0:
        print(json.dumps({"impl": "python_ddp", "ranks": a.ranks, "test_acc": float(correct[0] / correct[1]),
                          "epoch_s": secs, "train_s": train_s}), flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--port", type=int, default=29611)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    a = ap.parse_args()
    mp.spawn(rank_main, args=(a,), nprocs=a.ranks, join=True)


if __name__ == "__main__":
    main()
