"""Kernels chained in one command buffer over device-local intermediates give exactly the
results of the same kernels run one call at a time (the building block of a forward step
in one submission, docs/vulkan.md)."""

from __future__ import annotations

import numpy as np
from tests.unit.cpu_kernels.kernel_blocks import weight_rows

from ds4.adapters.compute.vulkan.ops import (
    apply_rope,
    record_rmsnorm,
    record_rope,
    rmsnorm,
    rope_tables,
)
from ds4.adapters.compute.vulkan.runtime import Recorder, VulkanRuntime
from ds4.adapters.compute.vulkan.weights import (
    kernel_tables,
    matmul,
    record_matmul,
    upload_weights,
)
from ds4.domain.engine_math.layers import RopeParams, Yarn
from ds4.domain.gguf.ggml_types import GGMLType


def test_norm_then_projection_then_rope_in_one_submission(vk: VulkanRuntime) -> None:
    n_tok, n_embd, n_head, head_dim = 3, 256, 2, 64
    rng = np.random.default_rng(8)
    x = rng.standard_normal((n_tok, n_embd)).astype(np.float32)
    norm_w = rng.standard_normal(n_embd).astype(np.float32)
    raw = weight_rows(GGMLType.Q8_0, n_head * head_dim, n_embd, seed=4)
    w = upload_weights(raw, GGMLType.Q8_0, n_embd, rt=vk)
    rp = RopeParams(n_rot=32, base=10000.0, yarn=Yarn(16.0, 65536, 32.0, 1.0))
    positions = np.array([5, 6, 7000])
    cos, sin = rope_tables(positions, rp, iterated=True)

    # One call at a time, through the host.
    step = rmsnorm(x, norm_w, 1e-6, rt=vk)
    step = matmul(w, step).reshape(n_tok, n_head, head_dim)
    want = apply_rope(step, positions, rp, iterated=True, rt=vk)

    # One submission; only the input and the final result touch host memory.
    inputs = [vk.host_buffer(a.nbytes) for a in (x, norm_w, cos, sin)]
    for buf, a in zip(inputs, (x, norm_w, cos, sin), strict=True):
        buf.write(a)
    xb, wb, cb, sb = inputs
    normed = vk.device_buffer(x.nbytes)
    projected = vk.device_buffer(want.nbytes)
    result = vk.host_buffer(want.nbytes)
    tables = kernel_tables(vk, w)

    def step_record(rec: Recorder) -> None:
        record_rmsnorm(rec, xb, wb, normed, n_embd, n_tok, 1e-6, True)
        rec.barrier()
        record_matmul(rec, w, normed, projected, n_tok, tables)
        rec.barrier()
        record_rope(rec, projected, cb, sb, (n_tok, n_head, head_dim), rp.n_rot, False)
        rec.barrier()
        rec.copy(projected, result, want.nbytes)

    vk.run(step_record)
    got = result.read(np.float32, want.size).reshape(want.shape)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    for buf in [*inputs, normed, projected, result]:
        buf.release()
    w.release()
