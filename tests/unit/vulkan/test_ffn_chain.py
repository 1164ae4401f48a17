"""The FFN half of a layer recorded into one submission over device-local
intermediates gives exactly the results of the same kernels called one at a time
through the host (the building block the device-resident forward composes)."""

from __future__ import annotations

import numpy as np
from tests.unit.cpu_kernels.kernel_blocks import weight_rows

from ds4.adapters.compute.vulkan.ffn import (
    TOP_K_BIAS,
    RouteBuffers,
    Routing,
    record_router,
    route_on_device,
)
from ds4.adapters.compute.vulkan.hc import (
    HcBuffers,
    HcShape,
    hc_post,
    hc_pre,
    record_hc_post,
    record_hc_pre,
    split_width,
)
from ds4.adapters.compute.vulkan.moe import (
    FfnBuffers,
    FfnWeights,
    ffn_scratch,
    moe_ffn,
    record_moe_ffn,
)
from ds4.adapters.compute.vulkan.ops import record_rmsnorm, rmsnorm
from ds4.adapters.compute.vulkan.runtime import Recorder, VulkanRuntime
from ds4.adapters.compute.vulkan.weights import kernel_tables, matmul, upload_weights
from ds4.domain.gguf.ggml_types import GGMLType


def test_ffn_half_in_one_submission_equals_the_calls_one_at_a_time(vk: VulkanRuntime) -> None:
    n, s, d, n_expert, k, ff, clamp = 9, 4, 256, 8, 2, 256, 10.0
    rng = np.random.default_rng(12)
    width = split_width(s)
    streams = rng.standard_normal((n, s, d)).astype(np.float32)
    fn = (rng.standard_normal((width, s * d)) * 0.05).astype(np.float32)
    scale = rng.uniform(0.5, 2.0, 3).astype(np.float32)
    base = rng.standard_normal(width).astype(np.float32)
    norm = rng.uniform(0.5, 1.5, d).astype(np.float32)
    bias = (rng.standard_normal(n_expert) * 0.1).astype(np.float32)
    w_fn = upload_weights(fn.view(np.uint8), GGMLType.F32, s * d, rt=vk)
    gate_inp = upload_weights(weight_rows(GGMLType.F16, n_expert, d, seed=1), GGMLType.F16, d,
                              rt=vk)  # fmt: skip
    mats = [upload_weights(weight_rows(t, r, c, seed=i), t, c, rt=vk) for i, (t, r, c) in
            enumerate([(GGMLType.IQ2_XXS, n_expert * ff, d), (GGMLType.IQ2_XXS, n_expert * ff, d),
                       (GGMLType.Q2_K, n_expert * d, ff), (GGMLType.Q8_0, ff, d),
                       (GGMLType.Q8_0, ff, d), (GGMLType.Q8_0, d, ff)], start=2)]  # fmt: skip
    ffn = FfnWeights(mats[0], mats[1], mats[2], n_expert, shared=(mats[3], mats[4], mats[5]))

    # One call at a time, through the host.
    x, split = hc_pre(streams, w_fn, scale, base, iters=20, hc_eps=1e-6, rms_eps=1e-6)
    g = rmsnorm(x, norm, 1e-6, rt=vk)
    ids, wts = route_on_device(matmul(gate_inp, g), k, 1.5, True, vk, bias=bias)
    want = hc_post(moe_ffn(ffn, g, ids, wts, clamp), streams, split, vk)

    # One submission: only the inputs and the new streams touch host memory.
    inputs = {name: vk.upload(a) for name, a in (("scale", scale), ("base", base),
                                                  ("norm", norm), ("bias", bias))}  # fmt: skip
    sb, out = vk.host_buffer(streams.nbytes), vk.host_buffer(streams.nbytes)
    sb.write(streams)
    dev = {name: vk.device_buffer(size) for name, size in (
        ("flat", streams.nbytes), ("mix", n * width * 4), ("split", n * width * 4),
        ("x", n * d * 4), ("g", n * d * 4), ("logits", n * n_expert * 4), ("ids", n * k * 4),
        ("wts", n * k * 4), ("y", n * d * 4))}  # fmt: skip
    scratch = ffn_scratch(vk, ffn, n, k)
    fn_tables, gate_tables = kernel_tables(vk, w_fn), kernel_tables(vk, gate_inp)

    def record(rec: Recorder) -> None:
        record_hc_pre(
            rec,
            w_fn,
            fn_tables,
            HcBuffers(sb, inputs["scale"], inputs["base"], dev["mix"], dev["split"], dev["x"],
                      dev["flat"]),
            HcShape(n, s, d, 20, 1e-6, 1e-6),
        )  # fmt: skip
        rec.barrier()
        record_rmsnorm(rec, dev["x"], inputs["norm"], dev["g"], d, n, 1e-6, True)
        rec.barrier()
        record_router(
            rec,
            gate_inp,
            gate_tables,
            dev["g"],
            RouteBuffers(dev["logits"], inputs["bias"], dev["g"], dev["g"], dev["ids"],
                         dev["wts"]),
            Routing(k, TOP_K_BIAS, 1.5, True),
            n,
        )  # fmt: skip
        rec.barrier()
        record_moe_ffn(rec, ffn, scratch, FfnBuffers(dev["g"], dev["ids"], dev["wts"], dev["y"]),
                       n, clamp)  # fmt: skip
        rec.barrier()
        record_hc_post(rec, dev["y"], sb, dev["split"], out, n, s, d)  # fmt: skip

    vk.run(record)
    got = out.read(np.float32, streams.size).reshape(streams.shape)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    for buf in [*inputs.values(), *dev.values(), sb, out]:
        buf.release()
    scratch.release()
    for wt in [w_fn, gate_inp, *mats]:
        wt.release()
