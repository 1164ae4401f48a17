"""rows_affine.comp: gate + ape[(pos0 + t) % ratio] and x * s, bit-identical to numpy's
f32 expressions (the compressor score the reference forms)."""

from __future__ import annotations

import numpy as np

from ds4.adapters.compute.vulkan.compressor import record_rows_affine
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime


def test_score_rows_equal_the_reference_expression(vk: VulkanRuntime) -> None:
    rng = np.random.default_rng(0)
    n, dim, ratio, pos0 = 7, 96, 4, 13
    gate = rng.standard_normal((n, dim)).astype(np.float32) * 30
    ape = rng.standard_normal((ratio, dim)).astype(np.float32)
    xb, bb, yb = (
        vk.host_buffer(gate.nbytes),
        vk.host_buffer(ape.nbytes),
        vk.host_buffer(gate.nbytes),
    )
    xb.write(gate)
    bb.write(ape)
    vk.run(lambda rec: record_rows_affine(rec, xb, bb, yb, n_rows=n, dim=dim, pos0=pos0,
                                          period=ratio))  # fmt: skip
    positions = np.arange(pos0, pos0 + n)
    want = (gate + ape[positions % ratio]).astype(np.float32)
    assert np.array_equal(yb.read(np.float32, n * dim).reshape(n, dim), want)
    s = np.float32(0.0883883)
    vk.run(lambda rec: record_rows_affine(rec, xb, None, yb, n_rows=n, dim=dim, s=float(s)))
    assert np.array_equal(yb.read(np.float32, n * dim).reshape(n, dim), gate * s)
    for b in (xb, bb, yb):
        b.release()
