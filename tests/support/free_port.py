#!/usr/bin/env python3
"""A port free a moment ago, below the kernel's ephemeral range (32768-60999): a port the kernel
hands out could be taken by another process's connection before the store binds it
(as tests/support/spawn.hpp's free_port). Imported by the Python tests; run as a script, it
prints one port for the shell tests."""
import random
import socket

_DRAWS = random.Random()  # its own draws: a test that seeds `random` fixes its trials, not its ports


def free_port():
    for _ in range(200):
        port = _DRAWS.randrange(20000, 32000)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError("free_port: no free port in 20000-31999 after 200 draws")


if __name__ == "__main__":
    print(free_port())
