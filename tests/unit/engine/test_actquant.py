"""Activation quantization and the integer dot products (docs/reference/model.md §4.2,
docs/reference/formats.md §5)."""

from __future__ import annotations

import numpy as np
import pytest

from ds4.adapters.quant.numpy_codec import NumpyDequantizer, NumpyQuantizer
from ds4.domain.engine_math.quant_dots import (
    dot_iq2_xxs,
    dot_q2_k,
    dot_q4_k,
    dot_q8_0,
    quantize_q8_0,
    quantize_q8_k,
)
from ds4.domain.gguf.ggml_types import GGMLType


def test_q8_0_keeps_an_f32_scale_and_rounds_half_even() -> None:
    x = np.zeros(40, dtype=np.float32)
    x[0], x[1], x[2] = 127.0, 0.5, 1.5  # d = 1: 0.5 -> 0, 1.5 -> 2
    x[32] = 0.1  # partial last block: d = 0.1/127 (not rounded to f16)
    act = quantize_q8_0(x)
    assert act.codes.shape == (2, 32)
    assert act.codes[0, :3].tolist() == [127, 0, 2]
    assert act.scales[1] == np.float32(np.float32(0.1) / np.float32(127))
    assert act.codes[1, 0] == 127 and not act.codes[1, 8:].any()


def test_q8_k_maps_the_largest_magnitude_to_minus_127() -> None:
    x = np.linspace(-1, 2, 256).astype(np.float32)
    act = quantize_q8_k(x)
    assert act.codes[0, -1] == -127 and act.scales[0] < 0
    assert act.bsums is not None and act.bsums[0, 0] == act.codes[0, :16].sum()
    assert np.allclose(act.codes[0] * act.scales[0], x, atol=abs(act.scales[0]))
    zero = quantize_q8_k(np.zeros(256, np.float32))
    assert zero.scales[0] == 0 and not zero.codes.any()


@pytest.mark.parametrize(
    ("kind", "dot", "act_quant"),
    [
        (GGMLType.Q8_0, dot_q8_0, quantize_q8_0),
        (GGMLType.Q2_K, dot_q2_k, quantize_q8_k),
        (GGMLType.Q4_K, dot_q4_k, quantize_q8_k),
        (GGMLType.IQ2_XXS, dot_iq2_xxs, quantize_q8_k),
    ],
)
def test_integer_dots_equal_the_dequantized_dot(kind, dot, act_quant) -> None:  # type: ignore[no-untyped-def]
    rng = np.random.default_rng(7)
    w = rng.normal(size=(6, 512)).astype(np.float32)
    raw = NumpyQuantizer().quantize(w, kind)
    x = rng.normal(size=512).astype(np.float32)
    act = act_quant(x)
    got = dot(raw, act)
    wq = NumpyDequantizer().dequantize(raw, kind).astype(np.float64)
    xq = (act.codes.astype(np.float64) * act.scales[:, None]).reshape(-1)
    want = wq @ xq
    assert np.allclose(got, want, rtol=1e-5, atol=1e-4 * np.abs(want).max())
