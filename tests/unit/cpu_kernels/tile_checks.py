"""The contract every prefill tile keeps (docs/performance.md#exactness): each output
equals the AVX2 row kernel's bit for bit, so a token's result does not depend on its
batch, and stays within the stated bound of the scalar kernel."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from tests.unit.cpu_kernels.kernel_blocks import same_bits
from tests.unit.cpu_kernels.test_simd_agreement import RTOL, magnitude_sum

from ds4.adapters.compute import cpu_kernels as ck
from ds4.domain.gguf.ggml_types import GGMLType


def assert_tile_equals_row_kernel(
    raw: npt.NDArray[np.uint8],
    gtype: GGMLType,
    x: npt.NDArray[np.float32],
    *,
    impl: str = "avx512",
    threads: int | None = None,
) -> None:
    tiled = ck.matmul(raw, gtype, x, impl=impl, threads=threads)
    alone = np.stack([ck.matvec(raw, gtype, x[t], impl="avx2") for t in range(len(x))])
    assert same_bits(tiled, alone)
    scalar = ck.matmul(raw, gtype, x, impl="scalar")
    for t in range(len(x)):
        bound = RTOL * magnitude_sum(raw, gtype, x[t])
        assert np.all(np.abs(tiled[t].astype(np.float64) - scalar[t]) <= bound)
