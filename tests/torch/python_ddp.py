#!/usr/bin/python3
"""ddp's LibTorch path against PyTorch's own DistributedDataParallel.

Both train the example's CNN at world 2 from the same initial weights, on the
same data, with the same optimizer (SGD, lr 0.05, momentum 0.9), one thread
per rank; the final parameters are compared element by element. At world 2 an
average is (a + b) / 2 in either order, so they should be bit-identical.

usage: python_ddp.py DDPRUN PYTHON_TWIN [--steps N] [--per-rank B]
Exit 77 (skipped) without python3-torch.
"""
import argparse
import os
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.distributed as dist
    import torch.multiprocessing as mp
except ImportError:
    print("skipped: python3-torch is not installed")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples", "libtorch_fashion_mnist"))
from cnn import Cnn  # noqa: E402

WORLD = 2

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "support"))
from free_port import free_port  # noqa: E402


def python_rank(rank, workdir, steps, per_rank, port):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    model = Cnn()
    load_params(model, os.path.join(workdir, "init.bin"))
    ddp_model = torch.nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = load_data(workdir, steps, per_rank)
    glob = per_rank * WORLD
    for s in range(steps):
        first = s * glob + rank * per_rank
        opt.zero_grad()
        torch.nn.functional.cross_entropy(ddp_model(x[first:first + per_rank]), y[first:first + per_rank]).backward()
        opt.step()
    if rank == 0:
        flat(model).numpy().tofile(os.path.join(workdir, "python_final.bin"))
    dist.destroy_process_group()


def flat(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def load_params(model, path):
    values = torch.from_numpy(__import__("numpy").fromfile(path, dtype="float32"))
    offset = 0
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(values[offset:offset + p.numel()].view_as(p))
            offset += p.numel()


def load_data(workdir, steps, per_rank):
    import numpy
    n = steps * per_rank * WORLD
    x = torch.from_numpy(numpy.fromfile(os.path.join(workdir, "x.bin"), dtype="float32")).view(n, 1, 28, 28)
    y = torch.from_numpy(numpy.fromfile(os.path.join(workdir, "y.bin"), dtype="int64"))
    return x, y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ddprun")
    ap.add_argument("twin")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--per-rank", type=int, default=16)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as workdir:
        torch.manual_seed(0)
        flat(Cnn()).numpy().tofile(os.path.join(workdir, "init.bin"))
        n = a.steps * a.per_rank * WORLD
        torch.randn(n, 1, 28, 28).numpy().tofile(os.path.join(workdir, "x.bin"))
        torch.randint(0, 10, (n,)).numpy().tofile(os.path.join(workdir, "y.bin"))

        mp.spawn(python_rank, args=(workdir, a.steps, a.per_rank, free_port()), nprocs=WORLD, join=True)
        env = dict(os.environ, DDP_TIMEOUT="60s")
        subprocess.run([a.ddprun, "--nproc-per-node", str(WORLD), a.twin, workdir, str(a.steps), str(a.per_rank)],
                       check=True, env=env, timeout=300)

        import numpy
        py = numpy.fromfile(os.path.join(workdir, "python_final.bin"), dtype="float32")
        cc = numpy.fromfile(os.path.join(workdir, "cpp_final.bin"), dtype="float32")
        start = numpy.fromfile(os.path.join(workdir, "init.bin"), dtype="float32")
    assert py.shape == cc.shape, (py.shape, cc.shape)
    moved = float(numpy.abs(py - start).max())
    identical = int((py.view("uint32") == cc.view("uint32")).sum())
    diff = float(numpy.abs(py - cc).max())
    print(f"parameters: {py.size}, bit-identical: {identical}, max |python - ddp|: {diff:.3g}, "
          f"max change from the initial weights: {moved:.3g}")
    if moved < 1e-3:
        print("FAIL: training did not move the weights")
        return 1
    if identical != py.size:
        # Not bit-identical: report it, and hold ddp to float tolerance against the change.
        if diff > 1e-5 * max(1.0, moved):
            print("FAIL: ddp and PyTorch DDP disagree beyond float tolerance")
            return 1
        print("ok within float tolerance (not bit-identical)")
        return 0
    print("ok: bit-identical to PyTorch's DistributedDataParallel")
    return 0


if __name__ == "__main__":
    sys.exit(main())
