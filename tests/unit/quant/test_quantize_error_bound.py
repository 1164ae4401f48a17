"""Quantizer error bound: never worse than round-to-nearest with the format's own scales.

The baselines below are the yardstick (issue 3). A baseline takes each block's range
for its scales, with no search, and rounds every value and every scale code to the
nearest level:

* Q2_K / Q4_K: per sub-block min m = min(0, min x) and step s = (max x - m) / nmax
  (nmax 3 or 15); super scales d = f16(max s / K), dmin = f16(max(-m) / K), K = 15
  (Q2_K's 4-bit scale codes) or 63 (Q4_K's 6-bit ones); scale codes sc = rint(s / d),
  mn = rint(-m / dmin) in [0, K]; value codes q = rint((x + dmin*mn) / (d*sc)) in
  [0, nmax]; reconstruction d*sc*q - dmin*mn.
* IQ2_XXS: per 32-value group the step db = max|x| / 43 (the top grid value);
  d = f16(max db / (15.5 * 0.25)); scale code ls = rint(db / (0.25 d) - 0.5) in [0, 15];
  each run of 8 magnitudes takes the nearest of the 256 grid points (plain Euclidean
  distance); signs follow x, and an odd count of negatives flips the smallest value.

The quantizers must reconstruct (through the ds4 dequantizer) with RMSE <= baseline,
plain RMSE without importance, importance-weighted RMSE with it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest

from ds4.adapters.quant.native_codec import NativeQuantizer
from ds4.adapters.quant.numpy_codec import NumpyDequantizer, NumpyQuantizer
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.iq2xxs_tables import IQ2XXS_GRID

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
QUANTIZER = NativeQuantizer()  # byte-identical to NumpyQuantizer (test_quantize_identity)
DEQUANTIZER = NumpyDequantizer()


def _f16(v: F64) -> F64:
    return v.astype(np.float16).astype(np.float64)


def _div(a: F64, b: F64) -> F64:
    b = np.broadcast_to(b, a.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b > 0, a / np.where(b > 0, b, 1.0), 0.0)


def rtn_k_quant(x: F32, sub: int, nmax: int, levels: int) -> F64:
    blocks = x.astype(np.float64).reshape(-1, 256 // sub, sub)
    m = np.minimum(blocks.min(axis=2), 0.0)
    s = (blocks.max(axis=2) - m) / nmax
    d = _f16(s.max(axis=1) / levels)[:, None]
    dmin = _f16((-m).max(axis=1) / levels)[:, None]
    sc = np.clip(np.rint(_div(s, d)), 0, levels)
    mn = np.clip(np.rint(_div(-m, dmin)), 0, levels)
    step, offset = (d * sc)[:, :, None], (dmin * mn)[:, :, None]
    q = np.clip(np.rint(_div(blocks + offset, step)), 0, nmax)
    out: F64 = (step * q - offset).reshape(x.shape)
    return out


def rtn_iq2_xxs(x: F32) -> F64:
    groups = x.astype(np.float64).reshape(-1, 8, 32)
    db = np.abs(groups).max(axis=2) / 43.0
    d = _f16(db.max(axis=1) / (15.5 * 0.25))[:, None]
    ls = np.clip(np.rint(_div(db, 0.25 * d) - 0.5), 0, 15)
    step = (d * (0.5 + ls) * 0.25)[:, :, None, None]
    runs = groups.reshape(-1, 8, 4, 8)
    mag = _div(np.abs(runs), step)
    grid = IQ2XXS_GRID.astype(np.float64)
    nearest = ((mag[..., None, :] - grid) ** 2).sum(axis=-1).argmin(axis=-1)
    negative = runs < 0
    odd = negative.sum(axis=-1) % 2 == 1
    flip = odd[..., None] & (np.arange(8) == np.abs(runs).argmin(axis=-1)[..., None])
    out: F64 = (grid[nearest] * step * np.where(negative ^ flip, -1.0, 1.0)).reshape(x.shape)
    return out


BASELINES: dict[GGMLType, Callable[[F32], F64]] = {
    GGMLType.Q2_K: lambda x: rtn_k_quant(x, 16, 3, 15),
    GGMLType.Q4_K: lambda x: rtn_k_quant(x, 32, 15, 63),
    GGMLType.IQ2_XXS: rtn_iq2_xxs,
}


def _data(kind: str) -> F32:
    rng = np.random.default_rng(2026)
    if kind == "gaussian":
        return rng.standard_normal((32, 2048)).astype(np.float32)
    return rng.standard_t(3, (32, 2048)).astype(np.float32)


def rmse(x: F32, y: F32 | F64, importance: F32 | None = None) -> float:
    err = (x.astype(np.float64) - y) ** 2
    w = np.ones(x.shape[-1]) if importance is None else importance.astype(np.float64)
    return float(np.sqrt((err * w).sum() / (w.sum() * x.shape[0])))


def reconstruct(x: F32, ggml_type: GGMLType, importance: F32 | None) -> F32:
    return DEQUANTIZER.dequantize(QUANTIZER.quantize(x, ggml_type, importance), ggml_type)


@pytest.mark.parametrize("ggml_type", list(BASELINES), ids=lambda t: t.name)
@pytest.mark.parametrize("kind", ["gaussian", "student_t3"])
@pytest.mark.parametrize("weighted", [False, True], ids=["plain", "importance"])
def test_no_worse_than_round_to_nearest(ggml_type: GGMLType, kind: str, weighted: bool) -> None:
    x = _data(kind)
    importance = None
    if weighted:
        importance = np.random.default_rng(5).lognormal(0, 1.5, 2048).astype(np.float32)
    got = rmse(x, reconstruct(x, ggml_type, importance), importance)
    baseline = rmse(x, BASELINES[ggml_type](x), importance)
    assert got <= baseline, f"{ggml_type.name} {kind}: rmse {got:.5f} > RTN {baseline:.5f}"


def test_importance_lowers_the_weighted_error() -> None:
    x = _data("student_t3")
    importance = np.random.default_rng(6).lognormal(0, 1.5, 2048).astype(np.float32)
    for ggml_type in BASELINES:
        plain = rmse(x, reconstruct(x, ggml_type, None), importance)
        weighted = rmse(x, reconstruct(x, ggml_type, importance), importance)
        assert weighted < plain, ggml_type.name


@pytest.mark.parametrize(
    ("ggml_type", "low", "high"),
    [
        (GGMLType.Q8_0, 0.003, 0.008),
        (GGMLType.Q4_K, 0.05, 0.08),
        (GGMLType.Q2_K, 0.22, 0.32),
        (GGMLType.IQ2_XXS, 0.30, 0.37),
    ],
    ids=lambda v: v.name if isinstance(v, GGMLType) else str(v),
)
def test_relative_error_on_gaussian_data_is_in_the_expected_range(
    ggml_type: GGMLType, low: float, high: float
) -> None:
    # docs/reference/formats.md §6.1 smoke numbers: Q2_K ~0.26, Q4_K ~0.067, IQ2_XXS ~0.34.
    x = _data("gaussian")
    relative = rmse(x, reconstruct(x, ggml_type, None)) / rmse(x, np.zeros_like(x))
    assert low < relative < high


def test_round_trip_through_the_reference_quantizer_and_both_dequantizers() -> None:
    x = _data("gaussian")[:2, :512]
    for ggml_type in (GGMLType.Q8_0, *BASELINES):
        raw = NumpyQuantizer().quantize(x, ggml_type)
        y = DEQUANTIZER.dequantize(raw, ggml_type)
        assert y.shape == x.shape
        assert rmse(x, y) < 0.4 * rmse(x, np.zeros_like(x))


def test_q8_0_error_is_at_most_half_a_step_per_value() -> None:
    x = _data("student_t3")[:4]
    y = reconstruct(x, GGMLType.Q8_0, None)
    step = np.abs(x.reshape(-1, 32)).max(axis=1, keepdims=True) / 127
    err = np.abs(x - y).reshape(-1, 32)
    # half a step for rounding plus the f16 rounding of the scale (<= 2^-11 relative)
    assert (err <= step * (0.5 + 127 * 2.0**-11) + 1e-12).all()


@pytest.mark.parametrize("ggml_type", list(BASELINES), ids=lambda t: t.name)
def test_constant_and_zero_rows(ggml_type: GGMLType) -> None:
    x = np.stack([np.zeros(256), np.full(256, 0.75), np.full(256, -3.0)]).astype(np.float32)
    y = reconstruct(x, ggml_type, None)
    assert np.array_equal(y[0], np.zeros(256, np.float32))
    if ggml_type is GGMLType.IQ2_XXS:
        # The grid has no all-equal run at its middle or top level and the search
        # scans scales that put the largest value near the top, so a constant is only
        # approximated; it must still beat round-to-nearest.
        assert rmse(x[1:], y[1:]) <= rmse(x[1:], rtn_iq2_xxs(x[1:]))
    else:
        assert np.abs(y[1:] - x[1:]).max() <= 0.02 * np.abs(x[1:]).max()
