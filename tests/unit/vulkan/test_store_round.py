"""The ds4 numerics' cache rounding on the device == the engine's lowprec / scalar_ops
functions bit for bit: FP8 KV rows + f16, Hadamard + FP4 indexer rows (+ f16) and
queries; with exact rounding ties, block maxima just above powers of two, zeros and
f16 overflow."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from ds4.adapters.compute.vulkan.compressor import StoreRounding, round_rows
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime
from ds4.domain.engine_math.layers import f16round
from ds4.domain.engine_math.lowprec import fp8_kv_sim, indexer_qat
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]


def _rows(kind: str, n: int, dim: int, top: float = 448.0) -> F32:
    rng = np.random.default_rng(dim + n)
    if kind == "random":
        mag = np.exp2(rng.integers(-20, 12, (n, 1)))
        return (rng.standard_normal((n, dim)) * mag).astype(np.float32)
    if kind == "ties":
        # multiples of 1/16 over a block max of 448 * 2^k: many exact E4M3/E2M1/f16 ties
        x = (rng.integers(-4000, 4000, (n, dim)) / 16).astype(np.float32)
        x[:, 0] = 448.0 * 4
        return x
    if kind == "near-pow2":
        # block maxima 0..7 ulps above top * 2^k, so amax / top lands a few ulps above a
        # power of two, where f32 log2 rounds back to k for |k| >= 4: the block scale
        # then follows the rounded log2, not the exact one (visible in the values small
        # enough to fall in the formats' subnormal steps)
        x = np.empty((n, dim), np.float32)
        stride = 64 if top == 448.0 else 32
        for r in range(n):
            peak = np.float32(top * 2.0 ** int(rng.integers(-24, 24)))
            for _ in range(r % 8):
                peak = np.nextafter(peak, np.float32(np.inf))
            x[r] = rng.uniform(-1, 1, dim) * peak * np.float32(2.0**-10)
            x[r, ::stride] = peak
        return x
    if kind == "zeros-and-huge":
        x = rng.standard_normal((n, dim)).astype(np.float32)
        x[0] = 0.0
        x[1, :64] = 0.0
        x[-1] *= 70000.0  # beyond f16's range: inf after the tail's f16 rounding
        return x
    raise AssertionError(kind)


KINDS = ["random", "ties", "near-pow2", "zeros-and-huge"]


def _same(got: F32, want: F32) -> None:
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32)), int(
        np.sum(got.view(np.uint32) != want.view(np.uint32))
    )


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")  # the reference's f16 inf
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("dim", "n_nope"), [(512, 448), (192, 128), (64, 0)])
def test_kv_rows(vk: VulkanRuntime, kind: str, dim: int, n_nope: int) -> None:
    x = _rows(kind, 40, dim)
    _same(
        round_rows(x, StoreRounding.KV_ROW, n_nope=n_nope, rt=vk), f16round(fp8_kv_sim(x, n_nope))
    )


@pytest.mark.filterwarnings("ignore:overflow encountered in cast")
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("dim", [128, 512])
def test_indexer_rows_and_queries(vk: VulkanRuntime, kind: str, dim: int) -> None:
    x = _rows(kind, 40, dim, top=6.0)  # near-pow2 here: before the Hadamard only
    qat = indexer_qat(x.reshape(40, -1, 128)).reshape(x.shape)
    _same(round_rows(x, StoreRounding.INDEX_ROW, rt=vk), f16round(qat))
    _same(round_rows(x, StoreRounding.INDEX_QUERY, rt=vk), qat)


def test_bad_shapes_are_refused(vk: VulkanRuntime) -> None:
    with pytest.raises(Ds4Error, match="blocks of 64"):
        round_rows(np.ones((2, 128), np.float32), StoreRounding.KV_ROW, n_nope=100, rt=vk)
    with pytest.raises(Ds4Error, match="Hadamard"):
        round_rows(np.ones((2, 96), np.float32), StoreRounding.INDEX_ROW, rt=vk)
    with pytest.raises(Ds4Error, match="at most"):
        round_rows(np.ones((2, 1024), np.float32), StoreRounding.INDEX_QUERY, rt=vk)
