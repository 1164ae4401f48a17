"""SSD streaming against plain mmap on a Flash-shaped model file (docs/ssd-streaming.md).

Writes a GGUF with --layers Flash-shaped layers (Flash's dims, 256 experts, the q2
mixture of real quant types: IQ2_XXS gate/up and Q2_K down experts, Q8_0 projections
and head, F16 embedding; random data, every byte written: not sparse), then decodes
greedily on the cpu backend:

- mmap cold: the file dropped from the page cache first, the whole file mapped;
- mmap warm: the same again with the file now in the page cache;
- streaming at budgets of 10% .. 100% of the expert bytes, cold (file dropped from the
  page cache, empty expert cache) and warm (the same runner's second decode window).

Prints t/s, expert-cache hit rate, disk bytes per token and stall ms per token side by
side. The file is deleted at the end (--keep keeps it). Plain mmap runs with whatever
memory the machine has: no cgroup limit is applied (docs/ssd-streaming.md says what
that means for the comparison).

    PYTHONPATH=src python -m bench.ssd_streaming_bench [--layers 1] [--tokens 48]
        [--plot docs/img/ssd-streaming.png]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np
from bench.cpu_kernels_bench import random_blocks
from tqdm import tqdm

from ds4.adapters.compute.cpu import CpuRunner, open_cpu_runner
from ds4.adapters.gguf.writer import GGUFWriter
from ds4.apps import wiring
from ds4.domain.convert.quant_presets import quant_plan
from ds4.domain.expert_cache.budget import CacheSpec
from ds4.domain.expert_cache.options import ExpertCacheStats, StreamingOptions
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.records import meta_str
from ds4.domain.model.catalog import TensorSpec, model_tensors
from ds4.domain.model.hparams import DeepSeekV4HParams, hparams_metadata
from ds4.domain.model.presets import FLASH
from ds4.ports.compute import ComputeSession


def flash_layers(n: int) -> DeepSeekV4HParams:
    return dataclasses.replace(
        FLASH, n_layer=n, compress_ratios=(4,) * n, n_hash_layer=0, swiglu_clamp=(10.0,) * n
    )


def tensor_parts(spec: TensorSpec, kind: GGMLType, rng: np.random.Generator) -> list[bytes]:
    shape = tuple(reversed(spec.dims))
    if kind in (GGMLType.F32, GGMLType.F16):
        base = 1.0 if spec.name.endswith("norm.weight") else 0.0
        dtype = np.float32 if kind is GGMLType.F32 else np.float16
        scale = 0.5 if spec.name == "token_embd.weight" else 0.02
        rows = shape[0] if len(shape) > 1 else 1
        step = max(1, (1 << 24) // max(1, int(np.prod(shape[1:]))))
        parts = []
        for r in range(0, rows, step):
            sub = (min(step, rows - r), *shape[1:]) if len(shape) > 1 else shape
            parts.append((base + rng.standard_normal(sub) * scale).astype(dtype).tobytes())
        return parts
    if kind is GGMLType.I32:
        return [rng.integers(0, FLASH.n_expert, shape, dtype=np.int32).tobytes()]
    if len(shape) == 3:  # one expert at a time, each its own random bytes
        return [random_blocks(kind, shape[1], shape[2], rng).tobytes() for _ in range(shape[0])]
    step = 8192
    return [
        random_blocks(kind, min(step, shape[0] - r), shape[1], rng).tobytes()
        for r in range(0, shape[0], step)
    ]


def write_model(path: Path, hp: DeepSeekV4HParams, seed: int) -> None:
    rng = np.random.default_rng(seed)
    plan = quant_plan("q2", hp)
    specs = [s for s in model_tensors(hp) if not (s.optional and s.layer is not None
                                                   and hp.is_hash_layer(s.layer))]  # fmt: skip
    with GGUFWriter(path) as w:
        w.add_metadata("general.name", meta_str("Flash-shaped SSD-streaming bench"))
        for key, value in {**hparams_metadata(hp), **wiring.tokenizer_records(None)}.items():
            w.add_metadata(key, value)
        kinds = {s.name: plan.tensor_type(s, hp) for s in specs}
        for s in specs:
            w.add_tensor(s.name, s.dims, kinds[s.name])
        w.begin_data()
        for s in tqdm(specs, desc="writing", unit="tensor"):
            w.write_tensor_parts(s.name, tensor_parts(s, kinds[s.name], rng))
        w.finish()


def drop_page_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def start(runner: CpuRunner, prompt: list[int], tokens: int) -> ComputeSession:
    session = runner.new_session(len(prompt) + 2 * tokens + 2)
    session.prefill(prompt)
    return session


def decode(session: ComputeSession, tokens: int) -> float:
    """Greedy tokens/s over `tokens` steps."""
    logits = session.logits()
    t0 = time.perf_counter()
    for _ in range(tokens):
        logits = session.eval(int(np.argmax(logits)))
    return tokens / (time.perf_counter() - t0)


def row(label: str, tps: float, st: ExpertCacheStats | None, tokens: int) -> str:
    if st is None:
        return f"{label:<22} {tps:7.2f}  {'-':>8}  {'-':>14}  {'-':>10}"
    return (
        f"{label:<22} {tps:7.2f}  {st.hit_rate:8.3f}  {st.bytes_read / tokens / 2**20:11.1f} MiB"
        f"  {st.stall_seconds * 1e3 / tokens:10.1f}"
    )


def plot(points: list[tuple[int, str, float, ExpertCacheStats]], mmap: dict[str, float],
         out: str, tokens: int) -> None:  # fmt: skip
    """Hit rate, disk MiB/token and t/s against the budget, cold and warm."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6))
    for mode, style in (("cold", "o--"), ("warm", "o-")):
        pts = [(p, tps, st) for p, m, tps, st in points if m == mode]
        x = [p for p, _, _ in pts]
        axes[0].plot(x, [st.hit_rate for _, _, st in pts], style, label=f"stream {mode}")
        axes[1].plot(x, [st.bytes_read / tokens / 2**20 for _, _, st in pts], style,
                     label=f"stream {mode}")  # fmt: skip
        axes[2].plot(x, [tps for _, tps, _ in pts], style, label=f"stream {mode}")
    for mode, tps in mmap.items():
        axes[2].axhline(tps, linestyle=":" if mode == "cold" else "-.", color="grey",
                        label=f"mmap {mode}")  # fmt: skip
    for ax, title in zip(axes, ("expert hit rate", "disk MiB / token", "decode t/s"),
                         strict=True):  # fmt: skip
        ax.set_xlabel("expert cache budget (% of expert bytes)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[2].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=1, help="Flash-shaped layers (1..43)")
    ap.add_argument("--tokens", type=int, default=8, help="decode tokens per measurement")
    ap.add_argument("--dir", default="/tmp", help="where the model file goes")
    ap.add_argument(
        "--keep",
        action="store_true",
        help="keep the model file (a kept file is reused by the next run)",
    )
    ap.add_argument(
        "--readahead",
        type=int,
        default=0,
        help="--ssd-streaming-readahead for the streaming runs (0..1024)",
    )
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--budgets", default="10,25,50,75,100", help="percent of expert bytes")
    ap.add_argument("--plot", metavar="PNG", help="draw the curves here")
    args = ap.parse_args()
    if not 1 <= args.layers <= 43:
        ap.error("--layers must be in 1..43")
    hp = flash_layers(args.layers)
    path = Path(args.dir) / f"ssd_bench_flash_{args.layers}l.gguf"
    need = int(3.6e9 * args.layers)  # generous: experts ~1.8 GB a layer + embedding/head
    free = shutil.disk_usage(args.dir).free
    if not path.exists() and free < need + (8 << 30):
        print(f"not enough disk in {args.dir}: {free >> 30} GiB free", file=sys.stderr)
        return 1
    if not 0 <= args.readahead <= 1024:
        ap.error("--readahead must be in 0..1024")
    try:
        t0 = time.perf_counter()
        if path.exists():
            print(f"{path}: reusing the file a --keep run left")
        else:
            write_model(path, hp, 1)
        print(f"{path}: {path.stat().st_size / 2**30:.2f} GiB, ready in "
              f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
        prompt = [int(t) for t in np.random.default_rng(5).integers(0, hp.n_vocab, 4)]
        total = hp.n_layer * hp.n_expert
        n = args.tokens
        print(f"{args.layers} layers x {hp.n_expert} experts, {n} tokens per window, "
              f"{args.threads} threads, read-ahead {args.readahead}\n")  # fmt: skip
        print(f"{'run':<22} {'t/s':>7}  {'hit rate':>8}  {'disk/token':>14}  {'stall ms/t':>10}")
        points: list[tuple[int, str, float, ExpertCacheStats]] = []
        mmap: dict[str, float] = {}
        for warm in (False, True):
            if not warm:
                drop_page_cache(path)
            tps = decode(start(open_cpu_runner(str(path), threads=args.threads), prompt, n), n)
            mmap["warm" if warm else "cold"] = tps
            print(row(f"mmap {'warm' if warm else 'cold'}", tps, None, n), flush=True)
        for pct in (int(p) for p in args.budgets.split(",")):
            slots = max(1, total * pct // 100)
            opts = StreamingOptions(
                cache=CacheSpec(experts=slots), cold=True, readahead=args.readahead
            )
            runner = open_cpu_runner(str(path), threads=args.threads, streaming=opts)
            assert runner.streaming is not None
            session = start(runner, prompt, n)
            s0 = runner.streaming.stats()
            tps = decode(session, n)
            s1 = runner.streaming.stats()
            points.append((pct, "cold", tps, s1.since(s0)))
            print(row(f"stream {pct:3d}% cold", tps, s1.since(s0), n), flush=True)
            tps = decode(session, n)
            points.append((pct, "warm", tps, runner.streaming.stats().since(s1)))
            print(row(f"stream {pct:3d}% warm", tps, points[-1][3], n), flush=True)
            del runner, session
        if args.plot:
            plot(points, mmap, args.plot, n)
            print(f"wrote {args.plot}")
    finally:
        if not args.keep:
            path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
