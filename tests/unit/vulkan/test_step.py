"""DeviceStep: values move between host and device only when an op on the other side needs
them, a step submits once per host read, and the staging arena grows to fit."""

from __future__ import annotations

import numpy as np

from ds4.adapters.compute.vulkan.ops import record_rmsnorm
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime
from ds4.adapters.compute.vulkan.step import MIN_ARENA, BufferPool, DeviceStep
from ds4.domain.engine_math.layers import rmsnorm


def test_chained_ops_submit_once_per_host_read(vk: VulkanRuntime) -> None:
    pool = BufferPool(vk)
    step = DeviceStep(vk, pool)
    x = np.random.default_rng(0).standard_normal((3, 64)).astype(np.float32)
    v = step.host(x)
    a, b = step.new((3, 64)), step.new((3, 64))
    xb, ab, bb = step.dev(v), a.buf, b.buf
    assert ab is not None and bb is not None
    step.record(lambda rec: record_rmsnorm(rec, xb, xb, ab, 64, 3, 1e-6, False))
    step.record(lambda rec: record_rmsnorm(rec, ab, ab, bb, 64, 3, 1e-6, False))
    assert step.submissions == 0  # nothing ran yet
    (got,) = step.np(b)
    assert step.submissions == 1
    want = rmsnorm(rmsnorm(x, None, 1e-6), None, 1e-6)
    assert np.abs(got - want).max() <= 1e-5
    assert step.np(b)[0] is got  # already on the host: no second submission
    assert step.submissions == 1
    step.close()
    pool.close()


def test_uploads_larger_than_the_arena_flush_and_grow(vk: VulkanRuntime) -> None:
    pool = BufferPool(vk)
    step = DeviceStep(vk, pool)
    big = np.arange(MIN_ARENA // 4 + 1000, dtype=np.float32)
    small = step.host(np.ones(16, np.float32))
    step.dev(small)  # staged in the first arena
    v = step.host(big)
    step.dev(v)  # does not fit behind it: what is recorded goes first, the arena grows
    v.arr = None
    (back,) = step.np(v)
    assert np.array_equal(back, big)
    step.close()
    assert pool.arena_bytes >= big.nbytes  # the next step's arena fits at once
    pool.close()
