#!/usr/bin/env python3
"""The same training as examples/fashion_mnist in PyTorch DDP (gloo), for comparison.

MLP 784-256-128-10, ReLU, cross-entropy, SGD(lr=0.05, momentum=0.9), batch 64 per
rank, He-normal init, DistributedSampler(shuffle=True, seed=0), cosine decay.
Prints one JSON line per epoch from rank 0. Needs Debian's python3-torch.

    /usr/bin/python3 bench/torch_fashion_mnist.py --epochs 1 --ranks 2
"""
import argparse
import gzip
import json
import math
import os
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def load(data, kind):
    with gzip.open(f"{data}/{kind}-images-idx3-ubyte.gz") as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 784).astype(np.float32) / 255.0
    with gzip.open(f"{data}/{kind}-labels-idx1-ubyte.gz") as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    return torch.from_numpy(x), torch.from_numpy(y)


def worker(rank, args):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{args.port}", rank=rank, world_size=args.ranks)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))
    for m in model:
        if isinstance(m, nn.Linear):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            nn.init.zeros_(m.bias)
    ddp = DDP(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05, momentum=0.9)
    x, y = load(args.data, "train")
    tx, ty = load(args.data, "t10k")
    train = TensorDataset(x, y)
    sampler = DistributedSampler(train, num_replicas=args.ranks, rank=rank, shuffle=True, seed=0)
    loader = DataLoader(train, batch_size=64, sampler=sampler)
    steps_total = args.epochs * len(loader)
    step = 0
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        t0 = time.perf_counter()
        total = 0.0
        for xb, yb in loader:
            opt.zero_grad()
            loss = nn.functional.cross_entropy(ddp(xb), yb)
            loss.backward()
            opt.step()
            step += 1
            for g in opt.param_groups:
                g["lr"] = 0.5 * 0.05 * (1 + math.cos(math.pi * step / steps_total))
            total += loss.item()
        with torch.no_grad():
            correct = torch.tensor([(model(tx[rank::args.ranks]).argmax(1) == ty[rank::args.ranks]).sum().item()], dtype=torch.float64)
        dist.all_reduce(correct)
        secs = time.perf_counter() - t0
        if rank == 0:
            print(json.dumps({"epoch": epoch + 1, "train_loss": total / len(loader),
                              "test_acc": correct.item() / len(ty), "epoch_s": secs}), flush=True)
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--port", type=int, default=29533)
    args = p.parse_args()
    mp.spawn(worker, args=(args,), nprocs=args.ranks)


if __name__ == "__main__":
    main()
