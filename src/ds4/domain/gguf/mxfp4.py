"""MXFP4, the OCP microscaling FP4 block (GGML type 39; docs/reference/formats.md §4.8).

A block holds 32 values in 17 bytes: one E8M0 scale byte, then 16 bytes of 4-bit E2M1
codes. Value j (0..15) is the low nibble of code byte j, value j + 16 its high nibble.
GGML keeps the E2M1 magnitudes doubled, as small integers (`KVALUES`), and halves the
scale to match: a value is KVALUES[code] * 2^(e - 128), i.e. E2M1[code] * 2^(e - 127),
exactly what DeepSeek's FP4 experts hold with the same scale byte. So a checkpoint's FP4
group repacks into an MXFP4 block without any rounding (`pack_codes`).

Decoding and encoding here are bit- and byte-identical to gguf-py's `gguf.quants.MXFP4`
(and its C twin in ggml): the scale comes from a float32 log2 of the block's largest
magnitude, its byte wraps modulo 256 as a C cast does, and each code is the first of the
16 nearest candidates. All arithmetic is float32.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]

BLOCK = 32
BLOCK_BYTES = 17
# Twice the E2M1 values, by 4-bit code (the sign is the top bit; 8 is negative zero,
# which GGML stores as +0).
KVALUES = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], dtype=np.int8)
_KVALUES_F32 = KVALUES.astype(np.float32)


def e8m0_half(e: U8) -> F32:
    """2^(e - 128) for each scale byte, exactly: bytes 0 and 1 are the float32
    subnormals 2^-128 and 2^-127, and 255 is 2^127 (no NaN)."""
    e32 = e.astype(np.uint32)
    bits = np.where(e32 < 2, np.uint32(0x00200000) << e32, (e32 - 1) << 23).astype(np.uint32)
    out: F32 = bits.view(np.float32)
    return out


def decode_blocks(blocks: U8) -> F32:
    """(n, 17) raw blocks -> (n, 32) float32."""
    d = e8m0_half(blocks[:, :1])
    qs = blocks[:, 1:]
    codes = np.concatenate([qs & 15, qs >> 4], axis=1)
    values: F32 = d * _KVALUES_F32[codes]
    return values


def scale_bytes(amax: F32) -> U8:
    """The scale byte for blocks whose largest magnitude is `amax`: floor(log2 amax) - 2
    + 127 (so the largest lands within the top code), wrapped to a byte; 0 for a block of
    zeros, NaN or infinity (what gguf-py's conversion gives there)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        exponent = np.floor(np.log2(amax.astype(np.float32)))
    usable = (amax > 0) & np.isfinite(exponent)
    biased = np.where(usable, exponent, np.float32(0)).astype(np.int64) + 125
    return np.where(usable, biased & 0xFF, 0).astype(np.uint8)


def pack_codes(codes: U8) -> U8:
    """(n, 32) 4-bit codes in value order -> (n, 16) code bytes."""
    packed: U8 = codes[:, :16] | (codes[:, 16:] << np.uint8(4))
    return packed


def encode_blocks(blocks: F32) -> U8:
    """(n, 32) float32 -> (n, 17) raw blocks: the nearest code under the block's scale,
    the lowest code on a tie (+0 over -0, the smaller of two neighbouring magnitudes)."""
    e = scale_bytes(np.abs(blocks).max(axis=1))
    d = e8m0_half(e)
    with np.errstate(over="ignore", invalid="ignore"):
        errs = np.abs(d[:, None, None] * _KVALUES_F32[None, None, :] - blocks[:, :, None])
    codes = np.argmin(errs, axis=2).astype(np.uint8)
    return np.concatenate([e[:, None], pack_codes(codes)], axis=1)
