"""Bad quantize requests fail with a one-line Ds4Error naming the problem (both adapters)."""

from __future__ import annotations

import numpy as np
import pytest

from ds4.adapters.quant.native_codec import NativeQuantizer
from ds4.adapters.quant.numpy_codec import NumpyQuantizer, synthetic_importance
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.ports.model_file import Quantizer

QUANTIZERS: list[Quantizer] = [NumpyQuantizer(), NativeQuantizer()]
IDS = ["numpy", "native"]
ROWS = np.random.default_rng(0).standard_normal((2, 512)).astype(np.float32)


@pytest.mark.parametrize("quantizer", QUANTIZERS, ids=IDS)
@pytest.mark.parametrize(
    ("values", "ggml_type", "importance", "message"),
    [
        (ROWS, GGMLType.Q4_0, None, "cannot quantize to Q4_0"),
        (ROWS[:, :100], GGMLType.Q4_K, None, "not a whole number of Q4_K blocks"),
        (ROWS[:, :48], GGMLType.Q8_0, None, "not a whole number of Q8_0 blocks"),
        (np.where(ROWS > 2, np.nan, ROWS), GGMLType.Q2_K, None, "NaN or infinite"),
        (np.where(ROWS > 2, np.inf, ROWS), GGMLType.Q8_0, None, "NaN or infinite"),
        (ROWS.astype(np.int32), GGMLType.F16, None, "must be floating point"),
        (np.float32(1.0), GGMLType.F32, None, "at least one axis"),
        (ROWS, GGMLType.IQ2_XXS, np.ones(256, np.float32), "importance has shape"),
        (ROWS, GGMLType.Q4_K, -np.ones(512, np.float32), "finite and non-negative"),
        (ROWS, GGMLType.Q2_K, np.full(512, np.nan, np.float32), "finite and non-negative"),
    ],
)
def test_bad_requests_raise_ds4_error(
    quantizer: Quantizer,
    values: np.ndarray,
    ggml_type: GGMLType,
    importance: np.ndarray | None,
    message: str,
) -> None:
    with pytest.raises(Ds4Error, match=message) as info:
        quantizer.quantize(values, ggml_type, importance)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("quantizer", QUANTIZERS, ids=IDS)
def test_float_types_pass_nan_and_inf_through(quantizer: Quantizer) -> None:
    x = np.array([[np.nan, np.inf, -np.inf, 1.5]], dtype=np.float32)
    f32 = quantizer.quantize(x, GGMLType.F32).view("<f4")
    assert np.array_equal(f32, x, equal_nan=True)
    f16 = quantizer.quantize(x, GGMLType.F16).view("<u2")
    assert list(f16[0]) == [0x7E00, 0x7C00, 0xFC00, 0x3E00]


@pytest.mark.parametrize("quantizer", QUANTIZERS, ids=IDS)
def test_empty_input_gives_empty_output(quantizer: Quantizer) -> None:
    out = quantizer.quantize(np.zeros((0, 256), np.float32), GGMLType.IQ2_XXS)
    assert out.shape == (0, 66)


def test_native_quantizer_rejects_zero_threads() -> None:
    with pytest.raises(Ds4Error, match="at least 1"):
        NativeQuantizer(threads=0)


def test_synthetic_importance_is_the_column_sum_of_squares() -> None:
    x = np.array([[1.0, -2.0], [3.0, 0.5]], dtype=np.float32)
    assert np.array_equal(synthetic_importance(x), np.array([10.0, 4.25], np.float32))
