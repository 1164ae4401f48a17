"""MoE routing on the GPU against the reference's route() (domain/engine_math/layers.py):
identical expert ids (inputs without near-ties; one case of exact ties checks the
lower-id-first rule), weights within 1e-4 relative (docs/vulkan.md)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest

from ds4.adapters.compute.vulkan.ffn import (
    HASH,
    RouteBuffers,
    Routing,
    record_route,
    route_on_device,
)
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime
from ds4.domain.engine_math.layers import route
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
REL = 1e-4


def _spread_logits(n_tok: int, n_expert: int, seed: int, lo: float = -6.0,
                   hi: float = 6.0) -> F32:  # fmt: skip
    """Per token a permutation of evenly spaced values: no two scores within 1e-3."""
    rng = np.random.default_rng(seed)
    levels = np.linspace(lo, hi, n_expert).astype(np.float32)
    return np.stack([rng.permutation(levels) for _ in range(n_tok)])


def _reference(logits: F32, bias: F32 | None, hashed: I64 | None, k: int, scale: float,
               normalize: bool) -> tuple[I64, F32]:  # fmt: skip
    rows = [route(logits[t], bias, None if hashed is None else hashed[t], k, scale, normalize)
            for t in range(logits.shape[0])]  # fmt: skip
    return np.stack([r[0] for r in rows]), np.stack([r[1] for r in rows])


def _agree(got: tuple[I64, F32], want: tuple[I64, F32]) -> None:
    assert np.array_equal(got[0], want[0])
    assert np.all(np.abs(got[1] - want[1]) <= REL * np.abs(want[1]))


SHAPES = [(1, 256, 6), (5, 256, 6), (3, 37, 8), (2, 1, 1), (2, 1024, 9), (4, 16, 16)]


@pytest.mark.parametrize(("n_tok", "n_expert", "k"), SHAPES)
def test_top_k_matches_reference(vk: VulkanRuntime, n_tok: int, n_expert: int, k: int) -> None:
    logits = _spread_logits(n_tok, n_expert, seed=n_expert + k)
    got = route_on_device(logits, k, 2.5, True, vk)
    _agree(got, _reference(logits, None, None, k, 2.5, True))


def test_bias_steers_the_choice_not_the_weights(vk: VulkanRuntime) -> None:
    logits = _spread_logits(4, 256, seed=3)
    bias = np.random.default_rng(4).permutation(np.linspace(-1, 1, 256)).astype(np.float32)
    got = route_on_device(logits, 6, 1.5, True, vk, bias=bias)
    want = _reference(logits, bias, None, 6, 1.5, True)
    _agree(got, want)
    assert not np.array_equal(want[0], _reference(logits, None, None, 6, 1.5, True)[0])


def test_unnormalised_weights_and_extreme_logits(vk: VulkanRuntime) -> None:
    """Both softplus tails (x > 20 passes through, x < -20 is exp(x)) and the middle."""
    logits = _spread_logits(3, 64, seed=9, lo=-40.0, hi=40.0)
    _agree(route_on_device(logits, 6, 1.0, False, vk),
           _reference(logits, None, None, 6, 1.0, False))  # fmt: skip
    tiny = _spread_logits(2, 64, seed=10, lo=-90.0, hi=-60.0)  # weight sum under the floor
    _agree(route_on_device(tiny, 4, 1.0, True, vk), _reference(tiny, None, None, 4, 1.0, True))


def test_exact_ties_go_to_the_lower_expert_id(vk: VulkanRuntime) -> None:
    """Groups of equal scores (and bias-made ties): the stable order of the reference."""
    logits = np.repeat(np.array([0.5, 1.0, 0.5, 2.0, 1.0], np.float32), 8)[None, :]
    logits = np.concatenate([logits, logits[:, ::-1]]).astype(np.float32)
    for k in (1, 6, 20, 32):
        _agree(route_on_device(logits, k, 1.0, True, vk),
               _reference(logits, None, None, k, 1.0, True))  # fmt: skip
    flat = np.zeros((1, 200), np.float32)
    bias = np.tile(np.array([0.0, 0.25], np.float32), 100)
    got = route_on_device(flat, 6, 1.0, True, vk, bias=bias)
    assert got[0].tolist() == [[1, 3, 5, 7, 9, 11]]
    _agree(got, _reference(flat, bias, None, 6, 1.0, True))


def test_hash_routing_reads_the_token_row(vk: VulkanRuntime) -> None:
    rng = np.random.default_rng(5)
    n_vocab, n_expert, k = 50, 64, 6
    table = np.stack([rng.choice(n_expert, k, replace=False) for _ in range(n_vocab)])
    tokens = np.array([0, 49, 7, 7])
    logits = _spread_logits(4, n_expert, seed=6)
    got = route_on_device(logits, k, 1.5, True, vk, tokens=tokens, tid2eid=table)
    _agree(got, _reference(logits, None, table[tokens].astype(np.int64), k, 1.5, True))
    raw = table.astype("<i4").view(np.uint8)  # the GGUF I32 table as raw bytes
    again = route_on_device(logits, k, 1.5, True, vk, tokens=tokens, tid2eid=raw)
    assert np.array_equal(again[0], got[0])


def test_bad_routing_inputs_are_refused(vk: VulkanRuntime) -> None:
    logits = _spread_logits(1, 8, seed=1)
    with pytest.raises(Ds4Error, match="top 9"):
        route_on_device(logits, 9, 1.0, True, vk)
    with pytest.raises(Ds4Error, match=r"outside 0\.\.7"):
        route_on_device(logits, 2, 1.0, True, vk, tokens=[0], tid2eid=[[0, 8]])
    with pytest.raises(Ds4Error, match="token ids"):
        route_on_device(logits, 2, 1.0, True, vk, tokens=[3], tid2eid=[[0, 1]])


def test_a_token_past_the_table_reads_its_last_row(vk: VulkanRuntime) -> None:
    """Memory safety of the record form (the engine checks token ids before)."""
    table = np.array([[0, 1], [2, 3], [4, 5]], np.int32)
    logits = _spread_logits(2, 8, seed=2)
    bufs = [vk.host_buffer(a.nbytes) for a in (logits, table, np.zeros(2, np.int32))]
    for buf, a in zip(bufs, (logits, table, np.array([1, 999], np.int32)), strict=True):
        buf.write(a)
    ids, wts = vk.host_buffer(16), vk.host_buffer(16)
    vk.run(lambda rec: record_route(rec, RouteBuffers(bufs[0], bufs[0], bufs[2], bufs[1], ids,
                                                      wts), Routing(2, HASH, 1.0, True), 2,
                                    8))  # fmt: skip
    assert ids.read(np.int32, 4).tolist() == [2, 3, 4, 5]
    for buf in [*bufs, ids, wts]:
        buf.release()
