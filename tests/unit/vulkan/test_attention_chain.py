"""The attention side of a layer's step in one submission, for a prefill chunk and then a
decode token: cache rounding of the raw KV rows and indexer queries, both compressors'
emissions, indexer scores, top-k and attention over raw + selected rows. Compared with
the reference forward's own per-token loop (forward.attention_sublayer's order:
push, emit, select, attend) built from its functions; fp32 pooling, so the bound is
the attention kernel's: |out - ref| <= 1e-4 * max|rows|."""

from __future__ import annotations

import dataclasses
from typing import cast

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.forward import LayerSetup, WeightStore, _emit
from ds4.adapters.compute.reference.state import CompressorHistory
from ds4.adapters.compute.vulkan.attention import (
    AttentionBuffers,
    AttentionWindow,
    record_attend_chunk,
)
from ds4.adapters.compute.vulkan.compressor import (
    CompressorBuffers,
    Emission,
    IndexerBuffers,
    StoreRounding,
    record_compress,
    record_indexer_scores,
    record_store_round,
    record_topk,
)
from ds4.adapters.compute.vulkan.device import Buffer
from ds4.adapters.compute.vulkan.ops import rope_tables
from ds4.adapters.compute.vulkan.runtime import Recorder, VulkanRuntime
from ds4.domain.engine_math.layers import attend_with_sinks, f16round, indexer_scores, top_k_mask
from ds4.domain.engine_math.lowprec import FP32, fp8_kv_sim, indexer_qat
from ds4.domain.model.presets import FLASH

F32 = npt.NDArray[np.float32]
DH, N_ROT, H, IH, ID, SWA, TOP_K, N_TOK = 128, 64, 4, 4, 128, 8, 3, 31
CHUNKS = [(0, 30), (30, 1)]  # a prefill chunk, then one decode token
A_NORM, I_NORM = "attn_compressor_norm.weight", "indexer_compressor_norm.weight"


class _Vectors:
    def __init__(self, vectors: dict[str, F32]) -> None:
        self._vectors = vectors

    def small(self, name: str) -> F32:
        return self._vectors[name]


def test_prefill_then_decode_in_one_submission_each(vk: VulkanRuntime) -> None:
    rng = np.random.default_rng(21)

    def rand(*shape: int, scale: float = 1.0) -> F32:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    kv, q, sinks = rand(N_TOK, DH), rand(N_TOK, H, DH), rand(H)
    a_kv, a_gate, a_ape, a_norm = (
        rand(N_TOK, 2 * DH),
        rand(N_TOK, 2 * DH, scale=3),
        rand(4, 2 * DH),
        rand(DH),
    )
    i_kv, i_gate, i_ape, i_norm = (
        rand(N_TOK, 2 * ID),
        rand(N_TOK, 2 * ID, scale=3),
        rand(4, 2 * ID),
        rand(ID),
    )
    iq, iw = rand(N_TOK, IH, ID), rand(N_TOK, IH)
    hp = dataclasses.replace(FLASH, head_dim=DH, n_rot=N_ROT, indexer_head_dim=ID)
    vectors = _Vectors({f"blk.2.{A_NORM}": a_norm, f"blk.2.{I_NORM}": i_norm})
    setup = LayerSetup(hp, 2, cast(WeightStore, vectors), FP32)
    scale = 1.0 / np.sqrt(DH)

    # The reference's per-token loop.
    a_comp, i_comp = CompressorHistory(4, DH), CompressorHistory(4, ID)
    raw_ref = f16round(fp8_kv_sim(kv, DH - N_ROT))
    iq_ref = indexer_qat(iq)
    want = np.empty_like(q)
    for p in range(N_TOK):
        for comp, ckv, gate, ape, norm in ((a_comp, a_kv, a_gate, a_ape, A_NORM),
                                           (i_comp, i_kv, i_gate, i_ape, I_NORM)):  # fmt: skip
            comp.kv.append(ckv[p])
            comp.score.append((gate[p] + ape[p % 4]).astype(np.float32))
            if (p + 1) % 4 == 0:
                _emit(setup, comp, norm, p)
        rows = raw_ref[max(0, p + 1 - SWA) : p + 1]
        comp_rows = a_comp.rows.view()
        if len(comp_rows) > TOP_K:
            scores = indexer_scores(i_comp.rows.view(), iq_ref[p], iw[p])
            srt = np.sort(scores)[::-1]
            assert srt[TOP_K - 1] - srt[TOP_K] > 1e-3 * abs(srt[TOP_K - 1])  # no near-tie
            comp_rows = comp_rows[top_k_mask(scores, TOP_K)]
        want[p] = attend_with_sinks(q[p], np.concatenate([rows, comp_rows]), sinks, scale)

    # The device: state buffers that persist across the two steps.
    cos, sin = rope_tables(np.arange(N_TOK), setup.rope(), iterated=False)
    fixed = {"a_ape": a_ape, "a_norm": a_norm, "i_ape": i_ape, "i_norm": i_norm, "cos": cos,
             "sin": sin, "sinks": sinks}  # fmt: skip
    dev: dict[str, Buffer] = {}
    for name, arr in fixed.items():
        dev[name] = vk.upload(arr)
    for name, nbytes in (
        ("raw", kv.nbytes),
        ("a_kv", a_kv.nbytes),
        ("a_gate", a_gate.nbytes),
        ("i_kv", i_kv.nbytes),
        ("i_gate", i_gate.nbytes),
        ("a_rows", N_TOK // 4 * DH * 4),
        ("i_rows", N_TOK // 4 * ID * 4),
        ("scores", N_TOK * (N_TOK // 4) * 4),
        ("sel", N_TOK * TOP_K * 4),
    ):
        dev[name] = vk.device_buffer(nbytes)  # fmt: skip
    got = np.empty_like(q)
    for pos0, n in CHUNKS:
        step = {"kv": kv[pos0 : pos0 + n], "a_kv": a_kv[pos0 : pos0 + n],
                "a_gate": a_gate[pos0 : pos0 + n], "i_kv": i_kv[pos0 : pos0 + n],
                "i_gate": i_gate[pos0 : pos0 + n], "q": q[pos0 : pos0 + n],
                "iq": iq[pos0 : pos0 + n], "iw": iw[pos0 : pos0 + n]}  # fmt: skip
        host = {name: vk.host_buffer(a.nbytes) for name, a in step.items()}
        for name, a in step.items():
            host[name].write(np.ascontiguousarray(a))
        out = vk.host_buffer(step["q"].nbytes)
        first_last = (pos0 // 4 + 1) * 4 - 1  # the first window ending inside the chunk
        n_emit = (pos0 + n) // 4 - pos0 // 4

        def record(rec: Recorder, pos0: int = pos0, n: int = n, first_last: int = first_last,
                   n_emit: int = n_emit, host: dict[str, Buffer] = host,
                   out: Buffer = out) -> None:  # fmt: skip
            for name, width in (("kv", DH), ("a_kv", 2 * DH), ("a_gate", 2 * DH),
                                ("i_kv", 2 * ID), ("i_gate", 2 * ID)):  # fmt: skip
                target = "raw" if name == "kv" else name
                rec.copy(host[name], dev[target], n * width * 4, 0, pos0 * width * 4)
            rec.barrier()
            record_store_round(rec, dev["raw"], n_rows=n, dim=DH, row0=pos0,
                               mode=StoreRounding.KV_ROW, n_nope=DH - N_ROT)  # fmt: skip
            record_store_round(rec, host["iq"], n_rows=n * IH, dim=ID,
                               mode=StoreRounding.INDEX_QUERY)  # fmt: skip
            if n_emit:
                for pre, d in (("a", DH), ("i", ID)):
                    record_compress(
                        rec, CompressorBuffers(
                            dev[f"{pre}_kv"], dev[f"{pre}_gate"], dev[f"{pre}_ape"],
                            dev[f"{pre}_norm"], dev["cos"], dev["sin"], dev[f"{pre}_rows"],
                            d=d, ratio=4, n_rot=N_ROT, eps=hp.rms_eps),
                        Emission(last_row=first_last, first_pos=first_last - 3,
                                 rope_row=first_last - 3, rope_stride=4, out_row=pos0 // 4,
                                 n_emit=n_emit),
                    )  # fmt: skip
            rec.barrier()
            record_indexer_scores(rec, IndexerBuffers(dev["i_rows"], host["iq"], host["iw"],
                                                      dev["scores"], n_head=IH, dim=ID),
                                  n_q=n, pos0=pos0, ratio=4, stride=N_TOK // 4)  # fmt: skip
            rec.barrier()
            record_topk(rec, dev["scores"], dev["sel"], n_q=n, k=TOP_K, pos0=pos0, ratio=4,
                        stride=N_TOK // 4)  # fmt: skip
            rec.barrier()
            win = AttentionWindow(pos0=pos0, n_swa=SWA, ratio=4, top_k=TOP_K)
            record_attend_chunk(rec, AttentionBuffers(host["q"], dev["raw"], dev["a_rows"],
                                                      dev["sel"], dev["sinks"], out, n_head=H,
                                                      dim=DH, scale=scale),
                                win, n_q=n)  # fmt: skip

        vk.run(record)
        got[pos0 : pos0 + n] = out.read(np.float32, step["q"].size).reshape(n, H, DH)
        for buf in [*host.values(), out]:
            buf.release()
    bound = 1e-4 * max(float(np.max(np.abs(raw_ref))), float(np.max(np.abs(a_comp.rows.view()))))
    err = float(np.max(np.abs(got - want)))
    assert err <= bound, err / bound
    for buf in dev.values():
        buf.release()
