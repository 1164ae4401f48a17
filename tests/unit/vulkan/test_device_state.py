"""DeviceRows / DeviceLayerState: the device twin of GrowRows and LayerState keeps the
same rows under growth, truncation, trimming and the host round trip; a DeviceStep submits
once per host read."""

from __future__ import annotations

import numpy as np
import pytest

from ds4.adapters.compute.reference.state import GrowRows, LayerState
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime
from ds4.adapters.compute.vulkan.step import BufferPool, DeviceLayerState, DeviceRows, DeviceStep
from ds4.domain.model.presets import TINY_SHAPES

WIDTH = 8


def _rows(start: int, end: int) -> np.ndarray:
    return np.arange(start * WIDTH, end * WIDTH, dtype=np.float32).reshape(-1, WIDTH)


def _append(step: DeviceStep, rows: DeviceRows, start: int, end: int) -> None:
    buf = rows.reserve(step, end)
    step.upload_into(_rows(start, end), buf, rows.offset(start))
    rows.n = end


def _host(step: DeviceStep, rows: DeviceRows) -> GrowRows:
    got = GrowRows(WIDTH)
    rows.download(step, got)
    return got


@pytest.fixture
def pool(vk: VulkanRuntime) -> BufferPool:
    return BufferPool(vk)


def test_rows_survive_growth_truncation_and_trim(vk: VulkanRuntime, pool: BufferPool) -> None:
    rows = DeviceRows(vk, WIDTH)
    step = DeviceStep(vk, pool)
    _append(step, rows, 0, 10)
    _append(step, rows, 10, 40)  # grows past the first capacity: a device copy
    assert rows.capacity >= 40
    got = _host(step, rows)
    assert (got.base, got.n) == (0, 40)
    assert np.array_equal(got.view(), _rows(0, 40))
    rows.truncate(30)
    _append(step, rows, 30, 33)
    step.close()
    assert rows.trim(31) is True  # more than half the buffer is dead: the tail moves down
    assert rows.base == 31
    step = DeviceStep(vk, pool)
    got = _host(step, rows)
    step.close()
    assert (got.base, got.n) == (31, 33)
    assert np.array_equal(got.view(), _rows(31, 33))
    assert rows.trim(32) is False  # too little dead to move
    rows.release()


def test_layer_state_round_trips_through_the_device(vk: VulkanRuntime, pool: BufferPool) -> None:
    hp = TINY_SHAPES["tiny-2layer"]
    layer = next(il for il in range(hp.n_layer) if hp.compress_ratios[il] == 4)
    host = LayerState(hp, layer)
    rng = np.random.default_rng(0)
    for _ in range(9):
        host.raw.append(rng.standard_normal(hp.head_dim).astype(np.float32))
        for comp in host.compressors():
            comp.kv.append(rng.standard_normal(comp.width).astype(np.float32))
            comp.score.append(rng.standard_normal(comp.width).astype(np.float32))
    for comp in host.compressors():
        for _ in range(2):
            comp.rows.append(rng.standard_normal(comp.row_width).astype(np.float32))
    dev = DeviceLayerState(vk, hp, layer)
    step = DeviceStep(vk, pool)
    dev.upload(step, host)
    dev.truncate(6)
    back = dev.download(step, hp, layer)
    step.close()
    host.truncate(6)
    assert step.submissions == 1  # every history of the layer in one read-back
    assert np.array_equal(back.raw.view(), host.raw.view())
    for a, b in zip(back.compressors(), host.compressors(), strict=True):
        for x, y in ((a.kv, b.kv), (a.score, b.score), (a.rows, b.rows)):
            assert (x.base, x.n) == (y.base, y.n)
            assert np.array_equal(x.view(), y.view())
    dev.release()
