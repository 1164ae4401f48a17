"""One Flash-shaped layer through the native forward (random weights, real dims and types).

The layer is Flash's common kind (ratio-4 compressor + indexer, biased top-k routing,
256 experts, q2 mixture: Q8_0 projections, F16 HC/router/compressor/indexer, IQ2_XXS
gate/up and Q2_K down experts), held in memory (no GGUF file) and evaluated by the same
ds4_fw_seq_forward the cpu backend runs: HC, attention with sinks and window,
compressor emissions, indexer, routed + shared experts.

- prefill: a chunk of --prefill tokens, tokens/s;
- decode: --decode more tokens one at a time; weight bytes the step reads / time, as a
  fraction of this machine's copy bandwidth measured in the same run.

Run (from the repository root): .venv/bin/python -m bench.flash_layer_bench [--prefill 512]
[--decode 16] [--numerics ds4|exact] [--preset flash|pro] [--compare avx2 | --rev main]
[--rounds N]
About 3 GB of RAM for Flash's layer, about 10 GB for PRO's (`--preset pro`: the shape of
DeepSeek V4 PRO's release config.json shipped with ds4, docs/model-presets.md).

--rev compares against a previous revision's native code in the same process: its
native/ tree is compiled into a second cffi module (bench.kernel_vs_previous_bench's
build_old) and a second copy of the forward's Python wrapper is bound to it, over the
same weights and tokens; the rounds alternate which side goes first and print the
median [quartiles] of the per-round ratios next to the best rounds.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

import numpy as np
import numpy.typing as npt
from bench.cpu_kernels_bench import copy_bandwidth, expert_tensor, random_blocks, simd_peaks

from ds4.adapters.compute import cpu_kernels
from ds4.adapters.compute.cpu.expert_repack import repack_down_experts
from ds4.adapters.compute.cpu.native_forward import NativeForward
from ds4.adapters.gguf.model_files import TensorValues
from ds4.adapters.quant.native_codec import NativeDequantizer
from ds4.apps.gguf_command import PRESET_NAMES, preset_shape
from ds4.domain.convert.hf_config import hparams_from_config
from ds4.domain.convert.plan import quant_plan
from ds4.domain.engine_math.lowprec import numerics_named
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType
from ds4.domain.gguf.records import MetaValue, TensorInfo
from ds4.domain.model.catalog import TensorSpec, model_tensors
from ds4.domain.model.hparams import DeepSeekV4HParams

U8 = npt.NDArray[np.uint8]


class MemoryModel:
    """The ModelFile port over in-memory tensors: random layer weights, lazily zeroed
    top-level tables (only the embedding rows of the tokens used are filled)."""

    def __init__(self, hp: DeepSeekV4HParams, tokens: list[int], seed: int) -> None:
        rng = np.random.default_rng(seed)
        plan = quant_plan("q2", hp)
        self._raw: dict[str, U8] = {}
        self._tensors: dict[str, TensorInfo] = {}
        for spec in model_tensors(hp):
            kind = plan.tensor_type(spec, hp)
            raw = self._make(spec, kind, rng, tokens)
            self._raw[spec.name] = raw
            self._tensors[spec.name] = TensorInfo(spec.name, spec.dims, kind, 0, raw.nbytes)

    @staticmethod
    def _make(spec: TensorSpec, kind: GGMLType, rng: np.random.Generator, tokens: list[int]) -> U8:
        shape = tuple(reversed(spec.dims))
        geo = BLOCK_GEOMETRY[kind]
        row_bytes = shape[-1] // geo.elements * geo.nbytes
        if spec.layer is None:  # embedding / head: zero pages until touched
            raw = np.zeros((*shape[:-1], row_bytes), dtype=np.uint8)
            if spec.name == "token_embd.weight":
                rows = rng.standard_normal((len(tokens), shape[-1])) * 0.5
                raw[tokens] = rows.astype(np.float16).view(np.uint8)
            return raw
        if kind in (GGMLType.F32, GGMLType.F16):
            base = 1.0 if spec.name.endswith("norm.weight") else 0.0
            vals = base + rng.standard_normal(shape) * (0.05 if kind is GGMLType.F32 else 0.02)
            dtype = np.float32 if kind is GGMLType.F32 else np.float16
            out: U8 = vals.astype(dtype).view(np.uint8).reshape(*shape[:-1], row_bytes)
            return out
        if len(shape) == 3:
            return expert_tensor(kind, shape[0], shape[1], shape[2], rng)
        return random_blocks(kind, shape[0], shape[1], rng)

    @property
    def path(self) -> str:
        return "<memory>"

    @property
    def version(self) -> int:
        return 3

    @property
    def alignment(self) -> int:
        return 32

    @property
    def file_size(self) -> int:
        return sum(r.nbytes for r in self._raw.values())

    @property
    def metadata(self) -> dict[str, MetaValue]:
        return {}

    @property
    def tensors(self) -> dict[str, TensorInfo]:
        return self._tensors

    def raw(self, name: str) -> U8:
        return self._raw[name]

    def close(self) -> None:
        self._raw.clear()


def decode_bytes(model: MemoryModel, hp: DeepSeekV4HParams, indexer_active: bool) -> int:
    """Weight bytes one decode step of layer 0 reads (head and embedding excluded)."""
    total = 0
    for name, info in model.tensors.items():
        if not name.startswith("blk.0.") or len(info.numpy_shape) < 2:
            continue
        if name.endswith(("tid2eid.weight", "_ape.weight")):
            continue
        if ".indexer." in name and not indexer_active:
            continue
        raw = model.raw(name)
        total += raw[0].nbytes * hp.n_expert_used if raw.ndim == 3 else raw.nbytes
    return total


def token_macs(model: MemoryModel, hp: DeepSeekV4HParams, indexer_active: bool) -> int:
    """Multiply-adds of weight products per token in layer 0 (routed: the used experts)."""
    total = 0
    for name, info in model.tensors.items():
        shape = info.numpy_shape
        if not name.startswith("blk.0.") or len(shape) < 2 or name.endswith("tid2eid.weight"):
            continue
        if name.endswith("_ape.weight") or (".indexer." in name and not indexer_active):
            continue
        macs = shape[-1] * shape[-2]
        total += macs * hp.n_expert_used if len(shape) == 3 else macs
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prefill", type=int, default=512, help="tokens in the prefill chunk")
    ap.add_argument("--decode", type=int, default=16, help="decode steps after the prefill")
    ap.add_argument("--numerics", choices=["ds4", "exact"], default="ds4")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--compare", choices=sorted(cpu_kernels.IMPLS), default=None,
                    help="also run the layer on this kernel set over the same weights, "
                         "alternating with the chosen set (--rounds times), and print the "
                         "ratios (default: no comparison)")  # fmt: skip
    ap.add_argument("--rev", default=None,
                    help="also run the layer with this git revision's native code (compiled "
                         "into a second module, same weights, same kernel set name), "
                         "alternating --rounds times (default: no comparison)")  # fmt: skip
    ap.add_argument("--repack", action="store_true",
                    help="also build a forward with the routed Q2_K down projections "
                         "repacked (docs/adr/0067-q2k-row-interleaved-repack.md) and "
                         "alternate it with the GGUF layout --rounds times")  # fmt: skip
    ap.add_argument("--rounds", type=int, default=2,
                    help="alternations for --compare / --rev (default: 2)")  # fmt: skip
    ap.add_argument(
        "--preset",
        choices=PRESET_NAMES,
        default="flash",
        help="the layer's shape: flash, or pro (DeepSeek V4 PRO from its shipped config.json, "
        "read by the converter's reader; one layer of it: check the RAM)",
    )
    ap.add_argument(
        "--preset-config",
        metavar="CONFIG_JSON",
        help="take the layer's shape from a release's config.json (converter's reader), "
        "e.g. DeepSeek V4 PRO's, instead of Flash's (one layer of it: check the RAM)",
    )
    args = ap.parse_args()
    if args.compare and args.rev:
        ap.error("--compare and --rev: choose one")
    if args.rev and not revision_exists(args.rev):
        ap.error(f"--rev {args.rev}: not a git revision of this repository")
    if args.compare and args.compare not in cpu_kernels.available_impls():
        ap.error(f"--compare {args.compare}: not available (have {cpu_kernels.available_impls()})")
    if not 1 <= args.rounds <= 100:
        ap.error("--rounds must be 1..100")
    if args.threads:
        cpu_kernels.set_threads(args.threads)
    base = preset_shape(args.preset)
    if args.preset_config:
        with open(args.preset_config, encoding="utf-8") as f:  # noqa: PTH123 (bench script)
            base = hparams_from_config(json.load(f))
    hp = dataclasses.replace(
        base, n_layer=1, compress_ratios=(4,), n_hash_layer=0,
        swiglu_clamp=(base.swiglu_clamp[0],),
    )  # fmt: skip
    n_total = args.prefill + args.decode
    rng = np.random.default_rng(1)
    tokens = [int(t) for t in rng.choice(hp.n_vocab, n_total, replace=False)]
    t0 = time.perf_counter()
    model = MemoryModel(hp, tokens, seed=2)
    numerics = numerics_named(args.numerics)
    impl = "scalar" if args.numerics == "exact" else "auto"
    weights = TensorValues(model, NativeDequantizer())
    fwd = NativeForward(hp, model, weights, numerics, cpu_kernels.IMPLS[impl])
    kind = "config-shaped" if args.preset_config else f"{args.preset}-shaped"
    print(f"built one {kind} layer in memory ({model.file_size / 2**30:.1f} GiB incl. lazy "
          f"tables) in {time.perf_counter() - t0:.0f} s; {cpu_kernels.threads()} threads, "
          f"{cpu_kernels.best_impl() if impl == 'auto' else 'scalar'} kernels, "
          f"{args.numerics} numerics")  # fmt: skip
    bandwidth = copy_bandwidth()
    int8_peak, f32_peak = simd_peaks()
    print(f"memory bandwidth (numpy copy, read+write): {bandwidth / 1e9:.1f} GB/s; SIMD peak "
          f"probes: int8 {int8_peak / 1e9:.1f}, f32 {f32_peak / 1e9:.1f} GMAC/s")  # fmt: skip

    seq = fwd.new_seq()
    ids = np.array(tokens, dtype=np.int64)
    t0 = time.perf_counter()
    fwd.run(seq, ids[: args.prefill])
    t_pre = time.perf_counter() - t0
    rate = token_macs(model, hp, args.prefill // 4 > hp.indexer_top_k) * args.prefill / t_pre
    print(f"prefill {args.prefill} tokens: {t_pre:.2f} s = {args.prefill / t_pre:.1f} tok/s, "
          f"{rate / 1e9:.1f} GMAC/s = {rate / int8_peak:.1%} of int8 peak, "
          f"{rate / f32_peak:.1%} of f32 peak")  # fmt: skip

    times: list[float] = []
    for i in range(args.prefill, n_total):
        before = fwd.native_seconds
        fwd.run(seq, ids[i : i + 1])
        times.append(fwd.native_seconds - before)
    indexer_active = n_total // 4 > hp.indexer_top_k
    nbytes = decode_bytes(model, hp, indexer_active)
    best, median = min(times), float(np.median(times))
    for label, t in (("best", best), ("median", median)):
        rate = nbytes / t
        print(f"decode ({label} of {len(times)}): {t * 1e3:.2f} ms/token, "
              f"{nbytes / 1e6:.1f} MB of weights -> {rate / 1e9:.1f} GB/s = "
              f"{rate / bandwidth:.1%} of bandwidth")  # fmt: skip
    print(f"indexer projections read per step: {indexer_active}")
    if args.compare:
        other = NativeForward(hp, model, weights, numerics, cpu_kernels.IMPLS[args.compare])
        compare(fwd, other, ids, args.prefill, args.rounds, f"{impl}/{args.compare}")
    if args.repack:
        packed = NativeForward(hp, model, weights, numerics, cpu_kernels.IMPLS[impl])
        summary = repack_down_experts(
            packed.layout.layers, ["blk.0.ffn_down_exps.weight"], model, packed.layout.keep,
            print, drop_mapped=False,
        )  # fmt: skip
        print(summary.line())
        compare(packed, fwd, ids, args.prefill, args.rounds, "repacked/gguf")
    if args.rev:
        from bench.kernel_vs_previous_bench import build_old

        with tempfile.TemporaryDirectory() as tmp:
            print(f"compiling {args.rev}:native/ ...", flush=True)
            old_cls = forward_class_over(build_old(args.rev, Path(tmp)))
            other = old_cls(hp, model, weights, numerics, cpu_kernels.IMPLS[impl])
            compare(fwd, other, ids, args.prefill, args.rounds, f"tree/{args.rev}")


def revision_exists(rev: str) -> bool:
    root = Path(__file__).resolve().parent.parent
    found = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
        capture_output=True, check=False,
    )  # fmt: skip
    return found.returncode == 0


_FORWARD_MODULES = (
    "ds4.adapters.compute.cpu_kernels",
    "ds4.adapters.compute.cpu.native_layout",
    "ds4.adapters.compute.cpu.native_forward",
)


def forward_class_over(native: ModuleType) -> type[NativeForward]:
    """A second NativeForward class whose wrapper modules are bound to `native` (another
    build of ds4._native_cpu); the working tree's modules are put back afterwards."""
    import ds4

    saved = {name: sys.modules.pop(name) for name in _FORWARD_MODULES}
    saved_native = sys.modules["ds4._native_cpu"]
    sys.modules["ds4._native_cpu"] = native
    ds4._native_cpu = native  # type: ignore[attr-defined]  # what `from ds4 import` reads
    try:
        kernels = importlib.import_module(_FORWARD_MODULES[0])
        cls: type[NativeForward] = importlib.import_module(_FORWARD_MODULES[2]).NativeForward
    finally:
        for name in _FORWARD_MODULES:
            sys.modules.pop(name, None)
        sys.modules.update(saved)
        sys.modules["ds4._native_cpu"] = saved_native
        ds4._native_cpu = saved_native  # type: ignore[attr-defined]
    kernels.set_threads(cpu_kernels.threads())  # the second module has its own pool
    return cls


def compare(
    a: NativeForward,
    b: NativeForward,
    ids: npt.NDArray[np.int64],
    n_pre: int,
    rounds: int,
    label: str,
) -> None:
    """Prefill and decode of two forwards over the same weights, alternating which goes
    first; best times, a/b speed ratios (>1: a is faster) of the best rounds, and the
    median [quartiles] of the per-round ratios (decode: of each round's median step)."""
    best_pre = [float("inf")] * 2
    best_dec = [float("inf")] * 2
    pre_ratio: list[float] = []
    dec_ratio: list[float] = []
    for r in range(rounds):
        pre, dec = [0.0, 0.0], [0.0, 0.0]
        for k in (0, 1) if r % 2 == 0 else (1, 0):
            fwd = (a, b)[k]
            seq = fwd.new_seq()
            t0 = time.perf_counter()
            fwd.run(seq, ids[:n_pre])
            pre[k] = time.perf_counter() - t0
            best_pre[k] = min(best_pre[k], pre[k])
            steps = []
            for i in range(n_pre, ids.shape[0]):
                before = fwd.native_seconds
                fwd.run(seq, ids[i : i + 1])
                steps.append(fwd.native_seconds - before)
            best_dec[k] = min(best_dec[k], *steps) if steps else 0.0
            dec[k] = float(np.median(steps)) if steps else 0.0
        pre_ratio.append(pre[1] / pre[0])
        if dec[0] > 0:
            dec_ratio.append(dec[1] / dec[0])
        print(f"  round {r + 1}: prefill {n_pre / pre[0]:.1f} / {n_pre / pre[1]:.1f} tok/s, "
              f"decode median {dec[0] * 1e3:.2f} / {dec[1] * 1e3:.2f} ms", flush=True)  # fmt: skip
    print(f"{label} side by side, best of {rounds} rounds: prefill "
          f"{n_pre / best_pre[0]:.1f} / {n_pre / best_pre[1]:.1f} tok/s = "
          f"{best_pre[1] / best_pre[0]:.2f}x; decode {best_dec[0] * 1e3:.2f} / "
          f"{best_dec[1] * 1e3:.2f} ms/token = {best_dec[1] / best_dec[0]:.2f}x")  # fmt: skip
    print(
        f"per-round ratios, median [quartiles]: prefill {spread(pre_ratio)}"
        + (f", decode {spread(dec_ratio)}" if dec_ratio else "")
    )


def spread(ratios: list[float]) -> str:
    q1, med, q3 = np.percentile(ratios, [25, 50, 75])
    return f"{med:.2f}x [{q1:.2f}..{q3:.2f}]"


if __name__ == "__main__":
    main()
