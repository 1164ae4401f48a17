"""Write safetensors files from raw numpy arrays with an explicit dtype name (tests only).

The `safetensors` package cannot write FP8 or BF16 from numpy; the format is simple
enough to write directly: u64 header length, JSON header, then the data.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ds4.adapters.checkpoint import DTYPES


def write_safetensors(path: Path, tensors: dict[str, tuple[str, npt.NDArray[np.generic]]]) -> None:
    """tensors: name -> (safetensors dtype, array whose bytes are stored as-is)."""
    header: dict[str, object] = {"__metadata__": {"format": "pt"}}
    blobs = []
    offset = 0
    for name, (dtype, array) in tensors.items():
        raw = np.ascontiguousarray(array).tobytes()
        assert len(raw) == array.size * DTYPES[dtype].itemsize, name
        header[name] = {"dtype": dtype, "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(raw)]}  # fmt: skip
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
