"""Native activation quantizers == the engine's numpy quantizers, codes and scales bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from tests.unit.cpu_kernels.kernel_blocks import bits, edge_activations

from ds4.adapters.compute.cpu_kernels import quantize_activation_q8_0, quantize_activation_q8k
from ds4.domain.engine_math.quant_dots import quantize_q8_0, quantize_q8_k
from ds4.domain.errors import Ds4Error


@pytest.mark.parametrize("case", range(9))
def test_q8_0_activation_matches_numpy(case: int) -> None:
    x = edge_activations(1024, seed=case)[case]
    with np.errstate(over="ignore"):  # 1/d overflows for all-denormal blocks
        native, ref = quantize_activation_q8_0(x), quantize_q8_0(x)
    assert np.array_equal(native.codes, ref.codes)
    assert np.array_equal(bits(native.scales), bits(ref.scales))


@pytest.mark.parametrize("case", range(9))
def test_q8_k_activation_matches_numpy(case: int) -> None:
    x = edge_activations(1024, seed=case)[case]
    with np.errstate(over="ignore"):
        native, ref = quantize_activation_q8k(x), quantize_q8_k(x)
    assert ref.bsums is not None and native.bsums is not None
    assert np.array_equal(native.codes, ref.codes)
    assert np.array_equal(bits(native.scales), bits(ref.scales))
    assert np.array_equal(native.bsums, ref.bsums)


def test_q8_0_rounds_half_to_even_with_f32_scale() -> None:
    x = np.zeros(32, dtype=np.float32)
    x[:6] = [127.0, 2.5, -3.5, 0.5, -0.5, 1.5]  # amax 127 -> d = 1 exactly
    q = quantize_activation_q8_0(x)
    assert q.codes[0, :6].tolist() == [127, 2, -4, 0, 0, 2]
    assert q.scales.tolist() == [1.0]
    y = np.full(32, np.float32(0.1))  # scale kept in f32 (0.1/127), not rounded to f16
    assert quantize_activation_q8_0(y).scales[0] == np.float32(0.1) / np.float32(127)


def test_q8_0_partial_tail_block_is_zero_padded() -> None:
    x = np.arange(1, 41, dtype=np.float32)  # 32 + 8 values
    q = quantize_activation_q8_0(x)
    assert q.codes.shape == (2, 32)
    assert q.scales[1] == np.float32(40) / np.float32(127)
    assert q.codes[1, 8:].tolist() == [0] * 24 and q.codes[1, 7] == 127
    ref = quantize_q8_0(x)
    assert np.array_equal(q.codes, ref.codes) and np.array_equal(bits(q.scales), bits(ref.scales))


def test_q8_k_first_maximum_sets_the_sign_flip() -> None:
    x = np.zeros(256, dtype=np.float32)
    x[3], x[7] = -2.0, 2.0
    q = quantize_activation_q8k(x)
    # mx = -2 (first of the two): iscale = +63.5, so mx itself maps to -127.
    assert q.codes[0, 3] == -127 and q.codes[0, 7] == 127
    assert q.scales[0] == np.float32(1) / (np.float32(-127) / np.float32(-2))
    x[3] = 2.0
    q = quantize_activation_q8k(x)
    assert q.codes[0, 3] == -127 and q.scales[0] < 0  # mx > 0: d is negative
    assert q.bsums is not None and q.bsums[0, 0] == -254


def test_batched_rows_quantize_independently() -> None:
    x = np.random.default_rng(5).standard_normal((3, 512)).astype(np.float32)
    batch = quantize_activation_q8k(x)
    for t in range(3):
        one = quantize_activation_q8k(x[t])
        assert np.array_equal(batch.codes[t], one.codes)
        assert np.array_equal(bits(batch.scales[t]), bits(one.scales))


def test_q8_k_needs_whole_blocks() -> None:
    with pytest.raises(Ds4Error):
        quantize_activation_q8k(np.zeros(300, dtype=np.float32))
