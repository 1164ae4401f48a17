"""cpu_kernels.prepare: a product checked once gives the same bits as matvec / matmul for
every weight type and kernel set, writes into a caller's buffer, and still refuses bad
weights (at preparation) and bad activations or outputs (per call) with a Ds4Error."""

from __future__ import annotations

import numpy as np
import pytest
from tests.unit.cpu_kernels.kernel_blocks import ALL_TYPES, quant_rows, same_bits, weight_rows

from ds4.adapters.compute import cpu_kernels as ck
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType

COLS = 512


@pytest.mark.parametrize("ggml_type", ALL_TYPES, ids=lambda t: t.name)
@pytest.mark.parametrize("impl", ck.available_impls())
def test_prepared_equals_the_one_shot_calls(ggml_type: GGMLType, impl: str) -> None:
    raw = weight_rows(ggml_type, 37, COLS, seed=5)
    x = np.random.default_rng(6).standard_normal((5, COLS)).astype(np.float32)
    product = ck.prepare(raw, ggml_type, COLS, impl=impl)
    assert product.shape == (37, COLS)
    assert same_bits(product.matvec(x[2]), ck.matvec(raw, ggml_type, x[2], impl=impl))
    assert same_bits(product.matmul(x), ck.matmul(raw, ggml_type, x, impl=impl))
    out = np.full(37, np.nan, dtype=np.float32)
    assert product.matvec(x[3], out) is out
    assert same_bits(out, ck.matvec(raw, ggml_type, x[3], impl=impl))
    # a list or a float64 vector takes the converting path, with the same result
    assert same_bits(product.matvec(x[1].astype(np.float64).tolist()), product.matvec(x[1]))


def test_bad_weights_are_refused_when_preparing() -> None:
    raw = quant_rows(GGMLType.Q8_0, 8, COLS, seed=1)
    with pytest.raises(Ds4Error, match="bytes"):
        ck.prepare(raw, GGMLType.Q8_0, COLS + 32)
    with pytest.raises(Ds4Error, match="cols"):
        ck.prepare(raw, GGMLType.Q8_0, 0)
    with pytest.raises(Ds4Error, match="do not support"):
        ck.prepare(raw, GGMLType.Q4_0, COLS)
    with pytest.raises(Ds4Error, match="not available"):
        ck.prepare(raw, GGMLType.Q8_0, COLS, impl="vector9000")


def test_bad_activations_and_outputs_are_refused_per_call() -> None:
    raw = quant_rows(GGMLType.Q8_0, 8, COLS, seed=1)
    product = ck.prepare(raw, GGMLType.Q8_0, COLS)
    x = np.ones(COLS, dtype=np.float32)
    for bad in (np.ones(COLS - 1, np.float32), np.ones((2, COLS), np.float32), np.ones(0)):
        with pytest.raises(Ds4Error, match="activation vector"):
            product.matvec(bad)
    with pytest.raises(Ds4Error, match=r"\(tokens, cols\)"):
        product.matmul(x)
    for out in (np.empty(7, np.float32), np.empty(8, np.float64), np.empty(16, np.float32)[::2]):
        with pytest.raises(Ds4Error, match="out must be"):
            product.matvec(x, out)  # type: ignore[arg-type]  # the wrong dtype on purpose
    frozen = np.empty(8, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(Ds4Error, match="out must be"):
        product.matvec(x, frozen)
