#!/usr/bin/env python3
"""Writes the hand-made seed inputs of the store fuzzer (tests/fuzz/fuzz_store.cpp)
into tests/fuzz/corpus/store/seed-*. Byte 0 of each picks the mode; see the harness.
The rest of that directory: regress-* (inputs that once crashed) and found-* (what
libFuzzer found, minimized with -merge=1)."""
import pathlib
import struct

OUT = pathlib.Path(__file__).resolve().parent / "corpus" / "store"
HELLO, SET, GET, WAIT, ADD, CHECK, BYE, PROOF = 1, 2, 3, 4, 5, 6, 7, 8
OWNER = 10
COMPARE_SET = 11


def frame(body: bytes) -> bytes:
    return struct.pack("<I", len(body)) + body


def s(b: bytes) -> bytes:
    return struct.pack("<I", len(b)) + b


def op(code: int, *fields: bytes) -> bytes:
    return frame(bytes([code]) + b"".join(fields))


seeds = {
    # 0: the decoder: op count, op codes (u8 u32 i32 u64 i64 bytes), body
    "decoder-fields": bytes([0, 6, 0, 1, 2, 3, 4, 5]) + b"\x07" + b"\x01\x00\x00\x00" * 2 + b"\x02" * 16
    + s(b"key"),
    "decoder-short": bytes([0, 3, 5, 5, 5]) + s(b"ab") + b"\xff\xff",
    # 1: unauthenticated streams
    "unauth-hello": bytes([1]) + op(HELLO, struct.pack("<i", 2), s(b"\x11" * 32)),
    "unauth-hello-proof": bytes([1]) + op(HELLO, struct.pack("<i", 0), s(b"\x22" * 32)) + op(PROOF, s(b"\x00" * 32)),
    "unauth-set-first": bytes([1]) + op(SET, s(b"k"), s(b"v")),
    "unauth-huge": bytes([1]) + b"\xff\xff\xff\x7f",
    "unauth-empty-frame": bytes([1]) + b"\x00\x00\x00\x00",
    "unauth-old-hello": bytes([1]) + op(HELLO, s(b"secret"), struct.pack("<i", 3)),
    # 2: after a real handshake
    "auth-ops": bytes([2]) + op(SET, s(b"a"), s(b"1")) + op(GET, s(b"a")) + op(GET, s(b"missing"))
    + op(ADD, s(b"n"), struct.pack("<q", 5)) + op(ADD, s(b"a"), struct.pack("<q", -1))
    + op(CHECK, struct.pack("<I", 2), s(b"a"), s(b"n")) + op(WAIT, struct.pack("<I", 1), s(b"a"), struct.pack("<Q", 0))
    + op(WAIT, struct.pack("<I", 1), s(b"never"), struct.pack("<Q", 1)) + op(BYE),
    "auth-lost": bytes([2]) + op(SET, s(b"x"), s(b"y")),
    "auth-bad-op": bytes([2]) + op(99) + op(SET, s(b"k")),
    "auth-wait-huge-count": bytes([2]) + op(WAIT, struct.pack("<I", 0xFFFFFFFF)),
    "auth-second-hello": bytes([2]) + op(HELLO, struct.pack("<i", 1), s(b"\x00" * 32)),
    # a connection of rank 1 may not claim an owner: it is dropped (and rank 1 recorded lost)
    "auth-owner": bytes([2]) + op(OWNER, struct.pack("<i", 0)) + op(SET, s(b"k"), s(b"v")),
    # set-if-absent, a wrong expectation, a swap, and a truncated request (dropped)
    "auth-compare-set": bytes([2]) + op(COMPARE_SET, s(b"c"), s(b""), s(b"1"))
    + op(COMPARE_SET, s(b"c"), s(b"x"), s(b"2")) + op(COMPARE_SET, s(b"c"), s(b"1"), s(b"3"))
    + op(COMPARE_SET, s(b"absent"), s(b"x"), s(b"4")) + op(COMPARE_SET, s(b"c"), s(b"3")),
    # 3: a hostile server's answers
    "hostile-challenge": bytes([3]) + frame(bytes([0]) + s(b"\x33" * 32) + s(b"\x44" * 32)) + frame(bytes([0])),
    "hostile-refused": bytes([3]) + frame(bytes([3])),
    "hostile-old-ok": bytes([3]) + frame(bytes([0])),
    "hostile-huge": bytes([3]) + b"\xff\xff\xff\xff",
    "hostile-short-nonce": bytes([3]) + frame(bytes([0]) + s(b"\x33" * 31) + s(b"\x44" * 32)),
}

OUT.mkdir(parents=True, exist_ok=True)
for name, data in seeds.items():
    (OUT / f"seed-{name}").write_bytes(data)
print(f"wrote {len(seeds)} seeds to {OUT}")
