"""Kernel calls from several threads at once (the server's sessions) stay correct: each
thread stages through its own buffers and submissions are serialized."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
from tests.unit.cpu_kernels.kernel_blocks import weight_rows
from tests.unit.vulkan.reference import assert_dot_agrees, dequantized

from ds4.adapters.compute.vulkan.runtime import VulkanRuntime
from ds4.adapters.compute.vulkan.weights import matmul, matmul_q8, upload_weights
from ds4.domain.gguf.ggml_types import GGMLType


def test_concurrent_matmuls_each_get_their_own_answer(vk: VulkanRuntime) -> None:
    rows, cols = 33, 512
    raw = weight_rows(GGMLType.IQ2_XXS, rows, cols, seed=12)
    w = upload_weights(raw, GGMLType.IQ2_XXS, cols, rt=vk)
    xs = [np.random.default_rng(i).standard_normal((1 + i % 3, cols)).astype(np.float32)
          for i in range(12)]  # fmt: skip
    want_q8 = [matmul_q8(w, x) for x in xs]

    def both(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return matmul(w, x), matmul_q8(w, x)

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(both, xs * 3))
    deq = dequantized(raw, GGMLType.IQ2_XXS, rows, cols)
    for i, (f32, q8) in enumerate(results):
        x = xs[i % len(xs)]
        assert_dot_agrees(f32, deq, x)
        assert np.array_equal(q8, want_q8[i % len(xs)])
    w.release()
