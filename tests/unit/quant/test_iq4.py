"""IQ4_NL / IQ4_XS: the level table is gguf-py's (Python and C copies), the sub-block
scales unpack as gguf-py reads them, and ds4 refuses to write either type by name."""

from __future__ import annotations

import re
from pathlib import Path

import gguf.quants
import numpy as np
import pytest

from ds4.adapters.quant.native_codec import NativeQuantizer
from ds4.adapters.quant.numpy_codec import NumpyQuantizer
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf import iq4
from ds4.domain.gguf.ggml_types import GGMLType

ROOT = Path(__file__).resolve().parents[3]


def test_levels_are_gguf_pys() -> None:
    assert tuple(int(v) for v in iq4.KVALUES) == tuple(gguf.quants.IQ4_NL.kvalues)


@pytest.mark.parametrize(
    "path", ["native/common/ds4_iq4_values.h", "native/vulkan/iq4_levels.glsl"]
)
def test_native_level_copies_match(path: str) -> None:
    text = (ROOT / path).read_text()
    body = re.search(r"\{([^}]*)\}|\(([^)]*-127[^)]*)\)", text)
    assert body
    numbers = [int(v) for v in re.findall(r"-?\d+", body.group(1) or body.group(2))]
    assert numbers[-16:] == [int(v) for v in iq4.KVALUES]


def test_xs_scales_cover_every_six_bit_value() -> None:
    """Each sub-block's scale is its low nibble | high 2 bits << 4, minus 32."""
    blocks = np.zeros((64, 136), dtype=np.uint8)
    s = np.arange(64)
    for i in range(8):  # sub-block i of block k holds scale (k + i) % 64
        v = (s + i) % 64
        blocks[:, 4 + i // 2] |= ((v & 15) << (4 * (i % 2))).astype(np.uint8)
        high = (v >> 4).astype(np.uint16) << (2 * i)
        both = blocks[:, 2:4].copy().view("<u2")[:, 0] | high
        blocks[:, 2:4] = both.astype("<u2").view(np.uint8).reshape(-1, 2)
    want = (s[:, None] + np.arange(8)[None]) % 64 - 32
    assert np.array_equal(iq4.xs_scales(blocks), want)


@pytest.mark.parametrize("ggml_type", [GGMLType.IQ4_NL, GGMLType.IQ4_XS])
def test_writing_a_read_only_type_is_refused_by_name(ggml_type: GGMLType) -> None:
    x = np.ones((2, 256), dtype=np.float32)
    for quantizer in (NumpyQuantizer(), NativeQuantizer()):
        with pytest.raises(Ds4Error, match=f"cannot quantize to {ggml_type.name}"):
            quantizer.quantize(x, ggml_type)
