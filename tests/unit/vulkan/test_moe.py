"""Routed experts and the shared expert on the GPU (docs/vulkan.md#kernels): the
expert-indexed products against float64 over the repository's decoding (every type;
bit-identical to the plain kernel on the expert's rows), the grouping by expert, SwiGLU
against routing.clamped_swiglu, and the whole FFN against the reference's composition
(reference/forward.py) within the fp32 contract."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt
import pytest
from tests.unit.cpu_kernels.kernel_blocks import weight_rows
from tests.unit.vulkan.reference import assert_dot_agrees, dequantized

from ds4.adapters.compute.vulkan.moe import (
    ExpertGroups,
    FfnBuffers,
    FfnWeights,
    chunk_table_bytes,
    ffn_scratch,
    moe_ffn,
    moe_matmul_q8,
    record_moe_ffn_q8,
    record_moe_group,
    record_moe_matmul,
    record_swiglu,
)
from ds4.adapters.compute.vulkan.runtime import Recorder, VulkanRuntime
from ds4.adapters.compute.vulkan.weights import (
    SHADERS,
    SHADERS_Q8,
    VulkanWeights,
    kernel_tables,
    matmul,
    matmul_q8,
    per32_activation,
    upload_weights,
)
from ds4.domain.engine_math import quant_dots
from ds4.domain.engine_math.layers import clamped_swiglu
from ds4.domain.engine_math.quant_dots import (
    QuantizedActivation,
    dot_iq2_xxs,
    dot_mxfp4,
    dot_q2_k,
    dot_q4_k,
    dot_q8_0,
    quantize_q8_0,
    quantize_q8_k,
)
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
REL = 1e-4
DOTS: dict[GGMLType, Callable[[U8, QuantizedActivation], F32]] = {
    GGMLType.Q8_0: dot_q8_0, GGMLType.Q2_K: dot_q2_k, GGMLType.Q4_K: dot_q4_k,
    GGMLType.IQ2_XXS: dot_iq2_xxs, GGMLType.MXFP4: dot_mxfp4,
    GGMLType.IQ4_NL: quant_dots.dot_iq4_nl, GGMLType.IQ4_XS: quant_dots.dot_iq4_xs,
    GGMLType.IQ2_XS: quant_dots.dot_iq2_xs, GGMLType.IQ3_XXS: quant_dots.dot_iq3_xxs,
    GGMLType.IQ3_S: quant_dots.dot_iq3_s,
}  # fmt: skip


def _moe_matmul(rt: VulkanRuntime, w: VulkanWeights, n_expert: int, x: F32, ids: I64,
                x_div: int) -> tuple[F32, list[int], list[int]]:  # fmt: skip
    """Group ids by expert and run the expert-indexed product in one submission;
    returns y (n_pairs, per), the chunk table and the permutation."""
    n_pairs = ids.size
    per = w.rows // n_expert
    xb, ib = rt.host_buffer(x.nbytes), rt.host_buffer(n_pairs * 4)
    xb.write(x)
    ib.write(ids.astype(np.int32))
    perm = rt.host_buffer(n_pairs * 4)
    chunks = rt.host_buffer(chunk_table_bytes(n_pairs, n_expert))
    y = rt.host_buffer(n_pairs * per * 4)
    tables = kernel_tables(rt, w)

    def record(rec: Recorder) -> None:
        groups = ExpertGroups(perm, chunks, n_pairs, n_expert)
        record_moe_group(rec, ib, groups)
        rec.barrier()
        record_moe_matmul(rec, w, groups, xb, y, x_div, tables)

    rt.run(record)
    out: F32 = y.read(np.float32, n_pairs * per).reshape(n_pairs, per)
    table = chunks.read(np.uint32, chunk_table_bytes(n_pairs, n_expert) // 4).tolist()
    order = perm.read(np.uint32, n_pairs).tolist()
    for buf in (xb, ib, perm, chunks, y):
        buf.release()
    return out, table, order


@pytest.mark.parametrize("ggml_type", list(SHADERS))
@pytest.mark.parametrize(("n_tok", "k", "n_expert"), [(1, 6, 16), (9, 3, 4), (2, 2, 1)])
def test_expert_indexed_product_matches_reference(
    vk_any: VulkanRuntime, ggml_type: GGMLType, n_tok: int, k: int, n_expert: int
) -> None:
    per, cols = 37, 256
    raw = weight_rows(ggml_type, n_expert * per, cols, seed=n_tok + k)
    w = upload_weights(raw, ggml_type, cols, rt=vk_any)
    rng = np.random.default_rng(n_expert)
    x = rng.standard_normal((n_tok, cols)).astype(np.float32)
    ids = np.stack([rng.choice(n_expert, k, replace=k > n_expert) for _ in range(n_tok)])
    got, _, _ = _moe_matmul(vk_any, w, n_expert, x, ids.reshape(-1), k)
    dense = dequantized(raw, ggml_type, n_expert * per, cols).reshape(n_expert, per, cols)
    for q, e in enumerate(ids.reshape(-1)):
        assert_dot_agrees(got[q : q + 1], dense[e], x[q // k : q // k + 1])
    w.release()


def test_grouped_product_is_bit_identical_to_the_plain_kernel(vk: VulkanRuntime) -> None:
    """Pairs grouped by expert (several chunks of 8 for a busy expert) give exactly what
    the plain kernel gives on that expert's rows, per pair (one activation row each)."""
    n_expert, per, cols = 5, 33, 512
    raw = weight_rows(GGMLType.Q4_K, n_expert * per, cols, seed=2)
    w = upload_weights(raw, GGMLType.Q4_K, cols, rt=vk)
    ids = np.array([3] * 19 + [0, 4, 0] + [3] * 2, dtype=np.int64)
    x = np.random.default_rng(3).standard_normal((ids.size, cols)).astype(np.float32)
    got, table, order = _moe_matmul(vk, w, n_expert, x, ids, 1)
    assert table[0] == 5  # expert 0: 1 chunk, expert 3: 21 pairs in 3 chunks, expert 4: 1
    assert [tuple(table[1 + 3 * c : 4 + 3 * c]) for c in range(5)] == [
        (0, 0, 2), (3, 2, 8), (3, 10, 8), (3, 18, 5), (4, 23, 1)]  # fmt: skip
    assert sorted(order) == list(range(ids.size))
    assert [int(ids[q]) for q in order] == sorted(ids.tolist())
    for e in np.unique(ids):
        rows = np.nonzero(ids == e)[0]
        want = matmul(w.view(int(e) * per, per), np.concatenate([x[rows], x[rows]]))
        assert np.array_equal(got[rows].view(np.uint32), want[: rows.size].view(np.uint32))
    w.release()


def test_grouping_at_prefill_size_covers_every_pair_once(vk: VulkanRuntime) -> None:
    """700 pairs over 6 experts (one unused): a permutation whose chunks hold only their
    expert's pairs, at most 8 each, every run cut in order."""
    n_expert, per, cols = 6, 1, 32
    w = upload_weights(weight_rows(GGMLType.F32, n_expert * per, cols, seed=3), GGMLType.F32,
                       cols, rt=vk)  # fmt: skip
    ids = np.random.default_rng(4).choice([0, 1, 2, 4, 5], 700, p=[0.5, 0.2, 0.1, 0.1, 0.1])
    x = np.ones((700, cols), np.float32)
    _, table, order = _moe_matmul(vk, w, n_expert, x, ids, 1)
    assert sorted(order) == list(range(700))
    counts = np.bincount(ids, minlength=n_expert)
    want = [(e, int(counts[:e].sum()) + s, int(min(8, counts[e] - s)))
            for e in range(n_expert) for s in range(0, int(counts[e]), 8)]  # fmt: skip
    assert table[0] == len(want)
    assert [tuple(table[1 + 3 * c : 4 + 3 * c]) for c in range(len(want))] == want
    for e, first, count in want:
        assert all(ids[q] == e for q in order[first : first + count])
    w.release()


@pytest.mark.parametrize("ggml_type", list(SHADERS_Q8))
def test_expert_indexed_q8_product_equals_the_plain_q8_kernel(
    vk_any: VulkanRuntime, ggml_type: GGMLType
) -> None:
    """ds4 numerics: the expert-indexed integer-dot kernel is bit-identical to matmul_q8
    over the expert's rows (shared activation rows for gate/up, own rows for down), and
    the expert-grouped one to both."""
    n_expert, per, cols, k = 3, 21, 512, 2
    raw = weight_rows(ggml_type, n_expert * per, cols, seed=5)
    w = upload_weights(raw, ggml_type, cols, rt=vk_any)
    rng = np.random.default_rng(6)
    x = rng.standard_normal((13, cols)).astype(np.float32)  # busy experts: several chunks
    ids = np.stack([rng.choice(n_expert, k, replace=False) for _ in range(13)]).reshape(-1)
    assert np.bincount(ids).max() > 8
    for x_div, xs in ((k, x), (1, np.repeat(x, k, axis=0))):
        got = moe_matmul_q8(w, n_expert, xs, ids, x_div)
        for q, e in list(enumerate(ids))[:7]:
            want = matmul_q8(w.view(int(e) * per, per), xs[q // x_div : q // x_div + 1])
            assert np.array_equal(got[q].view(np.uint32), want[0].view(np.uint32))
        grouped = moe_matmul_q8(w, n_expert, xs, ids, x_div, grouped=True)
        assert np.array_equal(grouped.view(np.uint32), got.view(np.uint32))
    w.release()


@pytest.mark.parametrize("limit", [0.0, 7.0, 0.5])
def test_swiglu_matches_reference(vk: VulkanRuntime, limit: float) -> None:
    rng = np.random.default_rng(int(limit * 10))
    n_rows, dim = 5, 131
    gate = (rng.standard_normal((n_rows, dim)) * 6).astype(np.float32)
    gate[0, :4] = [-100.0, 100.0, 0.0, -0.0]
    up = (rng.standard_normal((n_rows, dim)) * 6).astype(np.float32)
    wts = rng.uniform(0.1, 2.0, n_rows).astype(np.float32)
    bufs = [vk.host_buffer(a.nbytes) for a in (gate, up, wts, gate)]
    for buf, a in zip(bufs[:3], (gate, up, wts), strict=True):
        buf.write(a)
    for weighted in (False, True):

        def record(rec: Recorder, on: bool = weighted) -> None:
            record_swiglu(rec, bufs[0], bufs[1], bufs[2], bufs[3], n_rows, dim, limit, on)

        vk.run(record)
        got = bufs[3].read(np.float32, gate.size).reshape(gate.shape)
        want = clamped_swiglu(gate, up, limit)
        if weighted:
            want = (want * wts[:, None]).astype(np.float32)
        assert np.all(np.abs(got - want) <= REL * np.abs(want) + 1e-30)
    for buf in bufs:
        buf.release()


def _reference_ffn(dense: dict[str, npt.NDArray[np.float64]], g: F32, ids: I64, wts: F32,
                   clamp: float) -> tuple[F32, F32]:  # fmt: skip
    """reference/forward.py's routed_experts + shared_expert with float64 products;
    also the per-output sum of |terms| of the final products (the contract's scale)."""
    n, k = ids.shape
    g64 = g.astype(np.float64)
    contrib = np.zeros((n, k, g.shape[1]), np.float32)
    scale = np.zeros((n, g.shape[1]))
    for t in range(n):
        for s in range(k):
            e = ids[t, s]
            gate = (dense["gate"][e] @ g64[t]).astype(np.float32)
            up = (dense["up"][e] @ g64[t]).astype(np.float32)
            mid = (clamped_swiglu(gate, up, clamp) * wts[t, s]).astype(np.float32)
            contrib[t, s] = (dense["down"][e] @ mid.astype(np.float64)).astype(np.float32)
            scale[t] += np.abs(dense["down"][e]) @ np.abs(mid.astype(np.float64))
    moe = np.zeros(g.shape, np.float32)
    for s in range(k):
        moe = (moe + contrib[:, s]).astype(np.float32)
    sh_gate = (g64 @ dense["sh_gate"].T).astype(np.float32)
    sh_up = (g64 @ dense["sh_up"].T).astype(np.float32)
    mid = clamped_swiglu(sh_gate, sh_up, clamp).astype(np.float64)
    shared = (mid @ dense["sh_down"].T).astype(np.float32)
    scale += np.abs(mid) @ np.abs(dense["sh_down"]).T
    return (moe + shared).astype(np.float32), scale.astype(np.float32)


@pytest.mark.parametrize(("n_tok", "types"), [
    (1, (GGMLType.IQ2_XXS, GGMLType.Q2_K, GGMLType.Q8_0)),
    (11, (GGMLType.Q4_K, GGMLType.Q8_0, GGMLType.F16)),
    (5, (GGMLType.MXFP4, GGMLType.MXFP4, GGMLType.Q8_0)),
    (6, (GGMLType.IQ3_XXS, GGMLType.IQ4_XS, GGMLType.IQ4_NL)),
    (3, (GGMLType.IQ2_XS, GGMLType.IQ3_S, GGMLType.Q8_0)),
])  # fmt: skip
def test_whole_ffn_matches_reference(
    vk: VulkanRuntime, n_tok: int, types: tuple[GGMLType, GGMLType, GGMLType]
) -> None:
    """Routed (grouped by expert) + shared expert, one submission, against the reference's
    composition; the error is measured against the sum of |terms| of the last products."""
    n_expert, k, dim, ff, ffs, clamp = 8, 3, 256, 256, 512, 10.0
    exp_t, down_t, sh_t = types
    shapes = {"gate": (exp_t, n_expert * ff, dim), "up": (exp_t, n_expert * ff, dim),
              "down": (down_t, n_expert * dim, ff), "sh_gate": (sh_t, ffs, dim),
              "sh_up": (sh_t, ffs, dim), "sh_down": (sh_t, dim, ffs)}  # fmt: skip
    raws = {n: weight_rows(t, r, c, seed=i) for i, (n, (t, r, c)) in enumerate(shapes.items())}
    dev = {n: upload_weights(raws[n], t, c, rt=vk) for n, (t, r, c) in shapes.items()}
    dense = {n: dequantized(raws[n], t, r, c) for n, (t, r, c) in shapes.items()}
    for n in ("gate", "up"):
        dense[n] = dense[n].reshape(n_expert, ff, dim)
    dense["down"] = dense["down"].reshape(n_expert, dim, ff)
    w = FfnWeights(dev["gate"], dev["up"], dev["down"], n_expert,
                   shared=(dev["sh_gate"], dev["sh_up"], dev["sh_down"]))  # fmt: skip
    rng = np.random.default_rng(n_tok)
    g = rng.standard_normal((n_tok, dim)).astype(np.float32)
    ids = np.stack([rng.choice(n_expert, k, replace=False) for _ in range(n_tok)])
    wts = rng.uniform(0.1, 1.0, (n_tok, k)).astype(np.float32)
    got = moe_ffn(w, g, ids, wts, clamp)
    want, scale = _reference_ffn(dense, g, ids, wts, clamp)
    assert np.all(np.abs(got - want) <= REL * scale)
    for d in dev.values():
        d.release()


def test_bad_expert_inputs_are_refused(vk: VulkanRuntime) -> None:
    raw = weight_rows(GGMLType.Q8_0, 4 * 32, 64, seed=1)
    w = upload_weights(raw, GGMLType.Q8_0, 64, rt=vk)
    down = upload_weights(weight_rows(GGMLType.Q8_0, 4 * 64, 32, seed=2), GGMLType.Q8_0, 32,
                          rt=vk)  # fmt: skip
    with pytest.raises(Ds4Error, match="do not divide"):
        FfnWeights(w, w, down, 3)
    ffn = FfnWeights(w, w, down, 4)
    g = np.zeros((1, 64), np.float32)
    with pytest.raises(Ds4Error, match="ids must be"):
        moe_ffn(ffn, g, [[4]], [[1.0]], 0.0)
    w.release()
    down.release()


def _ds4_reference_ffn(raws: dict[str, U8], types: dict[str, GGMLType], n_expert: int,
                       g: F32, ids: I64, wts: F32, clamp: float) -> F32:  # fmt: skip
    """reference/forward.py under ds4 numerics: each token's activation quantized by
    the engine's quantizers and dotted by the reference integer dots."""

    def product(name: str, x: F32, expert: int | None = None) -> F32:
        raw = (
            raws[name]
            if expert is None
            else raws[name].reshape(n_expert, -1, raws[name].shape[1])[expert]
        )
        kind = types[name]
        if kind is GGMLType.F16:
            w = raw.view(np.float16).astype(np.float32)
            return np.stack([_sequential(w, xt) for xt in x])
        quant = quantize_q8_0 if per32_activation(kind) else quantize_q8_k
        return np.stack([DOTS[kind](raw, quant(xt)) for xt in x])

    n, k = ids.shape
    contrib = np.zeros((n, k, g.shape[1]), np.float32)
    for t in range(n):
        for s in range(k):
            e = int(ids[t, s])
            mid = clamped_swiglu(product("gate", g[t : t + 1], e), product("up", g[t : t + 1], e),
                                 clamp)  # fmt: skip
            mid = (mid * wts[t, s]).astype(np.float32)
            contrib[t, s] = product("down", mid, e)[0]
    moe = np.zeros(g.shape, np.float32)
    for s in range(k):
        moe = (moe + contrib[:, s]).astype(np.float32)
    shared = product("sh_down", clamped_swiglu(product("sh_gate", g), product("sh_up", g), clamp))
    out: F32 = (moe + shared).astype(np.float32)
    return out


def _sequential(w: F32, x: F32) -> F32:
    acc = np.zeros(w.shape[0], np.float32)
    for i in range(w.shape[1]):
        acc = (acc + w[:, i] * x[i]).astype(np.float32)
    return acc


@pytest.mark.parametrize(("n_tok", "sh_type"), [(1, GGMLType.Q8_0), (10, GGMLType.F16)])
def test_whole_ffn_in_ds4_numerics_matches_reference(vk: VulkanRuntime, n_tok: int,
                                                     sh_type: GGMLType) -> None:  # fmt: skip
    """ds4 numerics, activations quantized on the device (the activation quantizer's
    record_quantize_for), integer dots; within the cpu fast path's noise of the
    reference's integer dots."""
    why = "the on-device activation quantizer (vulkan/weights.py) is not on this branch"
    actquant = pytest.importorskip("ds4.adapters.compute.vulkan.weights", reason=why)
    n_expert, k, dim, ff, ffs, clamp = 8, 3, 256, 512, 256, 10.0
    shapes = {"gate": (GGMLType.IQ2_XXS, n_expert * ff, dim),
              "up": (GGMLType.IQ2_XXS, n_expert * ff, dim),
              "down": (GGMLType.Q2_K, n_expert * dim, ff), "sh_gate": (sh_type, ffs, dim),
              "sh_up": (sh_type, ffs, dim), "sh_down": (sh_type, dim, ffs)}  # fmt: skip
    raws = {n: weight_rows(t, r, c, seed=i) for i, (n, (t, r, c)) in enumerate(shapes.items())}
    dev = {n: upload_weights(raws[n], t, c, rt=vk) for n, (t, r, c) in shapes.items()}
    w = FfnWeights(dev["gate"], dev["up"], dev["down"], n_expert,
                   shared=(dev["sh_gate"], dev["sh_up"], dev["sh_down"]))  # fmt: skip
    rng = np.random.default_rng(n_tok + 40)
    g = rng.standard_normal((n_tok, dim)).astype(np.float32)
    ids = np.stack([rng.choice(n_expert, k, replace=False) for _ in range(n_tok)])
    wts = rng.uniform(0.1, 1.0, (n_tok, k)).astype(np.float32)
    host = [vk.host_buffer(a.nbytes) for a in (g, ids.astype(np.int32), wts, g)]
    for buf, a in zip(host[:3], (g, ids.astype(np.int32), wts), strict=True):
        buf.write(a)
    scratch = ffn_scratch(vk, w, n_tok, k, quantized=True)
    vk.run(lambda rec: record_moe_ffn_q8(rec, w, scratch, FfnBuffers(*host), n_tok, clamp,
                                         actquant.record_quantize_for))  # fmt: skip
    got = host[3].read(np.float32, g.size).reshape(g.shape)
    want = _ds4_reference_ffn(raws, {n: t for n, (t, _, _) in shapes.items()}, n_expert, g,
                              ids, wts, clamp)  # fmt: skip
    err = float(np.max(np.abs(got - want)) / np.max(np.abs(want)))
    assert err <= 1e-3, err
    scratch.release()
    for buf in host:
        buf.release()
    for d in dev.values():
        d.release()
