"""IQ4_NL and IQ4_XS, GGML's non-linear 4-bit blocks (types 20 and 23;
docs/reference/formats.md §4.9, §4.10).

Both store 4-bit codes that index one fixed table of 16 signed levels (`KVALUES`, a
published fact of the format, checked against gguf-py by the tests). Within a run of
32 values, value j (0..15) is the low nibble of code byte j and value j + 16 its high
nibble, as in MXFP4.

- IQ4_NL: 32 values in 18 bytes, an f16 scale d then 16 code bytes; value = d * K[code].
- IQ4_XS: 256 values in 136 bytes: f16 d, a u16 of the eight sub-blocks' high 2 scale
  bits (bits 2i..2i+1 for sub-block i), 4 bytes of their low 4 bits (sub-block i in
  the low nibble of byte i/2 when i is even, the high nibble when odd), then 8 x 16 code
  bytes. The 6-bit scale s_i is offset by 32: value = (d * (s_i - 32)) * K[code].

Decoding is float32 in that order, bit-identical to gguf-py's `IQ4_NL` and `IQ4_XS`.
ds4 does not encode either type (gguf-py does not either): it reads the files
llama-quantize writes.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]
I32 = npt.NDArray[np.int32]

KVALUES = np.array(
    [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.int8
)
_KVALUES_F32 = KVALUES.astype(np.float32)

NL_BLOCK_BYTES = 18
XS_BLOCK_BYTES = 136


def _f16(raw: U8) -> F32:
    out: F32 = np.ascontiguousarray(raw).view("<f2").astype(np.float32)
    return out


def codes_of_runs(qs: U8) -> U8:
    """(..., 16 * k) code bytes -> (..., 32 * k) codes in value order, per 16-byte run."""
    runs = qs.reshape(*qs.shape[:-1], -1, 1, 16)
    codes: U8 = np.concatenate([runs & 15, runs >> 4], axis=-2)
    return codes.reshape(*qs.shape[:-1], -1)


def xs_scales(blocks: U8) -> I32:
    """(..., 136) IQ4_XS blocks -> the eight signed sub-block scales s_i - 32 (..., 8)."""
    high = np.ascontiguousarray(blocks[..., 2:4]).view("<u2").astype(np.int32)
    low = blocks[..., 4:8].astype(np.int32)
    i = np.arange(8)
    lo4 = (low[..., i // 2] >> (4 * (i % 2))) & 15
    hi2 = (high >> (2 * i)) & 3
    scales: I32 = (lo4 | (hi2 << 4)) - 32
    return scales


def decode_nl(blocks: U8) -> F32:
    """(n, 18) raw IQ4_NL blocks -> (n, 32) float32."""
    d = _f16(blocks[:, :2])
    values: F32 = d * _KVALUES_F32[codes_of_runs(blocks[:, 2:])]
    return values


def decode_xs(blocks: U8) -> F32:
    """(n, 136) raw IQ4_XS blocks -> (n, 256) float32."""
    d = _f16(blocks[:, :2])  # (n, 1)
    dl = (d * xs_scales(blocks).astype(np.float32)).astype(np.float32)  # (n, 8)
    q = _KVALUES_F32[codes_of_runs(blocks[:, 8:])].reshape(-1, 8, 32)
    values: F32 = (dl[:, :, None] * q).reshape(-1, 256)
    return values
