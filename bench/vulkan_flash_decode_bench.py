"""Flash-shaped weight products of whole layers on a Vulkan device: decode and prefill.

Per layer, the weight bytes one token reads in Flash (random weights, real dims and
types): the attention projections and the shared expert in Q8_0, and 6 routed experts
(IQ2_XXS gate/up, Q2_K down). --layers of them are resident at once (43 is Flash's
count, about 7.6 GB) so no cache serves them. One submission per step runs every
layer's products in order; decode is 1 token, prefill --prefill-tokens. Printed: t/s of
the weight products alone (no attention, norms or routing: an upper bound for a GPU
forward, not a forward's speed) and GB/s against the device's own copy bandwidth.

On Mesa's lavapipe these are CPU numbers. Run: bench/vulkan_flash_decode_bench.py
[--layers 43] (tools/gpu/run_checks.sh does).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np
from bench.random_blocks import random_blocks
from bench.vulkan_matvec_bench import copy_bandwidth

from ds4.adapters.compute.vulkan.device import Buffer
from ds4.adapters.compute.vulkan.runtime import MAX_SETS, Recorder, runtime
from ds4.adapters.compute.vulkan.weights import (
    VulkanWeights,
    kernel_tables,
    record_matmul,
    upload_weights,
)
from ds4.domain.gguf.ggml_types import GGMLType

Q8, IQ2, Q2K = GGMLType.Q8_0, GGMLType.IQ2_XXS, GGMLType.Q2_K
# (type, cols = input width, rows = output width) of one layer's products for one token.
LAYER = (
    [(Q8, 4096, 1024), (Q8, 1024, 32768), (Q8, 4096, 512), (Q8, 4096, 8192), (Q8, 8192, 4096)]
    + [(Q8, 4096, 2048), (Q8, 4096, 2048), (Q8, 2048, 4096)]  # shared expert
    + [(IQ2, 4096, 2048), (IQ2, 4096, 2048), (Q2K, 2048, 4096)] * 6  # routed experts
)


def make_step(
    layers: list[list[VulkanWeights]], x: Buffer, y: Buffer, n_tok: int,
    tables: dict[GGMLType, list[Buffer]],
) -> Callable[[Recorder], None]:  # fmt: skip
    """Record one step: every layer's products in order, each after the previous."""

    def step(rec: Recorder) -> None:
        for layer in layers:
            for w in layer:
                record_matmul(rec, w, x, y, n_tok, tables[w.ggml_type])
                rec.barrier()

    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layers", type=int, default=1, help="resident layers (Flash: 43)")
    ap.add_argument("--prefill-tokens", type=int, default=32, help="tokens per prefill step")
    ap.add_argument("--steps", type=int, default=3, help="timed steps of each kind")
    args = ap.parse_args()
    if not 1 <= args.layers <= 200 or not 1 <= args.prefill_tokens <= 4096:
        ap.error("--layers must be 1..200 and --prefill-tokens 1..4096")
    if not 1 <= args.steps <= 100 or args.layers * len(LAYER) * 2 > MAX_SETS:
        ap.error(f"--steps 1..100; at most {MAX_SETS // (2 * len(LAYER))} layers per submission")
    rt = runtime()
    print(f"device: {rt.dev.describe()}")
    if rt.dev.kind == "CPU":
        print("NOTE: a CPU Vulkan implementation (lavapipe): these are CPU numbers.")
    copy = copy_bandwidth(rt, min(256, rt.dev.max_storage_range >> 20) << 20, 8)
    print(f"device copy bandwidth: {copy:.1f} GB/s (read + write)")
    rng = np.random.default_rng(0)
    shapes = {s: random_blocks(s[0], s[2], s[1], rng) for s in set(LAYER)}
    layers: list[list[VulkanWeights]] = []
    start = time.perf_counter()
    for i in range(args.layers):
        layers.append([upload_weights(shapes[s], s[0], s[1], rt=rt) for s in LAYER])
        print(f"\ruploaded layer {i + 1}/{args.layers}", end="", flush=True)
    per_layer = sum(shapes[s].nbytes for s in LAYER)
    total = per_layer * args.layers
    print(f"\n{args.layers} layers, {total / 1e9:.2f} GB resident, uploaded in "
          f"{time.perf_counter() - start:.1f} s")  # fmt: skip
    for n_tok, label in ((1, "decode"), (args.prefill_tokens, f"prefill {args.prefill_tokens}")):
        widest = max(max(c, r) for _, c, r in LAYER)
        x = rt.host_buffer(n_tok * widest * 4)
        x.write(rng.standard_normal(n_tok * widest).astype(np.float32))
        y = rt.device_buffer(n_tok * widest * 4)
        tables = {w.ggml_type: kernel_tables(rt, w) for w in layers[0]}
        step = make_step(layers, x, y, n_tok, tables)
        rt.run(step)  # warm-up
        start = time.perf_counter()
        for _ in range(args.steps):
            rt.run(step)
        per_step = (time.perf_counter() - start) / args.steps
        gbs = total / per_step / 1e9
        print(f"{label:<12} {per_step * 1e3:9.2f} ms/step  {n_tok / per_step:9.2f} t/s "
              f"(weight products only)  {gbs:8.2f} GB/s = "
              f"{100 * gbs / copy:5.1f}% of copy")  # fmt: skip
        x.release()
        y.release()
    for layer in layers:
        for w in layer:
            w.release()


if __name__ == "__main__":
    main()
