"""The indexer top-k selection (ds4_fw_topk_mask) against a full sort, and the native
scratch arena's reuse (ds4_scratch.h)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from tests.unit.cpu_kernels.kernel_blocks import quant_rows

from ds4 import _native_cpu  # type: ignore[attr-defined]
from ds4.adapters.compute import cpu_kernels as ck
from ds4.domain.engine_math.layers import top_k_mask
from ds4.domain.gguf.ggml_types import GGMLType

_ffi, _lib = _native_cpu.ffi, _native_cpu.lib
F32 = npt.NDArray[np.float32]


def native_mask(scores: F32, k: int, *, fullsort: bool = False) -> npt.NDArray[np.uint8]:
    s = np.ascontiguousarray(scores, dtype=np.float32)
    allowed = np.full(s.size, 7, dtype=np.uint8)  # every byte must be written
    fn = _lib.ds4_fw_topk_mask_fullsort if fullsort else _lib.ds4_fw_topk_mask
    rc = fn(_ffi.cast("const float *", _ffi.from_buffer(s)), s.size, k,
            _ffi.cast("unsigned char *", _ffi.from_buffer(allowed)))  # fmt: skip
    assert rc == 0
    return allowed


def sorted_mask(scores: F32, k: int) -> npt.NDArray[np.uint8]:
    """The reference backend's rule: a stable sort by descending score (NaN last)."""
    out = np.zeros(scores.size, dtype=np.uint8)
    out[top_k_mask(scores, k)] = 1
    return out


def score_sets(rng: np.random.Generator) -> dict[str, F32]:
    n = 3000
    ties = rng.integers(-3, 4, n).astype(np.float32)  # seven values: ties everywhere
    signed_zeros = np.where(rng.random(n) < 0.5, np.float32(0.0), np.float32(-0.0))
    signed_zeros[rng.integers(0, n, 40)] = rng.standard_normal(40).astype(np.float32)
    infs = rng.standard_normal(n).astype(np.float32)
    infs[rng.integers(0, n, 100)] = np.inf
    infs[rng.integers(0, n, 100)] = -np.inf
    return {
        "random": rng.standard_normal(n).astype(np.float32),
        "ties": ties,
        "all_equal": np.full(n, 0.25, dtype=np.float32),
        "ascending": np.arange(n, dtype=np.float32),
        "descending": np.arange(n, 0, -1).astype(np.float32),
        "ascending_ties": np.repeat(np.arange(n // 10, dtype=np.float32), 10),
        "signed_zeros": signed_zeros,
        "infinities": infs,
        "tiny_subnormals": (rng.integers(-5, 6, n) * np.float32(1e-45)).astype(np.float32),
    }


@pytest.mark.parametrize("k", [0, 1, 2, 7, 512, 2999, 3000, 4000])
def test_topk_mask_equals_a_full_sort(k: int) -> None:
    for name, scores in score_sets(np.random.default_rng(k)).items():
        want = sorted_mask(scores, k)
        assert np.array_equal(native_mask(scores, k), want), name
        assert np.array_equal(native_mask(scores, k, fullsort=True), want), name
        assert int(want.sum()) == min(k, scores.size)


def test_topk_mask_small_and_random_shapes() -> None:
    rng = np.random.default_rng(5)
    for _ in range(300):
        n = int(rng.integers(1, 80))
        k = int(rng.integers(0, n + 3))
        scores = rng.integers(-2, 3, n).astype(np.float32) * np.float32(rng.random())
        assert np.array_equal(native_mask(scores, k), sorted_mask(scores, k)), (n, k)


def test_topk_mask_puts_nan_last() -> None:
    rng = np.random.default_rng(9)
    scores = rng.standard_normal(500).astype(np.float32)
    scores[rng.integers(0, 500, 120)] = np.nan
    n_nan = int(np.isnan(scores).sum())
    for k in (1, 100, 500 - n_nan, 500 - n_nan + 3, 499):
        assert np.array_equal(native_mask(scores, k), sorted_mask(scores, k)), k


def test_topk_mask_of_nothing() -> None:
    assert native_mask(np.zeros(0, dtype=np.float32), 4).size == 0


def _stats() -> Any:
    out = _ffi.new("ds4_scratch_stats *")
    _lib.ds4_scratch_get_stats(out)
    return out


def _product() -> None:
    x = np.ones((5, 256), dtype=np.float32)
    ck.matmul(quant_rows(GGMLType.Q8_0, 64, 256, seed=1), GGMLType.Q8_0, x)


def test_scratch_is_reused_and_released() -> None:
    _product()
    first = _stats()
    assert first.in_use == 0 and first.capacity >= first.high_water > 0
    allocs = first.system_allocs
    for _ in range(5):
        _product()
    assert _stats().system_allocs == allocs  # the same call shape takes no new memory
    assert _lib.ds4_scratch_release() == 0
    assert _stats().capacity == 0
    _product()
    assert _stats().system_allocs > allocs


def test_scratch_belongs_to_the_calling_thread() -> None:
    _product()
    seen: list[int] = []

    def worker() -> None:
        seen.append(int(_stats().capacity))  # a fresh thread has no arena yet
        _product()
        seen.append(int(_stats().capacity))

    t = threading.Thread(target=worker)
    t.start()
    t.join()
    assert seen[0] == 0 and seen[1] > 0
    assert _stats().capacity > 0
