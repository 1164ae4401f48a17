"""SSD streaming against plain mmap under the same memory limit (docs/ssd-streaming.md).

Writes a GGUF with --layers Flash-shaped layers (Flash's dims, 256 experts, the q2
mixture of real quant types: IQ2_XXS gate/up and Q2_K down experts, Q8_0 projections
and head, F16 embedding; random data, every byte written: not sparse). Then, for each
budget (a percentage of the routed experts' bytes), two runs, each a subprocess started
with the file dropped from the page cache:

- streaming: `--ssd-streaming` with that many expert slots;
- plain mmap: the whole file mapped, no streaming;

both inside a cgroup v1 memory group limited to the same total (non-routed weights +
the budget's experts + --reserve-gb for KV, scratch and the interpreter), so the kernel
must page the mapping within what the cache is given. Each run decodes two windows of
greedy tokens: cold (right after start) and warm (the next window). Prints t/s, hit
rate, disk bytes per token (/proc/self/io read_bytes of the run), major faults and
stall time side by side. Where no cgroup can be made (not root, no v1 memory
controller) the runs are unlimited and the output says so. The file is deleted at the
end (--keep keeps it).

    PYTHONPATH=src python -m bench.ssd_streaming_bench [--layers 2] [--tokens 16]
        [--plot docs/img/ssd-streaming.png]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench import memory_cgroup
from bench.flash_gguf import flash_layers, write_model

from ds4.adapters.compute.cpu import open_cpu_runner
from ds4.apps import wiring
from ds4.domain.expert_cache import CacheSpec, StreamingOptions
from ds4.domain.model.hparams import DeepSeekV4HParams


def drop_page_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def io_read_bytes() -> int:
    """Bytes this process caused to be read from storage (/proc/self/io), page faults
    of a mapping and O_DIRECT reads alike; -1 where the kernel does not say."""
    try:
        for line in Path("/proc/self/io").read_text(encoding="ascii").splitlines():
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1


@dataclasses.dataclass(frozen=True)
class Window:
    """One decode window of one run."""

    tps: float
    disk_bytes: int  # /proc/self/io read_bytes over the window
    major_faults: int
    hit_rate: float | None = None  # streaming only
    cache_bytes: int | None = None  # bytes the expert cache read (streaming only)
    stall_s: float | None = None


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """The child's job: open the file (streaming at --pct or plain mmap), prefill, then
    two decode windows (cold: right after start; warm: the next one)."""
    hp = flash_layers(args.layers)
    prompt = [int(t) for t in np.random.default_rng(5).integers(0, hp.n_vocab, 4)]
    opts = None
    if args.child == "stream":
        slots = max(1, hp.n_layer * hp.n_expert * args.pct // 100)
        opts = StreamingOptions(cache=CacheSpec(experts=slots), readahead=args.readahead)
    io0, t0 = io_read_bytes(), time.perf_counter()
    runner = open_cpu_runner(args.file, threads=args.threads, streaming=opts)
    session = runner.new_session(len(prompt) + 2 * args.tokens + 2)
    session.prefill(prompt)
    logits = session.logits()
    # streaming pre-faults the resident weights here; mmap faults them in as it goes
    start = {"seconds": time.perf_counter() - t0, "disk_bytes": io_read_bytes() - io0}
    windows = []
    for _ in range(2):
        st0 = runner.streaming.stats() if runner.streaming else None
        io0, flt0 = io_read_bytes(), resource.getrusage(resource.RUSAGE_SELF).ru_majflt
        t0 = time.perf_counter()
        for _ in range(args.tokens):
            logits = session.eval(int(np.argmax(logits)))
        dt = time.perf_counter() - t0
        io1, flt1 = io_read_bytes(), resource.getrusage(resource.RUSAGE_SELF).ru_majflt
        w = Window(args.tokens / dt, io1 - io0 if io0 >= 0 else -1, flt1 - flt0)
        if runner.streaming is not None and st0 is not None:
            st = runner.streaming.stats().since(st0)
            w = dataclasses.replace(
                w, hit_rate=st.hit_rate, cache_bytes=st.bytes_read, stall_s=st.stall_seconds
            )
        windows.append(dataclasses.asdict(w))
    return {"start": start, "cold": windows[0], "warm": windows[1]}


@dataclasses.dataclass(frozen=True)
class Shape:
    resident: int  # non-routed tensor bytes
    experts: int  # all routed experts' bytes
    slot: int  # one expert (gate + up + down slices)


def file_shape(path: Path, hp: DeepSeekV4HParams) -> Shape:
    model = wiring.open_model_file(str(path))
    try:
        names = {f"blk.{il}.ffn_{p}_exps.weight" for il in range(hp.n_layer)
                 for p in ("gate", "up", "down")}  # fmt: skip
        experts = sum(model.tensors[n].nbytes for n in names)
        resident = sum(i.nbytes for n, i in model.tensors.items() if n not in names)
    finally:
        model.close()
    return Shape(resident, experts, experts // (hp.n_layer * hp.n_expert))


def run_child(
    args: argparse.Namespace, path: Path, mode: str, pct: int, limit: int | None, tag: str
) -> tuple[dict[str, Any] | None, str, int | None]:
    """(the child's windows or None, a note, the cgroup's peak usage) of one run."""
    argv = [
        sys.executable, "-m", "bench.ssd_streaming_bench", "--child", mode, "--file", str(path),
        "--pct", str(pct), "--layers", str(args.layers), "--tokens", str(args.tokens),
        "--threads", str(args.threads), "--readahead", str(args.readahead),
    ]  # fmt: skip
    drop_page_cache(path)  # every run starts cold
    group = None
    if limit is not None:
        group = memory_cgroup.MemoryCgroup(f"ds4_ssd_bench_{os.getpid()}_{tag}", limit)
    try:
        if group is not None:
            done = group.run(argv, timeout=args.timeout)
        else:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=args.timeout,
                                  check=False)  # fmt: skip
        peak = group.peak() if group is not None else None
    except subprocess.TimeoutExpired:
        return None, f"timed out after {args.timeout:.0f} s", None
    finally:
        if group is not None:
            group.close()
    if done.returncode != 0:
        why = "killed (out of memory in its cgroup?)" if done.returncode == -9 else "failed"
        tail = done.stderr.strip().splitlines()[-1:] if done.stderr.strip() else []
        return None, f"{why}, exit {done.returncode} {' '.join(tail)}", peak
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    return json.loads(lines[-1]), "", peak


def mib(n: float) -> str:
    return f"{n / 2**20:.1f}"


def row(label: str, limit: str, w: dict[str, Any] | None, note: str, tokens: int) -> str:
    if w is None:
        return f"| {label} | {limit} | {note} | | | | |"
    hit = "–" if w["hit_rate"] is None else f"{w['hit_rate']:.3f}"
    stall = "–" if w["stall_s"] is None else f"{w['stall_s'] * 1e3 / tokens:.1f}"
    disk = "?" if w["disk_bytes"] < 0 else mib(w["disk_bytes"] / tokens)
    return (
        f"| {label} | {limit} | {w['tps']:.2f} | {hit} | {disk} | "
        f"{w['major_faults'] / tokens:.0f} | {stall} |"
    )


def plot(results: list[tuple[int, str, str, dict[str, Any]]], out: str, tokens: int) -> None:
    """t/s, disk MiB/token and hit rate against the budget: streaming and mmap, cold
    and warm, each point run under the same memory limit."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    styles = {("stream", "cold"): "o--", ("stream", "warm"): "o-",
              ("mmap", "cold"): "s--", ("mmap", "warm"): "s-"}  # fmt: skip
    for (mode, window), style in styles.items():
        pts = [(p, w) for p, m, win, w in results if m == mode and win == window]
        if not pts:
            continue
        x = [p for p, _ in pts]
        label = f"{'ssd streaming' if mode == 'stream' else 'plain mmap'} {window}"
        axes[0].plot(x, [w["tps"] for _, w in pts], style, label=label)
        axes[1].plot(x, [max(0, w["disk_bytes"]) / tokens / 2**20 for _, w in pts], style,
                     label=label)  # fmt: skip
        if mode == "stream":
            axes[2].plot(x, [w["hit_rate"] for _, w in pts], style, label=label)
    titles = ("decode t/s (shared 2-vCPU machine: noisy)", "disk MiB read / token",
              "expert-cache hit rate")  # fmt: skip
    for ax, title in zip(axes, titles, strict=True):
        ax.set_xlabel("memory budget: resident weights + this % of expert bytes + reserve")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
        ax.xaxis.label.set_size(7)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=100)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=2, help="Flash-shaped layers (1..43)")
    ap.add_argument("--tokens", type=int, default=16, help="decode tokens per window")
    ap.add_argument("--dir", default="/tmp", help="where the model file goes")
    ap.add_argument("--keep", action="store_true",
                    help="keep the model file (a kept file is reused by the next run)")  # fmt: skip
    ap.add_argument("--readahead", type=int, default=0,
                    help="--ssd-streaming-readahead for the streaming runs (0..1024)")  # fmt: skip
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--budgets", default="10,25,50,75,100", help="percent of expert bytes")
    ap.add_argument("--reserve-gb", type=float, default=1.0,
                    help="memory for KV, scratch and the interpreter on top of the weights "
                    "in each limit (GiB)")  # fmt: skip
    ap.add_argument("--no-cgroup", action="store_true",
                    help="run without a memory limit even where a cgroup is available")  # fmt: skip
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    ap.add_argument("--plot", metavar="PNG", help="draw the curves here")
    ap.add_argument("--child", choices=["mmap", "stream"], help=argparse.SUPPRESS)
    ap.add_argument("--file", help=argparse.SUPPRESS)
    ap.add_argument("--pct", type=int, default=100, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not 1 <= args.layers <= 43:
        ap.error("--layers must be in 1..43")
    if not 0 <= args.readahead <= 1024:
        ap.error("--readahead must be in 0..1024")
    if not 1 <= args.tokens <= 4096:
        ap.error("--tokens must be in 1..4096")
    if not 0 < args.reserve_gb <= 64:
        ap.error("--reserve-gb must be in (0, 64]")
    try:
        budgets = [int(p) for p in args.budgets.split(",")]
    except ValueError:
        ap.error(f"--budgets {args.budgets!r}: comma-separated whole percentages")
    if any(not 1 <= p <= 100 for p in budgets):
        ap.error("--budgets: each percentage must be in 1..100")
    if args.child:
        print(json.dumps(measure(args)))
        return 0
    hp = flash_layers(args.layers)
    path = Path(args.dir) / f"ssd_bench_flash_{args.layers}l.gguf"
    need = int(3.6e9 * args.layers)  # generous: experts ~1.8 GB a layer + embedding/head
    free = shutil.disk_usage(args.dir).free
    if not path.exists() and free < need + (8 << 30):
        print(f"not enough disk in {args.dir}: {free >> 30} GiB free", file=sys.stderr)
        return 1
    why_not = "--no-cgroup given" if args.no_cgroup else memory_cgroup.available()
    try:
        t0 = time.perf_counter()
        if path.exists():
            print(f"{path}: reusing the file a --keep run left")
        else:
            write_model(
                path,
                hp,
                1,
                tokenizer=wiring.tokenizer_records(None),
                name="Flash-shaped SSD-streaming bench",
            )
        print(f"{path}: {path.stat().st_size / 2**30:.2f} GiB, ready in "
              f"{time.perf_counter() - t0:.0f} s")  # fmt: skip
        shape = file_shape(path, hp)
        reserve = int(args.reserve_gb * 2**30)
        print(f"{args.layers} layers x {hp.n_expert} experts: {shape.experts / 2**30:.2f} GiB "
              f"routed experts ({shape.slot / 2**20:.2f} MiB each), "
              f"{shape.resident / 2**30:.2f} GiB resident weights; {args.tokens} tokens "
              f"per window, {args.threads} threads, read-ahead {args.readahead}")  # fmt: skip
        if why_not is None:
            print(f"memory limit per run (cgroup v1): resident + budget + "
                  f"{args.reserve_gb:g} GiB reserve; every run starts with the file "
                  "dropped from the page cache")  # fmt: skip
        else:
            print(f"NO MEMORY LIMIT ({why_not}): mmap runs see all free memory")
        print("\n| run | limit | t/s | hit rate | disk MiB / token | major faults / token "
              "| stall ms / token |\n|---|---:|---:|---:|---:|---:|---:|")  # fmt: skip
        results: list[tuple[int, str, str, dict[str, Any]]] = []
        for pct in budgets:
            slots = max(1, hp.n_layer * hp.n_expert * pct // 100)
            total = shape.resident + slots * shape.slot + reserve
            limit = None if why_not is not None else total
            shown = "none" if limit is None else f"{total / 2**30:.2f} GiB"
            for mode in ("stream", "mmap"):
                name = "stream" if mode == "stream" else "mmap"
                out, note, peak = run_child(args, path, mode, pct, limit, f"{mode}{pct}")
                for window in ("cold", "warm"):
                    w = None if out is None else out[window]
                    print(row(f"{name} {pct}% {window}", shown, w, note, args.tokens),
                          flush=True)  # fmt: skip
                    if w is not None:
                        results.append((pct, mode, window, w))
                if out is not None:
                    st = out["start"]
                    print(f"|   start (open + 4-token prefill): {st['seconds']:.1f} s, "
                          f"{mib(st['disk_bytes'])} MiB read"
                          + ("" if peak is None else f"; cgroup peak {peak / 2**30:.2f} GiB")
                          + " | | | | | | |")  # fmt: skip
        if args.plot:
            plot(results, args.plot, args.tokens)
            print(f"wrote {args.plot}")
    finally:
        if not args.keep:
            path.unlink(missing_ok=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
