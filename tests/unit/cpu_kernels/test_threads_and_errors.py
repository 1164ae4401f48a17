"""Results do not depend on the thread count; bad inputs raise Ds4Error."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
from tests.unit.cpu_kernels.kernel_blocks import ALL_TYPES, quant_rows, same_bits, weight_rows

from ds4.adapters.compute import cpu_kernels as ck
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType

COLS = 512


@pytest.fixture(autouse=True)
def restore_threads() -> Iterator[None]:
    before = ck.threads()
    yield
    ck.set_threads(before)


@pytest.mark.parametrize("ggml_type", ALL_TYPES, ids=lambda t: t.name)
def test_bit_identical_for_1_2_3_threads(ggml_type: GGMLType) -> None:
    raw = weight_rows(ggml_type, 203, COLS, seed=11)  # not a multiple of any chunk size
    x = np.random.default_rng(12).standard_normal((3, COLS)).astype(np.float32)
    for impl in ("scalar", "auto"):
        results = [ck.matmul(raw, ggml_type, x, threads=n, impl=impl) for n in (1, 2, 3)]
        assert ck.threads() == 3
        assert same_bits(results[0], results[1]) and same_bits(results[0], results[2])
        one = [ck.matvec(raw, ggml_type, x[1], threads=n, impl=impl) for n in (3, 1)]
        assert same_bits(one[0], one[1]) and same_bits(one[0], results[0][1])


def test_pool_survives_many_small_jobs_and_resizes() -> None:
    raw = quant_rows(GGMLType.Q8_0, 64, COLS, seed=1)
    x = np.random.default_rng(2).standard_normal(COLS).astype(np.float32)
    first = ck.matvec(raw, GGMLType.Q8_0, x, threads=2)
    for n in (1, 4, 2, 3):
        ck.set_threads(n)
        assert ck.threads() == n
        for _ in range(50):
            assert same_bits(ck.matvec(raw, GGMLType.Q8_0, x), first)


@pytest.mark.parametrize("bad", [GGMLType.Q4_0, GGMLType.Q8_K, GGMLType.I32, 99])
def test_unsupported_weight_types_raise(bad: int) -> None:
    with pytest.raises(Ds4Error):
        ck.matvec(np.zeros((4, 64), dtype=np.uint8), bad, np.zeros(32, dtype=np.float32))


def test_bad_shapes_raise() -> None:
    q8 = quant_rows(GGMLType.Q8_0, 4, COLS, seed=0)
    x = np.zeros(COLS, dtype=np.float32)
    with pytest.raises(Ds4Error, match="need"):
        ck.matvec(q8, GGMLType.Q8_0, np.zeros(COLS - 32, dtype=np.float32))  # row bytes differ
    with pytest.raises(Ds4Error, match="need"):
        ck.matvec(q8[:, :-1], GGMLType.Q8_0, np.zeros(COLS - 1, dtype=np.float32))
    with pytest.raises(Ds4Error, match="whole-block"):
        ck.matvec(np.zeros((4, 84), dtype=np.uint8), GGMLType.Q2_K, np.zeros(100, np.float32))
    with pytest.raises(Ds4Error):
        ck.matvec(q8, GGMLType.Q8_0, np.zeros((2, COLS), dtype=np.float32))
    with pytest.raises(Ds4Error):
        ck.matmul(q8, GGMLType.Q8_0, x)
    with pytest.raises(Ds4Error):
        ck.matvec(q8.astype(np.int16), GGMLType.Q8_0, x)
    with pytest.raises(Ds4Error, match="contiguous"):
        ck.matvec(np.asfortranarray(q8), GGMLType.Q8_0, x)


def test_bad_impl_and_thread_counts_raise() -> None:
    q8 = quant_rows(GGMLType.Q8_0, 4, COLS, seed=0)
    with pytest.raises(Ds4Error, match="not available"):
        ck.matvec(q8, GGMLType.Q8_0, np.zeros(COLS, np.float32), impl="cuda")
    for n in (0, -1, 1000):
        with pytest.raises(Ds4Error):
            ck.set_threads(n)
