"""Flash-shaped GGUF files with random weights in the real quant types, for benches.

Flash's dims (n_embd 4096, 256 experts, 6 used) and the q2 mixture: Q8_0 attention,
shared expert and head, IQ2_XXS gate/up and Q2_K down experts, F16 embedding and
small tables, F32 vectors. Used by bench/ssd_streaming_bench.py (uniform ratio-4
layers, every expert distinct) and bench/vulkan_flash_forward_bench.py (Flash's first
n layers as Flash has them: dense, hash-routed, ratio 4 / 128; experts tiled).
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path

import numpy as np
from bench.random_blocks import random_blocks

from ds4.adapters.gguf.writer import GGUFWriter
from ds4.adapters.tokenizer.bpe import SPECIAL_STRINGS
from ds4.adapters.tokenizer.vocabulary import AddedToken, Vocabulary, tokenizer_metadata
from ds4.domain.convert.plan import quant_plan
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.records import MetaValue, meta_str
from ds4.domain.model.catalog import TensorSpec, model_tensors
from ds4.domain.model.hparams import DeepSeekV4HParams, hparams_metadata
from ds4.domain.model.presets import FLASH, flash_compress_ratios
from ds4.domain.tokenizer import BYTE_TO_CHAR


def flash_layers(n: int) -> DeepSeekV4HParams:
    """n layers of Flash's common kind (ratio-4 compressor + indexer, biased top-k)."""
    return dataclasses.replace(
        FLASH, n_layer=n, compress_ratios=(4,) * n, n_hash_layer=0, swiglu_clamp=(10.0,) * n
    )


def flash_prefix(
    n: int, n_vocab: int = FLASH.n_vocab, n_expert: int = FLASH.n_expert
) -> DeepSeekV4HParams:
    """Flash's first n layers with their real kinds (layers 0-1 dense, then ratio 4 on
    even and 128 on odd layers; the first 3 hash-routed), vocabulary cut to n_vocab and
    routed experts to n_expert (Flash: 256; each expert keeps its dims)."""
    return dataclasses.replace(
        FLASH, n_layer=n, n_vocab=n_vocab, n_expert=n_expert,
        compress_ratios=flash_compress_ratios(n),
        n_hash_layer=min(n, FLASH.n_hash_layer), swiglu_clamp=FLASH.swiglu_clamp[:n],
    )  # fmt: skip


def stand_in_vocabulary() -> Vocabulary:
    """The 256 byte symbols and the special tokens, no merges: what the GGUF checks ask
    of a tokenizer, for a bench that never tokenizes text (any n_vocab >= its size)."""
    tokens = list(BYTE_TO_CHAR)
    added = []
    for text in SPECIAL_STRINGS.values():
        added.append(AddedToken(id=len(tokens), content=text, early=True))
        tokens.append(text)
    return Vocabulary(tokens=tuple(tokens), merges=(), added=tuple(added))


def tensor_parts(
    spec: TensorSpec, kind: GGMLType, rng: np.random.Generator, distinct_experts: int | None,
    n_expert: int = FLASH.n_expert,
) -> list[bytes]:  # fmt: skip
    """The tensor's random bytes in pieces; a 3-D expert tensor one expert a piece, each
    its own random bytes, or (distinct_experts=k) k random experts repeated."""
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
        return [rng.integers(0, n_expert, shape, dtype=np.int32).tobytes()]
    if len(shape) == 3:
        if distinct_experts is None:
            return [random_blocks(kind, shape[1], shape[2], rng).tobytes() for _ in range(shape[0])]
        pool = [random_blocks(kind, shape[1], shape[2], rng).tobytes()
                for _ in range(min(distinct_experts, shape[0]))]  # fmt: skip
        return [pool[e % len(pool)] for e in range(shape[0])]
    step = 8192
    return [
        random_blocks(kind, min(step, shape[0] - r), shape[1], rng).tobytes()
        for r in range(0, shape[0], step)
    ]


def write_model(
    path: Path,
    hp: DeepSeekV4HParams,
    seed: int,
    *,
    tokenizer: dict[str, MetaValue] | None = None,
    distinct_experts: int | None = None,
    name: str = "Flash-shaped bench model",
) -> None:
    """The catalog's tensors for hp (q2 mixture), random data, every byte written.
    tokenizer: the tokenizer.* records (default: the stand-in vocabulary). Progress on
    stderr."""
    rng = np.random.default_rng(seed)
    plan = quant_plan("q2", hp)
    specs = [s for s in model_tensors(hp) if not (s.optional and s.layer is not None
                                                   and hp.is_hash_layer(s.layer))]  # fmt: skip
    records = tokenizer if tokenizer is not None else tokenizer_metadata(stand_in_vocabulary())
    with GGUFWriter(path) as w:
        w.add_metadata("general.name", meta_str(name))
        for key, value in {**hparams_metadata(hp), **records}.items():
            w.add_metadata(key, value)
        kinds = {s.name: plan.tensor_type(s, hp) for s in specs}
        for s in specs:
            w.add_tensor(s.name, s.dims, kinds[s.name])
        w.begin_data()
        t0 = time.perf_counter()
        for i, s in enumerate(specs):
            w.write_tensor_parts(
                s.name, tensor_parts(s, kinds[s.name], rng, distinct_experts, hp.n_expert)
            )
            took = time.perf_counter() - t0
            print(f"\rwriting {path.name}: tensor {i + 1}/{len(specs)}, {took:.0f} s",
                  end="", file=sys.stderr, flush=True)  # fmt: skip
        print(file=sys.stderr)
        w.finish()
