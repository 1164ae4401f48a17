"""Peak memory of opening a GGUF whose metadata holds one large array.

Writes a metadata-only GGUF with an N-element array (u8, u32 or 1-byte strings) and
opens it in a fresh interpreter, printing the file size, the interpreter's peak RSS
before and after the open, and their ratio. ADR 0004 asks for memory proportional to
the file: the growth should stay near 1-2x the array's bytes.

    python bench/gguf_metadata_memory.py --items 20000000 --kind u8
"""

from __future__ import annotations

import argparse
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

_ITEM_TYPES = {"u8": 0, "u32": 4, "str": 8}  # GGUF value type codes

# VmHWM, not ru_maxrss: the latter carries the parent's peak across fork and exec.
_MEASURE = """
import re, sys
from pathlib import Path
from ds4.adapters.gguf.reader import GGUFFile
def peak_kib():
    return int(re.search(r"VmHWM:\\s+(\\d+)", Path("/proc/self/status").read_text()).group(1))
before = peak_kib()
f = GGUFFile(sys.argv[1])
value = f.metadata["big"].value
print(before, peak_kib(), len(value))
"""


def _string(text: bytes) -> bytes:
    return struct.pack("<Q", len(text)) + text


def write_array_gguf(path: Path, kind: str, items: int) -> None:
    if kind == "str":
        # two-byte strings: distinct objects once decoded (one-byte ones are cached)
        records = np.zeros(items, dtype=[("n", "<u8"), ("c", "S2")])
        records["n"] = 2
        records["c"] = np.array([b"ab", b"cd", b"ef"])[np.arange(items) % 3]
        payload = records.tobytes()
    else:
        # values above 256, so a list of Python ints cannot share cached objects
        values = np.arange(items, dtype=np.uint64) + 1000
        payload = values.astype("<u1" if kind == "u8" else "<u4").tobytes()
    head = b"GGUF" + struct.pack("<IQQ", 3, 0, 1)
    record = _string(b"big") + struct.pack("<IIQ", 9, _ITEM_TYPES[kind], items)
    blob_end = len(head) + len(record) + len(payload)
    with path.open("wb") as out:
        out.write(head + record)
        out.write(payload)
        out.write(b"\0" * (-blob_end % 32))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=20_000_000)
    parser.add_argument("--kind", choices=sorted(_ITEM_TYPES), default="u8")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "big.gguf"
        write_array_gguf(path, args.kind, args.items)
        size = path.stat().st_size
        done = subprocess.run(
            [sys.executable, "-c", _MEASURE, str(path)], capture_output=True, text=True
        )
    if done.returncode != 0:
        print(done.stderr.strip().splitlines()[-1], file=sys.stderr)
        return 1
    before, after, count = (int(x) for x in done.stdout.split())
    grown = (after - before) * 1024
    print(
        f"{args.kind} x {count}: file {size / 2**20:.1f} MiB, peak RSS grew "
        f"{grown / 2**20:.1f} MiB ({grown / size:.2f}x the file)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
