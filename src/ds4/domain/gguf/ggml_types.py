"""GGML tensor types: ids, block geometry and byte sizes (docs/reference/formats.md §4.1).

Sizes follow gguf-py's table (the correct one), not ds4.c's two known-bad rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class GGMLType(IntEnum):
    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q8_1 = 9
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    Q8_K = 15
    IQ2_XXS = 16
    IQ2_XS = 17
    IQ3_XXS = 18
    IQ1_S = 19
    IQ4_NL = 20
    IQ3_S = 21
    IQ2_S = 22
    IQ4_XS = 23
    I8 = 24
    I16 = 25
    I32 = 26
    I64 = 27
    F64 = 28
    IQ1_M = 29
    BF16 = 30
    MXFP4 = 39  # OCP microscaling FP4: E8M0 scale + 32 e2m1 codes


@dataclass(frozen=True)
class BlockGeometry:
    elements: int  # values per block
    nbytes: int  # bytes per block


BLOCK_GEOMETRY: dict[GGMLType, BlockGeometry] = {
    GGMLType.F32: BlockGeometry(1, 4),
    GGMLType.F16: BlockGeometry(1, 2),
    GGMLType.Q4_0: BlockGeometry(32, 18),
    GGMLType.Q4_1: BlockGeometry(32, 20),
    GGMLType.Q5_0: BlockGeometry(32, 22),
    GGMLType.Q5_1: BlockGeometry(32, 24),
    GGMLType.Q8_0: BlockGeometry(32, 34),
    GGMLType.Q8_1: BlockGeometry(32, 40),
    GGMLType.Q2_K: BlockGeometry(256, 84),
    GGMLType.Q3_K: BlockGeometry(256, 110),
    GGMLType.Q4_K: BlockGeometry(256, 144),
    GGMLType.Q5_K: BlockGeometry(256, 176),
    GGMLType.Q6_K: BlockGeometry(256, 210),
    GGMLType.Q8_K: BlockGeometry(256, 292),
    GGMLType.IQ2_XXS: BlockGeometry(256, 66),
    GGMLType.IQ2_XS: BlockGeometry(256, 74),
    GGMLType.IQ3_XXS: BlockGeometry(256, 98),
    GGMLType.IQ1_S: BlockGeometry(256, 50),
    GGMLType.IQ4_NL: BlockGeometry(32, 18),
    GGMLType.IQ3_S: BlockGeometry(256, 110),
    GGMLType.IQ2_S: BlockGeometry(256, 82),
    GGMLType.IQ4_XS: BlockGeometry(256, 136),
    GGMLType.I8: BlockGeometry(1, 1),
    GGMLType.I16: BlockGeometry(1, 2),
    GGMLType.I32: BlockGeometry(1, 4),
    GGMLType.I64: BlockGeometry(1, 8),
    GGMLType.F64: BlockGeometry(1, 8),
    GGMLType.IQ1_M: BlockGeometry(256, 56),
    GGMLType.BF16: BlockGeometry(1, 2),
    GGMLType.MXFP4: BlockGeometry(32, 17),
}


def type_name(type_id: int) -> str:
    try:
        return GGMLType(type_id).name
    except ValueError:
        return f"type#{type_id}"


def tensor_nbytes(ggml_type: GGMLType, n_elements: int) -> int:
    """Bytes of a tensor of n_elements values (a partial last block counts whole)."""
    geo = BLOCK_GEOMETRY[ggml_type]
    return -(-n_elements // geo.elements) * geo.nbytes


def row_nbytes(ggml_type: GGMLType, row_elements: int) -> int:
    return tensor_nbytes(ggml_type, row_elements)
