"""Small GGUF files for reader tests: every metadata type and every dequantizable tensor type."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ds4.adapters.gguf.writer import GGUFWriter
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType
from ds4.domain.gguf.records import MetaValue, ValueType

SAMPLE_METADATA: dict[str, MetaValue] = {
    "general.architecture": MetaValue(ValueType.STRING, "deepseek4"),
    "t.u8": MetaValue(ValueType.UINT8, 200),
    "t.i8": MetaValue(ValueType.INT8, -100),
    "t.u16": MetaValue(ValueType.UINT16, 60000),
    "t.i16": MetaValue(ValueType.INT16, -30000),
    "t.u32": MetaValue(ValueType.UINT32, 4_000_000_000),
    "t.i32": MetaValue(ValueType.INT32, -2_000_000_000),
    "t.f32": MetaValue(ValueType.FLOAT32, 1.5),
    "t.bool": MetaValue(ValueType.BOOL, True),
    "t.string": MetaValue(ValueType.STRING, "héllo ｜DSML｜ 🙂"),
    "t.u64": MetaValue(ValueType.UINT64, 2**63 + 5),
    "t.i64": MetaValue(ValueType.INT64, -(2**62)),
    "t.f64": MetaValue(ValueType.FLOAT64, 0.1),
    "t.arr_u32": MetaValue(ValueType.ARRAY, [0, 4, 128, 7], ValueType.UINT32),
    "t.arr_f32": MetaValue(ValueType.ARRAY, [10.0, -0.5], ValueType.FLOAT32),
    "t.arr_str": MetaValue(ValueType.ARRAY, ["a", "", "ü b"], ValueType.STRING),
    "t.arr_bool": MetaValue(ValueType.ARRAY, [True, False], ValueType.BOOL),
    "t.arr_empty": MetaValue(ValueType.ARRAY, [], ValueType.INT64),
}

SAMPLE_TYPES = (
    GGMLType.F32,
    GGMLType.F16,
    GGMLType.BF16,
    GGMLType.Q8_0,
    GGMLType.Q2_K,
    GGMLType.Q4_K,
    GGMLType.IQ2_XXS,
    GGMLType.I32,
)


def random_blocks(ggml_type: GGMLType, n_values: int, rng: np.random.Generator) -> bytes:
    """Valid random data: random codes, finite f16 scales where a block has them."""
    geo = BLOCK_GEOMETRY[ggml_type]
    if ggml_type is GGMLType.F32:
        return rng.standard_normal(n_values).astype("<f4").tobytes()
    if ggml_type is GGMLType.F16:
        return rng.standard_normal(n_values).astype("<f2").tobytes()
    if ggml_type is GGMLType.BF16:
        bits = rng.standard_normal(n_values).astype("<f4").view("<u4") >> 16
        return bits.astype("<u2").tobytes()
    if ggml_type is GGMLType.I32:
        return rng.integers(-(2**31), 2**31, n_values, dtype="<i4").tobytes()
    blocks = rng.integers(0, 256, (n_values // geo.elements, geo.nbytes), dtype=np.uint8)
    scale_offsets = {GGMLType.Q8_0: (0,), GGMLType.Q2_K: (80, 82), GGMLType.Q4_K: (0, 2),
                     GGMLType.IQ2_XXS: (0,)}[ggml_type]  # fmt: skip
    for off in scale_offsets:
        scales = (rng.standard_normal(len(blocks)) * 0.01).astype("<f2")
        blocks[:, off : off + 2] = scales.view(np.uint8).reshape(-1, 2)
    return blocks.tobytes()


def write_sample(path: Path, *, alignment: int = 32, seed: int = 0) -> dict[str, bytes]:
    """Write a GGUF with SAMPLE_METADATA and one 2-D tensor per SAMPLE_TYPES entry.

    Returns the raw bytes written for each tensor.
    """
    rng = np.random.default_rng(seed)
    writer = GGUFWriter(path, alignment=alignment)
    for key, value in SAMPLE_METADATA.items():
        writer.add_metadata(key, value)
    data: dict[str, bytes] = {}
    for ggml_type in SAMPLE_TYPES:
        name = f"tensor.{ggml_type.name.lower()}"
        dims = (512, 3)
        writer.add_tensor(name, dims, ggml_type)
        data[name] = random_blocks(ggml_type, 512 * 3, rng)
    with writer:
        for name, raw in data.items():
            writer.write_tensor(name, raw)
        writer.finish()
    return data
