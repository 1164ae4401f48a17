"""ds4 against llama.cpp on the same Flash-prefix GGUF: prefill and decode, side by side.

    .venv/bin/python -m bench.peer_llamacpp [--cache DIR] [--layers 6] [--model FILE]
        [--experts 256] [--threads 1,2] [--contexts 128,2048] [--rounds 3] [--gen 16]

The peer is the llama.cpp vendored in the llama-cpp-python 0.3.36 sdist (commit
0c1e570, docs/llamacpp.md), built once into --cache by tools/peer/build_llamacpp.sh
(reused when there). The model is Flash's first --layers layers with their real kinds,
dims and q2 mixture and the real 129280-token vocabulary (bench/flash_gguf.py, our
writer, with the metadata llama.cpp reads), written once into --cache (about 2.3 GB a
layer). For each round, thread count and context C both engines run one after the
other, the first engine alternating by round:

- prefill: C tokens into an empty context (`ds4 bench --ctx-start C --ctx-max C`,
  `llama-bench -p C -n 0`), tokens/s;
- decode: --gen tokens at context C (`ds4 bench`'s generation at frontier C,
  `llama-bench -p 0 -n GEN -d C`), tokens/s.

It prints every round's figures and, per row, the median and range of the per-round
ratios ds4/llama.cpp. Nothing here is a test; the machine should be quiet (the load
average at the start and the end is printed next to the results).
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.flash_gguf import flash_prefix, write_model

from ds4.apps import wiring

ROOT = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = ROOT / "tools" / "peer" / "build_llamacpp.sh"
PROMPT = ROOT / "data" / "promessi_sposi.txt"
BYTES_PER_LAYER = int(2.4e9)  # Flash q2 layer with 256 distinct experts, rounded up


@dataclass(frozen=True)
class Measure:
    """One engine's figures for one (threads, context) point of one round."""

    prefill_tps: float
    decode_tps: float


def default_cache() -> Path:
    env = os.environ.get("DS4_PEER_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ds4" / "peer"


def llama_bench(cache: Path) -> Path:
    """The peer's llama-bench, built into cache first when it is not there."""
    binary = cache / "llama.cpp-build" / "bin" / "llama-bench"
    if not binary.exists():
        print(f"building the peer llama.cpp into {cache} (once)", file=sys.stderr)
        subprocess.run(["bash", str(BUILD_SCRIPT), str(cache)], check=True)
    return binary


def bench_model(cache: Path, layers: int, experts: int) -> Path:
    """The Flash-prefix file, written once (real vocabulary, llama.cpp's keys)."""
    path = cache / f"flash-prefix-{layers}l-{experts}e.gguf"
    if path.exists():
        return path
    need = BYTES_PER_LAYER * layers * experts // 256 + (2 << 30)
    free = shutil.disk_usage(cache).free
    if free < need:
        raise SystemExit(f"peer_llamacpp: {free >> 30} GiB free in {cache}, {need >> 30} needed")
    part = path.with_suffix(".gguf.part")
    hp = flash_prefix(layers, n_expert=experts)
    name = f"Flash prefix, {layers} layers, {experts} experts (peer bench)"
    write_model(part, hp, 1, tokenizer=wiring.tokenizer_records(None), name=name)
    part.replace(path)
    return path


def run_ds4(model: Path, threads: int, ctx: int, gen: int) -> Measure:
    command = [
        sys.executable, "-m", "ds4", "bench", "-m", str(model), "-t", str(threads),
        "--prompt-file", str(PROMPT), "--ctx-start", str(ctx), "--ctx-max", str(ctx),
        "--gen-tokens", str(gen),
    ]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"ds4 bench failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    rows = list(csv.DictReader(io.StringIO(done.stdout)))
    if len(rows) != 1:
        raise SystemExit(f"ds4 bench: expected one CSV row, got {len(rows)}")
    return Measure(float(rows[0]["prefill_tps"]), float(rows[0]["gen_tps"]))


def _llama_tps(binary: Path, model: Path, threads: int, extra: list[str]) -> float:
    # --repack 0: with CPU weight repacking this llama.cpp aborts at context creation on
    # DeepSeek V4 files (GGML_ASSERT(*cur_backend_id != -1) in the scheduler, even with
    # every tensor overridden to the plain CPU buffer; docs/llamacpp.md).
    command = [str(binary), "-m", str(model), "-t", str(threads), "-r", "1", "-o", "json",
               "--repack", "0", *extra]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"llama-bench failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    results = json.loads(done.stdout)
    if len(results) != 1:
        raise SystemExit(f"llama-bench: expected one result, got {len(results)}")
    return float(results[0]["avg_ts"])


def run_llama(binary: Path, model: Path, threads: int, ctx: int, gen: int) -> Measure:
    prefill = _llama_tps(binary, model, threads, ["-p", str(ctx), "-n", "0"])
    decode = _llama_tps(binary, model, threads, ["-p", "0", "-n", str(gen), "-d", str(ctx)])
    return Measure(prefill, decode)


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "unknown"


def _int_list(text: str, flag: str, low: int, high: int) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v]
    except ValueError:
        raise SystemExit(f"{flag} {text!r}: comma-separated integers") from None
    if not values or any(not low <= v <= high for v in values):
        raise SystemExit(f"{flag} {text!r}: each value must be in {low}..{high}")
    return values


def _ratio_line(label: str, ratios: list[float]) -> str:
    median = statistics.median(ratios)
    return f"{label:<28} median {median:5.2f}x  range {min(ratios):.2f}-{max(ratios):.2f}x"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", type=Path, default=None,
                    help="peer build and bench file directory (default: $DS4_PEER_CACHE, "
                         "else ~/.cache/ds4/peer)")  # fmt: skip
    ap.add_argument("--layers", type=int, default=6, help="Flash layers, 1..43 (default: 6)")
    ap.add_argument("--experts", type=int, default=256,
                    help="routed experts per layer, 8..256 (default: 256, as Flash; fewer "
                         "for a quick check of the script)")  # fmt: skip
    ap.add_argument("--model", type=Path, default=None,
                    help="use this GGUF instead of writing the Flash prefix")  # fmt: skip
    ap.add_argument("--threads", default="1,2", help="thread counts (default: 1,2)")
    ap.add_argument(
        "--contexts", default="128,2048", help="prefill C tokens, decode at C (default: 128,2048)"
    )
    ap.add_argument("--rounds", type=int, default=3, help="rounds, 1..50 (default: 3)")
    ap.add_argument("--gen", type=int, default=16, help="decode tokens, 1..4096 (default: 16)")
    args = ap.parse_args(argv)
    if not 8 <= args.experts <= 256:
        ap.error("--experts must be in 8..256")
    if not 1 <= args.layers <= 43 or not 1 <= args.rounds <= 50 or not 1 <= args.gen <= 4096:
        ap.error("--layers 1..43, --rounds 1..50, --gen 1..4096")
    threads = _int_list(args.threads, "--threads", 1, 1024)
    contexts = _int_list(args.contexts, "--contexts", 1, 65536)
    cache: Path = args.cache or default_cache()
    cache.mkdir(parents=True, exist_ok=True)
    binary = llama_bench(cache)
    model = args.model or bench_model(cache, args.layers, args.experts)
    print(f"model {model} ({model.stat().st_size / 2**30:.2f} GiB); load {load_average()}")
    ratios: dict[tuple[str, int, int], list[float]] = {}
    for r in range(args.rounds):
        for t in threads:
            for c in contexts:
                order = ("ds4", "llama") if r % 2 == 0 else ("llama", "ds4")
                got: dict[str, Measure] = {}
                for engine in order:
                    t0 = time.perf_counter()
                    got[engine] = (run_ds4(model, t, c, args.gen) if engine == "ds4"
                                   else run_llama(binary, model, t, c, args.gen))  # fmt: skip
                    took = time.perf_counter() - t0
                    m = got[engine]
                    print(
                        f"round {r + 1} t={t} ctx={c} {engine:<5}: prefill "
                        f"{m.prefill_tps:8.2f} t/s, decode {m.decode_tps:7.2f} t/s ({took:.0f} s)",
                        flush=True,
                    )
                ours, peer = got["ds4"], got["llama"]
                ratios.setdefault(("prefill", t, c), []).append(ours.prefill_tps / peer.prefill_tps)
                ratios.setdefault(("decode", t, c), []).append(ours.decode_tps / peer.decode_tps)
    print(f"\nds4 / llama.cpp over {args.rounds} rounds (load at the end {load_average()}):")
    for (what, t, c), values in sorted(ratios.items()):
        print(_ratio_line(f"{what} t={t} ctx={c}", values))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
