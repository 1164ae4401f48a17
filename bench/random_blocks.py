"""Random GGUF block bytes for benches, without the native cpu build (numpy only)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType

U8 = npt.NDArray[np.uint8]


def random_blocks(kind: GGMLType, rows: int, cols: int, rng: np.random.Generator) -> U8:
    """Random block bytes with small finite f16 scales (NaN-free timing)."""
    if kind is GGMLType.F16:
        w = (rng.standard_normal((rows, cols)) * 0.02).astype(np.float16)
        return w.view(np.uint8)
    geo = BLOCK_GEOMETRY[kind]
    raw = rng.integers(0, 256, (rows, cols // geo.elements, geo.nbytes), dtype=np.uint8)
    fields = {GGMLType.Q8_0: (0,), GGMLType.IQ2_XXS: (0,), GGMLType.Q2_K: (80, 82),
              GGMLType.Q4_K: (0, 2)}[kind]  # fmt: skip
    for off in fields:
        scale = (rng.random(raw.shape[:2]) * 0.01 + 0.001).astype(np.float16)
        raw[:, :, off : off + 2] = scale.view(np.uint8).reshape(*raw.shape[:2], 2)
    return raw.reshape(rows, -1)
