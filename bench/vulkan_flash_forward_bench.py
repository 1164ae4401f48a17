"""The whole device-resident forward (`--backend vulkan`) on a Flash-shaped model.

Writes a GGUF of Flash's first --layers layers (bench/flash_gguf.py: real dims, 256
experts of which 6 are used, the q2 mixture of real quant types: Q8_0 attention, shared
expert and head, IQ2_XXS gate/up and Q2_K down experts; Flash's layer kinds: layers 0-1
dense attention, then ratio 4 (compressor + indexer) on even and ratio 128 on odd
layers, the first 3 hash-routed; random weights, each expert tensor 4 random experts
repeated, which a device reads from distinct addresses all the same; a stand-in
tokenizer, since no text is tokenized; the vocabulary, i.e. the embedding and head
rows, cut to --vocab) into a temporary directory, opens it with the vulkan backend (the
device forward: one command buffer per step, docs/vulkan.md#device-forward), and runs
one prefill chunk of --prompt-tokens random tokens, then --decode-tokens greedy steps.

Printed: the device's copy bandwidth (vkCmdCopyBuffer between two device-local buffers
of --copy-mb, host clock around the fence, bytes read + written), prefill and decode
t/s, the weight bytes one decode token reads (every layer's attention, compressor,
indexer, HC and shared-expert tensors, 6 of the 256 routed experts, and the head) and
decode GB/s = those bytes / the step time, as a fraction of the copy bandwidth;
submissions per step and host fallbacks (VulkanForward.last). The file is removed at
the end unless --keep.

On Mesa's lavapipe these are CPU numbers. Run (repository root):
  PYTHONPATH=src:. python bench/vulkan_flash_forward_bench.py [--layers 8]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
from bench.flash_gguf import flash_prefix, stand_in_vocabulary, write_model
from bench.vulkan_matvec_bench import copy_bandwidth

from ds4.adapters.compute.vulkan.runner import VulkanRunner
from ds4.adapters.compute.vulkan.runtime import runtime
from ds4.apps import backends, wiring
from ds4.apps.options import EngineOptions
from ds4.domain.convert.plan import quant_plan
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import tensor_nbytes
from ds4.domain.model.catalog import model_tensors
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.model.presets import FLASH
from ds4.ports.model_file import ModelFile

LAYER_BYTES = 1.96e9  # one Flash layer in the q2 mixture, 256 experts (file size, rounded up)


def layer_kinds(hp: DeepSeekV4HParams) -> str:
    kinds = []
    for il, ratio in enumerate(hp.compress_ratios):
        attn = "dense" if ratio == 0 else f"ratio {ratio}"
        kinds.append(f"{attn}{' hash' if hp.is_hash_layer(il) else ''}")
    return ", ".join(kinds)


def decode_bytes(model: ModelFile, hp: DeepSeekV4HParams) -> int:
    """Weight bytes one decode token reads: every tensor of every layer (the routed
    experts' share: n_expert_used of n_expert) and the head, but not the embedding (one
    row), the hash tables or the compressors' position tables (a row each)."""
    total = 0
    for name, info in model.tensors.items():
        if name == "token_embd.weight" or name.endswith(("tid2eid.weight", "_ape.weight")):
            continue
        share = hp.n_expert_used / hp.n_expert if "_exps." in name else 1.0
        total += int(info.nbytes * share)
    return total


def largest_tensor(hp: DeepSeekV4HParams) -> tuple[str, int]:
    """The model's largest tensor (name, bytes) in the q2 mixture."""
    plan = quant_plan("q2", hp)
    sizes = {s.name: tensor_nbytes(plan.tensor_type(s, hp), int(np.prod(s.dims)))
             for s in model_tensors(hp)}  # fmt: skip
    name = max(sizes, key=lambda n: sizes[n])
    return name, sizes[name]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    ap.add_argument("--layers", type=int, default=1,
                    help=f"Flash's first N layers, about {LAYER_BYTES / 1e9:.2f} GB each "
                         f"(1..{FLASH.n_layer})")  # fmt: skip
    ap.add_argument("--prompt-tokens", type=int, default=32,
                    help="tokens of the prefill chunk (1..4096)")  # fmt: skip
    ap.add_argument("--decode-tokens", type=int, default=8,
                    help="greedy decode steps after the prefill (1..1024)")  # fmt: skip
    ap.add_argument("--vocab", type=int, default=FLASH.n_vocab,
                    help="vocabulary rows of the embedding and head (Flash's; smaller "
                         "cuts the file and the head's bytes)")  # fmt: skip
    ap.add_argument("--experts", type=int, default=FLASH.n_expert,
                    help="routed experts per layer (Flash's; each keeps its dims and a "
                         "token reads 6 of them: fewer only for a device whose storage "
                         "buffer range cannot hold 256 in one buffer, e.g. lavapipe's "
                         "128 MiB: at most 48)")  # fmt: skip
    ap.add_argument("--numerics", choices=["ds4", "fp32"], default="ds4",
                    help="numerics of the forward")  # fmt: skip
    ap.add_argument("--copy-mb", type=int, default=1024,
                    help="MiB of each buffer of the device copy bandwidth probe "
                         "(1..16384)")  # fmt: skip
    ap.add_argument("--out", default=tempfile.gettempdir(),
                    help="directory for the temporary model file")  # fmt: skip
    ap.add_argument("--keep", action="store_true",
                    help="keep the model file (its path is printed)")  # fmt: skip
    args = ap.parse_args(argv)
    least = len(stand_in_vocabulary().tokens)
    if not 1 <= args.layers <= FLASH.n_layer:
        ap.error(f"--layers must be in 1..{FLASH.n_layer}")
    if not 1 <= args.prompt_tokens <= 4096:
        ap.error("--prompt-tokens must be in 1..4096")
    if not 1 <= args.decode_tokens <= 1024:
        ap.error("--decode-tokens must be in 1..1024")
    if not least <= args.vocab <= FLASH.n_vocab:
        ap.error(f"--vocab must be in {least}..{FLASH.n_vocab} (the stand-in tokenizer has "
                 f"{least} tokens)")  # fmt: skip
    if not FLASH.n_expert_used <= args.experts <= FLASH.n_expert:
        ap.error(f"--experts must be in {FLASH.n_expert_used}..{FLASH.n_expert}")
    if not 1 <= args.copy_mb <= 16384:
        ap.error("--copy-mb must be in 1..16384")
    if not Path(args.out).is_dir() or not os.access(args.out, os.W_OK):
        ap.error(f"--out {args.out}: not a writable directory")
    layer = LAYER_BYTES * args.experts / FLASH.n_expert
    need = int(layer * args.layers + 3 * args.vocab * FLASH.n_embd) + (1 << 30)
    free = shutil.disk_usage(args.out).free
    if free < need:
        ap.error(f"--out {args.out}: {free / 1e9:.1f} GB free, the model needs about "
                 f"{need / 1e9:.1f} GB")  # fmt: skip
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # a timeout's SIGTERM unwinds like an error, so the (large) model file is removed
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    try:
        rt = runtime()
    except Ds4Error as exc:
        print(f"vulkan_flash_forward_bench: {exc}", file=sys.stderr)
        return 1
    print(f"device: {rt.dev.describe()}")
    if rt.dev.kind == "CPU":
        print("NOTE: a CPU Vulkan implementation (lavapipe): these are CPU numbers.")
    copy = copy_bandwidth(rt, args.copy_mb << 20, 8)
    print(f"device copy bandwidth: {copy:.2f} GB/s (vkCmdCopyBuffer, {args.copy_mb} MiB "
          "device-local buffers, read + write)", flush=True)  # fmt: skip
    hp = flash_prefix(args.layers, args.vocab, args.experts)
    name, largest = largest_tensor(hp)
    if largest > rt.dev.max_storage_range:
        print(f"vulkan_flash_forward_bench: {name} ({largest} bytes) exceeds this device's "
              f"storage buffer range ({rt.dev.max_storage_range} bytes); the vulkan backend "
              "holds a tensor in one buffer: give fewer --experts or a smaller --vocab",
              file=sys.stderr)  # fmt: skip
        return 1
    tmp = Path(tempfile.mkdtemp(prefix="ds4-flash-forward-", dir=args.out))
    path = tmp / f"flash_{args.layers}l.gguf"
    try:
        t0 = time.perf_counter()
        write_model(path, hp, 1, distinct_experts=4)
        print(f"model: {path} ({path.stat().st_size / 1e9:.2f} GB, written in "
              f"{time.perf_counter() - t0:.1f} s): {args.layers} layer(s) ({layer_kinds(hp)}), "
              f"vocabulary {args.vocab}, {args.experts} routed experts per layer (Flash: "
              f"{FLASH.n_vocab}, {FLASH.n_expert})", flush=True)  # fmt: skip
        run(args, path, copy)
    except Ds4Error as exc:
        print(f"vulkan_flash_forward_bench: {exc}", file=sys.stderr)
        return 1
    finally:
        if args.keep:
            print(f"kept {path}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


def run(args: argparse.Namespace, path: Path, copy: float) -> None:
    opened = wiring.open_model(str(path))
    try:
        runner = backends.model_runner(
            opened, EngineOptions(str(path), backend="vulkan", numerics=args.numerics)
        )
        assert isinstance(runner, VulkanRunner)
        fwd = runner.device_forward
        hp = opened.hparams
        rng = np.random.default_rng(5)
        prompt = [int(t) for t in rng.integers(0, hp.n_vocab, args.prompt_tokens)]
        print("uploading the weights and building pipelines (a 2-token prefill and one "
              "decode step, not timed) ...", flush=True)  # fmt: skip
        t0 = time.perf_counter()
        warm = runner.new_session(4)
        warm.eval(int(np.argmax(warm.prefill(prompt[:1] * 2))))
        print(f"warm-up: {time.perf_counter() - t0:.1f} s, "
              f"{fwd.store.resident_bytes / 1e9:.2f} GB of weights resident")  # fmt: skip
        session = runner.new_session(args.prompt_tokens + args.decode_tokens + 1)
        t0 = time.perf_counter()
        logits = session.prefill(prompt)
        prefill_s = time.perf_counter() - t0
        pre = fwd.last
        fallbacks: Counter[str] = Counter(pre.fallbacks)
        print(f"prefill: {args.prompt_tokens} tokens in {prefill_s:.3f} s = "
              f"{args.prompt_tokens / prefill_s:.2f} t/s; submissions: {pre.submissions}; "
              f"host fallbacks: {fmt(pre.fallbacks)}", flush=True)  # fmt: skip
        subs, times = [], []
        for _ in range(args.decode_tokens):
            t0 = time.perf_counter()
            logits = session.eval(int(np.argmax(logits)))
            times.append(time.perf_counter() - t0)
            subs.append(fwd.last.submissions)
            fallbacks += fwd.last.fallbacks
        per_step = sum(times) / len(times)
        nbytes = decode_bytes(opened.file, hp)
        gbs = nbytes / per_step / 1e9
        print(f"decode: {args.decode_tokens} tokens, {per_step * 1e3:.1f} ms/token = "
              f"{1 / per_step:.2f} t/s (best step {min(times) * 1e3:.1f} ms); "
              f"submissions per step: {max(subs)}; host fallbacks: {fmt(fallbacks)}")  # fmt: skip
        print(f"decode weight bytes per token: {nbytes / 1e9:.3f} GB (attention, compressors, "
              f"indexer, HC, shared expert, {hp.n_expert_used} of {hp.n_expert} routed experts "
              "per layer; head)")  # fmt: skip
        print(f"decode bandwidth: {gbs:.3f} GB/s = {100 * gbs / copy:.1f}% of the copy "
              f"bandwidth ({copy:.2f} GB/s)")  # fmt: skip
        if not np.all(np.isfinite(logits)):
            print("note: the last logits are not all finite (random weights)")
    finally:
        opened.file.close()


def fmt(fallbacks: Counter[str]) -> str:
    return ", ".join(f"{k} x{v}" for k, v in fallbacks.items()) or "none"


if __name__ == "__main__":
    sys.exit(main())
