"""Routed MoE step (docs/reference/formats.md §5.8): scalar == numpy composition bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from tests.unit.cpu_kernels.kernel_blocks import quant_rows, same_bits

from ds4.adapters.compute.cpu_kernels import ExpertWeights, available_impls, moe_forward
from ds4.adapters.compute.cpu_kernels_reference import moe_reference
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType

N_EMBD, N_FF, N_EXPERT = 512, 256, 6
GATE_UP, DOWN = GGMLType.IQ2_XXS, GGMLType.Q2_K


def experts(ggml_type: GGMLType, rows: int, cols: int, seed: int) -> ExpertWeights:
    raw = quant_rows(ggml_type, N_EXPERT * rows, cols, seed=seed)
    return ExpertWeights(raw.reshape(N_EXPERT, rows, -1), ggml_type)


GATE = experts(GATE_UP, N_FF, N_EMBD, 1)
UP = experts(GATE_UP, N_FF, N_EMBD, 2)
DOWN_W = experts(DOWN, N_EMBD, N_FF, 3)
X = np.random.default_rng(4).standard_normal(N_EMBD).astype(np.float32) * np.float32(30)
IDS = np.array([4, 0, 5])
WTS = np.array([0.5, 0.3, 0.2], dtype=np.float32)


def reference(ids: np.ndarray, wts: np.ndarray, clamp: float) -> np.ndarray:
    parts = [(p.raw, p.ggml_type) for p in (GATE, UP, DOWN_W)]
    return moe_reference(X, parts[0], parts[1], parts[2], ids, wts, clamp)


@pytest.mark.parametrize("clamp", [10.0, 0.5, 0.0])
def test_scalar_moe_matches_reference(clamp: float) -> None:
    for threads in (1, 2, 3):
        out = moe_forward(
            X, GATE, UP, DOWN_W, IDS, WTS, clamp=clamp, threads=threads, impl="scalar"
        )
        assert same_bits(out, reference(IDS, WTS, clamp))


def test_clamp_changes_the_result() -> None:
    loose = moe_forward(X, GATE, UP, DOWN_W, IDS, WTS, clamp=0.0, impl="scalar")
    tight = moe_forward(X, GATE, UP, DOWN_W, IDS, WTS, clamp=0.5, impl="scalar")
    assert not np.array_equal(loose, tight)


def test_zero_route_weight_contributes_nothing() -> None:
    two = moe_forward(X, GATE, UP, DOWN_W, [4, 0], [0.7, 0.0], clamp=10.0, impl="scalar")
    one = moe_forward(X, GATE, UP, DOWN_W, [4], [0.7], clamp=10.0, impl="scalar")
    assert same_bits(two, one)


@pytest.mark.parametrize("impl", [i for i in available_impls() if i not in ("auto", "scalar")])
def test_simd_moe_is_thread_independent_and_close(impl: str) -> None:
    """SIMD gate/up values differ from scalar by f32 order noise, which can move a mid
    code by one step after Q8_K; stated tolerance 2e-3 of the largest output."""
    outs = [
        moe_forward(X, GATE, UP, DOWN_W, IDS, WTS, clamp=10.0, threads=n, impl=impl)
        for n in (1, 2, 3)
    ]
    assert same_bits(outs[0], outs[1]) and same_bits(outs[0], outs[2])
    ref = reference(IDS, WTS, 10.0)
    assert np.max(np.abs(outs[0] - ref)) <= 2e-3 * np.max(np.abs(ref))


def test_bad_moe_inputs_raise() -> None:
    with pytest.raises(Ds4Error, match="out of range"):
        moe_forward(X, GATE, UP, DOWN_W, [6], [1.0], clamp=10.0)
    with pytest.raises(Ds4Error):
        moe_forward(X, GATE, UP, DOWN_W, [1, 2], [1.0], clamp=10.0)
    q8 = ExpertWeights(np.zeros((N_EXPERT, N_FF, N_EMBD // 32 * 34), np.uint8), GGMLType.Q8_0)
    with pytest.raises(Ds4Error, match="Q2_K/Q3_K/Q4_K/Q5_K/Q6_K/IQ2_XXS/IQ2_XS"):
        moe_forward(X, q8, UP, DOWN_W, IDS, WTS, clamp=10.0)
    with pytest.raises(Ds4Error):
        moe_forward(X[:256], GATE, UP, DOWN_W, IDS, WTS, clamp=10.0)
    wrong_down = ExpertWeights(DOWN_W.raw[:, :256], DOWN)
    with pytest.raises(Ds4Error):
        moe_forward(X, GATE, UP, wrong_down, IDS, WTS, clamp=10.0)


@pytest.mark.parametrize(
    ("gate_up", "down"),
    [(GGMLType.IQ3_XXS, GGMLType.IQ4_XS), (GGMLType.IQ2_XS, GGMLType.IQ3_S)],
    ids=lambda t: t.name,
)
def test_iquant_experts_take_the_fused_path_exactly(gate_up: GGMLType, down: GGMLType) -> None:
    """The read-only i-quants as llama-quantize puts them on routed experts: scalar ==
    the numpy composition bit for bit, SIMD within the stated tolerance."""
    gate, up = experts(gate_up, N_FF, N_EMBD, 5), experts(gate_up, N_FF, N_EMBD, 6)
    dn = experts(down, N_EMBD, N_FF, 7)
    parts = [(p.raw, p.ggml_type) for p in (gate, up, dn)]
    ref = moe_reference(X, parts[0], parts[1], parts[2], IDS, WTS, 10.0)
    out = moe_forward(X, gate, up, dn, IDS, WTS, clamp=10.0, impl="scalar")
    assert same_bits(out, ref)
    fast = moe_forward(X, gate, up, dn, IDS, WTS, clamp=10.0, impl="auto")
    assert np.max(np.abs(fast - ref)) <= 2e-3 * np.max(np.abs(ref))
