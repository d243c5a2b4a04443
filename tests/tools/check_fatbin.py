#!/usr/bin/env python3
"""Checks the fatbin embedded in include/ddp/detail/cuda/kernels_fatbin.hpp
holds what scripts/gen-cuda-kernels promises: an ELF for each listed sm_XX and
the PTX for compute_75 at ISA 8.0, nothing compressed (older drivers cannot
read nvcc 13's zstd).

  check_fatbin.py HEADER [CUOBJDUMP] --sm 75 80 90 --ptx 75 --isa 8.0

The fatbin container is read here (header: magic 0xBA55ED50; each entry: kind
1 = PTX, 2 = ELF, the arch, flags where 0x2000 and 0x8000 mark LZ4 and zstd
compression), so the test runs without cuobjdump, which CUDA's compiler
packages lack; given one, `cuobjdump --list-elf --list-ptx` must list the same.
"""
import argparse, os, re, struct, subprocess, sys, tempfile

COMPRESSED = 0x2000 | 0x8000


def embedded_bytes(header: str) -> bytes:
    text = open(header).read()
    m = re.search(r"kernels_fatbin\[(\d+)\]\s*=\s*\{(.*?)\};", text, re.S)
    if not m:
        sys.exit(f"check_fatbin: no kernels_fatbin array in {header}")
    body = re.sub(r"//[^\n]*", "", m.group(2))
    blob = bytes(int(v) for v in body.replace("\n", "").split(",") if v.strip())
    if len(blob) != int(m.group(1)):
        sys.exit(f"check_fatbin: the array holds {len(blob)} bytes, declared {m.group(1)}")
    return blob


def entries(blob: bytes):
    magic, version, header_size, fat_size = struct.unpack_from("<IHHQ", blob, 0)
    if magic != 0xBA55ED50 or version != 1:
        sys.exit(f"check_fatbin: not a fatbin (magic {magic:#x}, version {version})")
    if header_size + fat_size != len(blob):
        sys.exit(f"check_fatbin: fatbin of {header_size + fat_size} bytes in an array of {len(blob)}")
    at = header_size
    while at < len(blob):
        kind, _, entry_header, size = struct.unpack_from("<HHIQ", blob, at)
        minor, major, arch = struct.unpack_from("<HHI", blob, at + 24)
        flags, _, uncompressed = struct.unpack_from("<QQQ", blob, at + 40)
        payload = blob[at + entry_header:at + entry_header + size]
        yield {"kind": {1: "ptx", 2: "elf"}.get(kind, str(kind)), "arch": arch, "isa": f"{major}.{minor}",
               "compressed": bool(flags & COMPRESSED) or uncompressed != 0, "payload": payload}
        at += entry_header + size


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("header")
    ap.add_argument("cuobjdump", nargs="?")
    ap.add_argument("--sm", type=int, nargs="+", required=True)
    ap.add_argument("--ptx", type=int, required=True)
    ap.add_argument("--isa", required=True)
    a = ap.parse_args()
    blob = embedded_bytes(a.header)
    failed = []
    found = list(entries(blob))
    for e in found:
        print(f"  {e['kind']} arch {e['arch']}{' ISA ' + e['isa'] if e['kind'] == 'ptx' else ''}: "
              f"{len(e['payload'])} bytes{', compressed' if e['compressed'] else ''}")
        if e["compressed"]:
            failed.append(f"{e['kind']} for {e['arch']} is compressed")
    elfs = sorted(e["arch"] for e in found if e["kind"] == "elf")
    if elfs != sorted(a.sm):
        failed.append(f"ELF for sm {elfs}, expected {sorted(a.sm)}")
    for e in found:
        if e["kind"] == "elf" and not e["payload"].startswith(b"\x7fELF"):
            failed.append(f"the sm_{e['arch']} entry is not an ELF")
    ptx = [e for e in found if e["kind"] == "ptx"]
    if len(ptx) != 1 or ptx[0]["arch"] != a.ptx:
        failed.append(f"PTX for {[e['arch'] for e in ptx]}, expected one for compute_{a.ptx}")
    else:
        text = ptx[0]["payload"].rstrip(b"\0").decode("ascii", "replace")
        if ptx[0]["isa"] != a.isa or f".version {a.isa}\n" not in text:
            failed.append(f"PTX ISA {ptx[0]['isa']}, expected {a.isa}")
        if f".target sm_{a.ptx}" not in text or "ddp_convert_copy" not in text:
            failed.append("the PTX is not readable text for ddp_convert_copy")
    if a.cuobjdump:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "kernels.fatbin")
            open(path, "wb").write(blob)
            listed = subprocess.run([a.cuobjdump, "--list-elf", "--list-ptx", path], check=True,
                                    capture_output=True, text=True).stdout
        print(listed, end="")
        for sm in a.sm:
            if not re.search(rf"ELF file\s+\d+: \S*sm_{sm}\.cubin", listed):
                failed.append(f"cuobjdump lists no ELF for sm_{sm}")
        if not re.search(rf"PTX file\s+\d+: \S*sm_{a.ptx}\.ptx", listed):
            failed.append(f"cuobjdump lists no PTX for compute_{a.ptx}")
    else:
        print("  (no cuobjdump given: the container was read here only)")
    for f in failed:
        print(f"FAILED: {f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
