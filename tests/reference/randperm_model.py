#!/usr/bin/env python3
"""A pure-Python model of PyTorch's CPU torch.randperm, for checking ddp's C++ copy.

PyTorch's randperm_cpu (aten/src/ATen/native/TensorFactories.cpp) has two shuffles:
forward Fisher-Yates with 32-bit draws (every n up to PyTorch 2.5; n < (2**32 - 1) // 20
from 2.6 on) and, from PyTorch 2.6 on for n >= (2**32 - 1) // 20, an "inside-out"
Fisher-Yates with 64-bit draws (first draw in the high half). The generator is MT19937
seeded like std::mt19937 (init_genrand with the seed's low 32 bits); here it is CPython's
own MT19937 with that state set, so the draws come from a second implementation.

With torch installed, the forward model is first checked against torch.randperm. Then it
prints the inside-out permutations that tests/unit/test_sampler.cpp hard-codes (Debian 12
has PyTorch 1.13, which cannot produce them).

    /usr/bin/python3 tests/reference/randperm_model.py
"""
import random


def mt19937_u32(seed: int):
    state = [seed & 0xFFFFFFFF]
    for i in range(1, 624):
        prev = state[-1]
        state.append((1812433253 * (prev ^ (prev >> 30)) + i) & 0xFFFFFFFF)
    rng = random.Random()
    rng.setstate((3, tuple(state) + (624,), None))
    return lambda: rng.getrandbits(32)


def randperm_forward(n: int, seed: int) -> list:
    draw = mt19937_u32(seed)
    r = list(range(n))
    for i in range(n - 1):
        z = draw() % (n - i)
        r[i], r[i + z] = r[i + z], r[i]
    return r


def randperm_inside_out(n: int, seed: int) -> list:
    draw = mt19937_u32(seed)
    r = [0] * n
    for i in range(n):
        hi = draw()
        lo = draw()
        z = ((hi << 32) | lo) % (i + 1)
        r[i] = r[z]
        r[z] = i
    return r


def weighted_sum(values) -> int:
    """sum((k % 64 + 1) * v), the order-sensitive checksum the tests use, mod 2**64."""
    return sum((k % 64 + 1) * v for k, v in enumerate(values)) % 2**64


def main() -> None:
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None:
        for n, seed in [(10, 8), (1000, 3), (7, 2**32 + 5)]:
            g = torch.Generator()
            g.manual_seed(seed)
            assert randperm_forward(n, seed) == torch.randperm(n, generator=g).tolist(), (n, seed)
        print(f"# forward model == torch {torch.__version__} randperm")
    for n, seed in [(12, 8), (20, 2**32 + 5)]:
        print(f"inside_out n={n} seed={seed}:", randperm_inside_out(n, seed))
    big = randperm_inside_out(100000, 8)
    print(f"inside_out n=100000 seed=8: first {big[:3]} last {big[-3:]} weighted_sum {weighted_sum(big)}")


if __name__ == "__main__":
    main()
