"""Named model shapes: Flash's published values (docs/reference/model.md §1.1–1.2), the
tiny shapes tests and demos run with (and their random weights), and whether an MTP
GGUF's shape fits a main model's (docs/mtp.md).

PRO is not written here: `--preset pro` reads its release's config.json, shipped as package
data, through the converter's reader (apps/gguf_command.py, docs/model-presets.md).
"""

from __future__ import annotations

import dataclasses
import math
import zlib
from dataclasses import fields

import numpy as np
import numpy.typing as npt

from ds4.domain.gguf.quant_formats import Role
from ds4.domain.model.catalog import TensorSpec
from ds4.domain.model.hparams import FIELD_TO_KEY, DeepSeekV4HParams


def flash_compress_ratios(n_layer: int = 43) -> tuple[int, ...]:
    """Layers 0-1 dense, then even layers ratio 4 and odd layers ratio 128."""
    return tuple(0 if il < 2 else (4 if il % 2 == 0 else 128) for il in range(n_layer))


FLASH = DeepSeekV4HParams(
    n_layer=43,
    n_embd=4096,
    n_vocab=129280,
    n_head=64,
    n_head_kv=1,
    head_dim=512,
    value_dim=512,
    n_rot=64,
    q_lora_rank=1024,
    o_lora_rank=1024,
    n_out_group=8,
    n_expert=256,
    n_expert_used=6,
    n_ff_exp=2048,
    n_expert_shared=1,
    n_hash_layer=3,
    n_swa=128,
    n_indexer_head=64,
    indexer_head_dim=128,
    indexer_top_k=512,
    n_hc=4,
    sinkhorn_iters=20,
    expert_group_count=0,
    expert_group_used_count=0,
    rope_orig_ctx=65536,
    rope_freq_base=10000.0,
    rope_scaling_factor=16.0,
    yarn_beta_fast=32.0,
    yarn_beta_slow=1.0,
    compress_rope_freq_base=160000.0,
    expert_weights_scale=1.5,
    rms_eps=1e-6,
    hc_eps=1e-6,
    expert_weights_norm=True,
    compress_ratios=flash_compress_ratios(),
    swiglu_clamp=(10.0,) * 43,
)

PRESETS: dict[str, DeepSeekV4HParams] = {"flash": FLASH}


def _same(got: object, want: object) -> bool:
    if isinstance(want, float) and isinstance(got, float):
        return math.isclose(got, want, rel_tol=0.0, abs_tol=max(1.0, abs(want)) * 1e-6)
    if isinstance(want, tuple) and isinstance(got, tuple):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want, strict=True))
    return got == want


def preset_differences(hp: DeepSeekV4HParams, preset: DeepSeekV4HParams) -> list[str]:
    """Human-readable list of keys where hp differs from a preset (empty if it matches)."""
    out = []
    for f in fields(DeepSeekV4HParams):
        got, want = getattr(hp, f.name), getattr(preset, f.name)
        if not _same(got, want):
            key = FIELD_TO_KEY.get(f.name, f.name)
            if isinstance(want, tuple):
                out.append(f"{key}: differs from the preset's per-layer values")
            else:
                out.append(f"{key}: {got} (preset has {want})")
    return out


def matching_preset(hp: DeepSeekV4HParams) -> str | None:
    for name, preset in PRESETS.items():
        if not preset_differences(hp, preset):
            return name
    return None


# --- Tiny DeepSeek V4 shapes for tests and demos: every layer kind, real vocabulary.
#
# Small window and top-k so that the sliding window wraps, compressed rows are
# emitted and the indexer selects among more rows than its top-k within a few
# hundred tokens. Rows are multiples of 256 so every quant preset applies.
# Layer kinds: 0-1 dense (hash routed), 2 ratio 4 + indexer (hash routed, as Flash's
# layer 2), 3 ratio 128, 4 ratio 4 + indexer (top-k routed), 5 ratio 128.
_TINY = dataclasses.replace(
    FLASH,
    n_layer=6,
    n_embd=256,
    n_head=4,
    head_dim=128,
    value_dim=128,
    n_rot=64,
    q_lora_rank=64,
    o_lora_rank=64,
    n_out_group=2,
    n_expert=8,
    n_expert_used=2,
    n_ff_exp=256,
    n_hash_layer=3,
    n_swa=16,
    n_indexer_head=4,
    indexer_head_dim=128,
    indexer_top_k=8,
    rope_orig_ctx=64,
    compress_ratios=(0, 0, 4, 128, 4, 128),
    swiglu_clamp=(10.0,) * 6,
)

TINY_SHAPES: dict[str, DeepSeekV4HParams] = {
    "tiny": _TINY,
    # Two layers only (one dense, one ratio-4): the fastest model that still has a
    # compressor and an indexer.
    "tiny-2layer": dataclasses.replace(
        _TINY, n_layer=2, n_hash_layer=1, compress_ratios=(0, 4), swiglu_clamp=(10.0, 10.0)
    ),
    # tiny with every weight row a multiple of 256 values (the low-rank widths too), so
    # llama-quantize's K-quant presets need no fallback type anywhere.
    "tiny-k": dataclasses.replace(_TINY, q_lora_rank=256, o_lora_rank=128),
}
DEFAULT_TINY_SHAPE = "tiny"


# --- Whether an MTP GGUF belongs to a main model (docs/mtp.md).
#
# The MTP block shares the main model's embedding table and output matrix and reads its
# final HC state, so every width it is built from must be the main model's. The block
# itself is fixed by the release: ratio 0 (sliding window only), biased top-k routing,
# the main model's SwiGLU clamp (every Flash layer has the same, 10).
# The hyperparameters that shape the MTP block or its two interfaces to the main model.
MTP_SHAPE_FIELDS = (
    "n_embd", "n_vocab", "n_head", "head_dim", "n_rot", "q_lora_rank", "o_lora_rank",
    "n_out_group", "n_expert", "n_expert_used", "n_ff_exp", "n_swa", "n_hc",
    "sinkhorn_iters", "rope_freq_base", "expert_weights_scale", "rms_eps", "hc_eps",
    "expert_weights_norm",
)  # fmt: skip


def mtp_mismatches(main: DeepSeekV4HParams, mtp: DeepSeekV4HParams) -> list[str]:
    """'field: mtp X, model Y' for every shaping hyperparameter that differs."""
    out = []
    for name in MTP_SHAPE_FIELDS:
        a, b = getattr(mtp, name), getattr(main, name)
        if a != b:
            out.append(f"{name}: mtp {a}, model {b}")
    return out


def mtp_clamp(main: DeepSeekV4HParams) -> float:
    """The MTP block's SwiGLU clamp: the last main layer's."""
    return main.swiglu_clamp[-1]


# --- Random weights for a tiny model, scaled so activations stay in a sane range.
#
# Projections are N(0, 1/fan_in) so a matmul keeps the scale of its input; norms are
# near 1; HC mixing, sinks, biases and positional terms are small, so no path starts
# saturated. Each tensor draws from its own generator seeded by (seed, name), so the
# bytes do not depend on the order tensors are produced in.
F32 = npt.NDArray[np.float32]


def tensor_rng(seed: int, name: str) -> np.random.Generator:
    return np.random.default_rng([seed, zlib.crc32(name.encode())])


def _normal(rng: np.random.Generator, shape: tuple[int, ...], std: float) -> F32:
    return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)


def _vector(spec: TensorSpec, rng: np.random.Generator, shape: tuple[int, ...]) -> F32:
    name = spec.name
    if name.endswith("norm.weight"):
        return (1.0 + _normal(rng, shape, 0.1)).astype(np.float32)
    if "_scale" in name:  # HC scales: modest gain on the mixing logits
        return (0.5 + _normal(rng, shape, 0.05)).astype(np.float32)
    if "attn_sinks" in name:
        return _normal(rng, shape, 0.5)
    return _normal(rng, shape, 0.02)  # HC bases, router bias


def _tid2eid(hp: DeepSeekV4HParams, rng: np.random.Generator) -> npt.NDArray[np.int32]:
    """Each token routes to n_expert_used distinct experts."""
    keys = rng.random((hp.n_vocab, hp.n_expert), dtype=np.float32)
    return np.argsort(keys, axis=1)[:, : hp.n_expert_used].astype(np.int32)


def init_tensor(spec: TensorSpec, hp: DeepSeekV4HParams, seed: int) -> F32 | npt.NDArray[np.int32]:
    """Values of one tensor in numpy orientation (reversed GGUF dims)."""
    rng = tensor_rng(seed, spec.name)
    shape = tuple(reversed(spec.dims))
    if spec.role is Role.INDEX:
        return _tid2eid(hp, rng)
    if spec.role is Role.VECTOR:
        return _vector(spec, rng, shape)
    fan_in = spec.dims[0]
    if spec.name == "token_embd.weight":
        return _normal(rng, shape, 1.0)
    if "hc_" in spec.name:  # HC mixing projections read a 4*D wide state
        return _normal(rng, shape, 0.5 / np.sqrt(fan_in))
    if "compressor_ape" in spec.name:
        return _normal(rng, shape, 0.1)
    if "attn_output_b" in spec.name or "down" in spec.name:
        return _normal(rng, shape, 0.5 / np.sqrt(fan_in))  # residual branches start small
    return _normal(rng, shape, 1.0 / np.sqrt(fan_in))
