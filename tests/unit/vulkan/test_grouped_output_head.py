"""The grouped output projection and the output head on the GPU against the reference's
compositions (reference/forward.py's o_groups product, reference/forward.py's
head_with) within the fp32 contract (docs/vulkan.md)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from tests.unit.cpu_kernels.kernel_blocks import weight_rows
from tests.unit.vulkan.reference import dequantized

from ds4.adapters.compute.vulkan.attention import grouped_output
from ds4.adapters.compute.vulkan.hc import HeadWeights, head_logits
from ds4.adapters.compute.vulkan.runtime import VulkanRuntime
from ds4.adapters.compute.vulkan.weights import upload_weights
from ds4.domain.engine_math.layers import head_weights, rmsnorm, weighted_streams
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType

F32 = npt.NDArray[np.float32]
REL = 1e-4


@pytest.mark.parametrize(("n_tok", "n_groups", "a_type"), [(1, 8, GGMLType.Q8_0),
                                                           (10, 2, GGMLType.Q4_K),
                                                           (3, 1, GGMLType.F16)])  # fmt: skip
def test_grouped_output_matches_reference(vk: VulkanRuntime, n_tok: int, n_groups: int,
                                          a_type: GGMLType) -> None:  # fmt: skip
    gin, lo, dim = 256, 64, 96
    raw_a = weight_rows(a_type, n_groups * lo, gin, seed=n_groups)
    raw_b = weight_rows(GGMLType.Q8_0, dim, n_groups * lo, seed=9)
    wa = upload_weights(raw_a, a_type, gin, rt=vk)
    wb = upload_weights(raw_b, GGMLType.Q8_0, n_groups * lo, rt=vk)
    heads = np.random.default_rng(n_tok).standard_normal((n_tok, n_groups * gin))
    heads = heads.astype(np.float32)
    got = grouped_output(wa, wb, heads, n_groups)
    da = dequantized(raw_a, a_type, n_groups * lo, gin)
    db = dequantized(raw_b, GGMLType.Q8_0, dim, n_groups * lo)
    x64 = heads.astype(np.float64)
    low = np.concatenate([x64[:, g * gin : (g + 1) * gin] @ da[g * lo : (g + 1) * lo].T
                          for g in range(n_groups)], axis=1).astype(np.float32)  # fmt: skip
    low_scale = np.concatenate([np.abs(x64[:, g * gin : (g + 1) * gin])
                                @ np.abs(da[g * lo : (g + 1) * lo]).T
                                for g in range(n_groups)], axis=1)  # fmt: skip
    want = low.astype(np.float64) @ db.T
    bound = REL * ((np.abs(low) + low_scale) @ np.abs(db).T)
    assert np.all(np.abs(got - want) <= bound)
    wa.release()
    wb.release()


@pytest.mark.parametrize(("n_tok", "n_hc", "dim", "vocab"), [(1, 4, 256, 300), (5, 2, 64, 33)])
def test_head_matches_reference(vk: VulkanRuntime, n_tok: int, n_hc: int, dim: int,
                                vocab: int) -> None:  # fmt: skip
    rng = np.random.default_rng(vocab)
    streams = rng.standard_normal((n_tok, n_hc, dim)).astype(np.float32)
    fn = (rng.standard_normal((n_hc, n_hc * dim)) * 0.05).astype(np.float32)
    scale = rng.uniform(0.5, 2.0, 1).astype(np.float32)
    base = rng.standard_normal(n_hc).astype(np.float32)
    norm = rng.uniform(0.5, 1.5, dim).astype(np.float32)
    raw_out = weight_rows(GGMLType.Q8_0, vocab, dim, seed=3)
    hbufs = [vk.upload(a) for a in (scale, base, norm)]
    w = HeadWeights(upload_weights(fn.view(np.uint8), GGMLType.F32, n_hc * dim, rt=vk),
                    hbufs[0], hbufs[1], hbufs[2],
                    upload_weights(raw_out, GGMLType.Q8_0, dim, rt=vk), n_hc)  # fmt: skip
    got = head_logits(w, streams, hc_eps=1e-6, rms_eps=1e-6)
    flat = rmsnorm(streams.reshape(n_tok, -1), None, 1e-6)
    mix = (flat.astype(np.float64) @ fn.T.astype(np.float64)).astype(np.float32)
    z = rmsnorm(weighted_streams(streams, head_weights(mix, scale, base, 1e-6)), norm, 1e-6)
    dout = dequantized(raw_out, GGMLType.Q8_0, vocab, dim)
    want = z.astype(np.float64) @ dout.T
    bound = REL * (np.abs(z).astype(np.float64) @ np.abs(dout).T)
    assert np.all(np.abs(got - want) <= bound)
    with pytest.raises(Ds4Error, match="streams"):
        head_logits(w, streams[:, :1], hc_eps=1e-6, rms_eps=1e-6)
    for buf in hbufs:
        buf.release()
    w.hc_fn.release()
    w.output.release()
