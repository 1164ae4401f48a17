"""Compressor emissions on the device == the reference forward's own emission (_emit over
CompressorHistory), fp32 numerics: |row - ref| <= 1e-4 * max|ref row| (the GPU's exp and
f32 sums of squares differ from the reference's correctly rounded expf and f64 sums)."""

from __future__ import annotations

import dataclasses
from typing import cast

import numpy as np
import numpy.typing as npt
import pytest

from ds4.adapters.compute.reference.forward import LayerSetup, WeightStore, _emit
from ds4.adapters.compute.reference.state import CompressorHistory
from ds4.adapters.compute.vulkan.compressor import (
    CompressorBuffers,
    Emission,
    compress_windows,
    record_compress,
)
from ds4.adapters.compute.vulkan.ops import rope_tables
from ds4.adapters.compute.vulkan.runtime import Recorder, VulkanRuntime
from ds4.domain.engine_math.lowprec import FP32
from ds4.domain.errors import Ds4Error
from ds4.domain.model.presets import FLASH

F32 = npt.NDArray[np.float32]
NORM = "attn_compressor_norm.weight"


class _Vectors:
    """The one lookup _emit makes of the weight store."""

    def __init__(self, vectors: dict[str, F32]) -> None:
        self._vectors = vectors

    def small(self, name: str) -> F32:
        return self._vectors[name]


def _reference(
    d: int, n_rot: int, ratio: int, kv: F32, gate: F32, ape: F32, norm: F32
) -> tuple[LayerSetup, F32]:
    layer = 2 if ratio == 4 else 3  # Flash: even layers ratio 4, odd ones 128
    hp = dataclasses.replace(FLASH, head_dim=d, n_rot=n_rot)
    weights = cast(WeightStore, _Vectors({f"blk.{layer}.{NORM}": norm}))
    setup = LayerSetup(hp, layer, weights, FP32)
    comp = CompressorHistory(ratio, d)
    for p in range(kv.shape[0]):
        comp.kv.append(kv[p])
        comp.score.append((gate[p] + ape[p % ratio]).astype(np.float32))
        if (p + 1) % ratio == 0:
            _emit(setup, comp, NORM, p)
    return setup, comp.rows.view().copy()


def _inputs(d: int, ratio: int, n: int, seed: int) -> tuple[F32, F32, F32, F32]:
    rng = np.random.default_rng(seed)
    width = (2 if ratio == 4 else 1) * d
    kv = rng.standard_normal((n, width)).astype(np.float32)
    gate = (rng.standard_normal((n, width)) * 3).astype(np.float32)
    ape = rng.standard_normal((ratio, width)).astype(np.float32)
    norm = (1 + 0.3 * rng.standard_normal(d)).astype(np.float32)
    return kv, gate, ape, norm


def _assert_close(got: F32, ref: F32) -> None:
    bound = 1e-4 * np.max(np.abs(ref), axis=1, keepdims=True)
    assert got.shape == ref.shape
    assert np.all(np.abs(got - ref) <= bound), float(np.max(np.abs(got - ref) / bound))


@pytest.mark.parametrize(
    ("ratio", "d", "n_rot", "n"),
    [(4, 64, 16, 23), (4, 512, 64, 12), (4, 6, 2, 4), (128, 64, 16, 261), (128, 130, 64, 128)],
)
def test_emissions_agree_with_the_reference(
    vk_any: VulkanRuntime, ratio: int, d: int, n_rot: int, n: int
) -> None:
    kv, gate, ape, norm = _inputs(d, ratio, n, seed=d + n)
    setup, ref = _reference(d, n_rot, ratio, kv, gate, ape, norm)
    got = compress_windows(
        kv, gate, ape, norm, ratio=ratio, rp=setup.rope(), iterated=False, eps=setup.hp.rms_eps,
        rt=vk_any,
    )  # fmt: skip
    _assert_close(got, ref)


def test_one_emission_from_a_trimmed_history_into_a_given_row(vk: VulkanRuntime) -> None:
    # Decode shape: the buffers hold positions 8.. only, the window [12, 16) pools with
    # the previous one [8, 12), the row lands at index 3 of a row buffer, and the RoPE
    # table is indexed by absolute position.
    d, n_rot, ratio, n = 64, 16, 4, 16
    kv, gate, ape, norm = _inputs(d, ratio, n, seed=1)
    setup, ref = _reference(d, n_rot, ratio, kv, gate, ape, norm)
    cos, sin = rope_tables(np.arange(20), setup.rope(), iterated=False)
    arrays = (kv[8:], gate[8:], ape, norm, cos, sin)
    ins = [vk.host_buffer(a.nbytes) for a in arrays]
    for buf, a in zip(ins, arrays, strict=True):
        buf.write(np.ascontiguousarray(a))
    kvb, gb, apeb, nb, cb, sb = ins
    out = vk.host_buffer(5 * d * 4)
    out.write(np.zeros((5, d), np.float32))

    def record(rec: Recorder) -> None:
        record_compress(
            rec, CompressorBuffers(kvb, gb, apeb, nb, cb, sb, out, d=d, ratio=ratio,
                                   n_rot=n_rot, eps=setup.hp.rms_eps),
            Emission(last_row=7, first_pos=12, rope_row=12, out_row=3),
        )  # fmt: skip

    vk.run(record)
    rows = out.read(np.float32, 5 * d).reshape(5, d)
    _assert_close(rows[3:4], ref[3:4])
    assert not np.any(rows[[0, 1, 2, 4]])
    for buf in [*ins, out]:
        buf.release()


def test_emissions_from_ring_buffers(vk: VulkanRuntime) -> None:
    # kv/gate as rings of 8 rows (position x at x % 8): the frontier a decode step keeps.
    # Windows [12, 16) (with [8, 12)) and [16, 20) (with [12, 16)) in one dispatch.
    d, n_rot, ratio, n = 32, 8, 4, 20
    kv, gate, ape, norm = _inputs(d, ratio, n, seed=4)
    setup, ref = _reference(d, n_rot, ratio, kv, gate, ape, norm)
    ring_kv, ring_gate = np.zeros((8, 2 * d), np.float32), np.zeros((8, 2 * d), np.float32)
    ring_kv[np.arange(8, 16) % 8], ring_gate[np.arange(8, 16) % 8] = kv[8:16], gate[8:16]
    cos, sin = rope_tables(np.arange(20), setup.rope(), iterated=False)
    arrays = (ring_kv, ring_gate, ape, norm, cos, sin)
    ins = [vk.host_buffer(a.nbytes) for a in arrays]
    for buf, a in zip(ins, arrays, strict=True):
        buf.write(np.ascontiguousarray(a))
    kvb, gb, apeb, nb, cb, sb = ins
    out = vk.host_buffer(5 * d * 4)
    b = CompressorBuffers(kvb, gb, apeb, nb, cb, sb, out, d=d, ratio=ratio, n_rot=n_rot,
                          eps=setup.hp.rms_eps)  # fmt: skip

    def first(rec: Recorder) -> None:
        record_compress(
            rec, b, Emission(last_row=15, first_pos=12, rope_row=12, out_row=3, in_ring=8),
        )  # fmt: skip

    vk.run(first)
    # the next window's tokens overwrite the oldest ring rows, as decode would push them
    ring_kv[np.arange(16, 20) % 8], ring_gate[np.arange(16, 20) % 8] = kv[16:20], gate[16:20]
    kvb.write(ring_kv)
    gb.write(ring_gate)

    def second(rec: Recorder) -> None:
        record_compress(
            rec, b, Emission(last_row=19, first_pos=16, rope_row=16, out_row=4, in_ring=8),
        )  # fmt: skip

    vk.run(second)
    _assert_close(out.read(np.float32, 5 * d).reshape(5, d)[3:5], ref[3:5])
    with pytest.raises(Ds4Error, match="ring of 6"):
        vk.run(lambda rec: record_compress(
            rec, CompressorBuffers(kvb, gb, apeb, nb, cb, sb, out, d=d, ratio=ratio,
                                   n_rot=n_rot, eps=1e-6),
            Emission(last_row=19, first_pos=16, rope_row=16, out_row=4, in_ring=6)))  # fmt: skip
    for buf in [*ins, out]:
        buf.release()


def test_bad_shapes_are_refused(vk: VulkanRuntime) -> None:
    kv, gate, ape, norm = _inputs(8, 4, 3, seed=2)
    with pytest.raises(Ds4Error, match="no window"):
        compress_windows(kv, gate, ape, norm, ratio=4, rp=FLASH_RP, iterated=True, eps=1e-6, rt=vk)
    with pytest.raises(Ds4Error, match="do not fit"):
        compress_windows(kv, gate, ape[:2], norm, ratio=4, rp=FLASH_RP, iterated=True, eps=1e-6,
                         rt=vk)  # fmt: skip


FLASH_RP = LayerSetup(FLASH, 2, cast(WeightStore, None), FP32).rope()
