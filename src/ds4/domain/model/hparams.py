"""DeepSeek V4 hyperparameters read from the `deepseek4.*` GGUF keys
(docs/reference/formats.md §2.2, docs/reference/model.md §1.4), the sane ranges each is
checked against, and `Problem`, the finding every model check reports.

Reading never stops at the first bad key: every problem is collected, so a user
sees everything wrong with a file at once. Integer keys are type-exact (a u32 key
stored as i32 counts as wrong), as in the reference engine. Every value is range-
checked as it is read (the ranges section below), so no later step sees an absurd size.

The same key table drives the writers: `hparams_metadata` is the one builder every GGUF
we make goes through, so a file carries both what this reader needs and what
llama.cpp's `deepseek4` loader needs (the interoperability keys below).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Literal

from ds4.domain.gguf.records import FLOAT_TYPES, MetaValue, ValueType

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    subject: str  # metadata key or tensor name
    message: str
    severity: Severity = "error"

    def __str__(self) -> str:
        return f"{self.subject}: {self.message}"


# --- Sane ranges for the `deepseek4.*` hyperparameters (docs/adr/0004-gguf-validation.md).
#
# Every number read from a model file is checked here before it sizes a loop, an
# allocation or a C `int` in the native structs. The bounds are far above Flash's and
# PRO's published values (docs/reference/model.md §1.1, §1.3) but finite, so that a
# corrupt or hostile file is refused with one line naming the key instead of hanging,
# overflowing or allocating without bound. Relations between keys (n_rot < key_length, ...) are
# checked afterwards, in check_architecture below.
@dataclass(frozen=True)
class Bounds:
    low: float
    high: float
    low_exclusive: bool = False  # the value must be strictly above `low`

    def admits(self, value: float) -> bool:
        if not math.isfinite(value):
            return False
        above = value > self.low if self.low_exclusive else value >= self.low
        return above and value <= self.high

    def describe(self) -> str:
        if isinstance(self.low, int) and isinstance(self.high, int):
            return f"{self.low}..{self.high}"
        op = "<" if self.low_exclusive else "<="
        return f"{self.low:g} {op} x <= {self.high:g}"


# Integer fields. Flash / PRO values in the comments (PRO: docs/reference/model.md §1.3,
# unverified).
INT_BOUNDS: dict[str, Bounds] = {
    "n_layer": Bounds(1, 512),  # 43 / 61
    "n_embd": Bounds(1, 65536),  # 4096 / 7168
    "n_vocab": Bounds(1, 1 << 24),  # 129280
    "n_head": Bounds(1, 1024),  # 64 / 128
    "head_dim": Bounds(1, 4096),  # 512
    "value_dim": Bounds(1, 4096),  # 512
    "n_rot": Bounds(2, 4096),  # 64
    "q_lora_rank": Bounds(1, 65536),  # 1024
    "o_lora_rank": Bounds(1, 65536),  # 1024
    "n_out_group": Bounds(1, 1024),  # 8
    "n_expert": Bounds(1, 4096),  # 256 / 384
    "n_expert_used": Bounds(1, 4096),  # 6
    "n_ff_exp": Bounds(1, 65536),  # 2048 / 3072
    "n_hash_layer": Bounds(0, 512),  # 3
    "n_swa": Bounds(1, 65536),  # 128; sizes per-head score rows in every forward call
    "n_indexer_head": Bounds(1, 1024),  # 64
    "indexer_head_dim": Bounds(1, 4096),  # 128
    "indexer_top_k": Bounds(1, 1 << 20),  # 512 / 1024
    "n_hc": Bounds(1, 16),  # 4
    "sinkhorn_iters": Bounds(1, 256),  # 20; a loop run twice per layer per token
    "rope_orig_ctx": Bounds(1, 1 << 24),  # 65536
}

# Float fields: rope bases > 1 (YaRN divides by log(base)), multipliers > 0.
FLOAT_BOUNDS: dict[str, Bounds] = {
    "rope_freq_base": Bounds(1.0, 1e10, low_exclusive=True),  # 10000
    "compress_rope_freq_base": Bounds(1.0, 1e10, low_exclusive=True),  # 160000
    "rope_scaling_factor": Bounds(1.0, 65536.0),  # 16
    "yarn_beta_fast": Bounds(0.0, 65536.0, low_exclusive=True),  # 32
    "yarn_beta_slow": Bounds(0.0, 65536.0, low_exclusive=True),  # 1
    "expert_weights_scale": Bounds(0.0, 65536.0, low_exclusive=True),  # 1.5
    "rms_eps": Bounds(1e-30, 1.0),  # 1e-6; stays a normal, nonzero f32 in C
    "hc_eps": Bounds(1e-30, 1.0),  # 1e-6
}

SWIGLU_CLAMP = Bounds(0.0, 65536.0, low_exclusive=True)  # 10 on every layer
# 0 = dense layer; otherwise rows pooled per compressed row (Flash: 4 and 128).
COMPRESS_RATIOS = frozenset({0} | {1 << k for k in range(1, 11)})
COMPRESS_RATIOS_TEXT = "0 or a power of two from 2 to 1024"


def show_number(value: float) -> str:
    """Ints in full (4294967295, not 4.29497e+09), floats short."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def out_of_range(value: float, bounds: Bounds) -> str | None:
    """The one-line complaint about `value`, or None when it is within `bounds`."""
    if bounds.admits(value):
        return None
    return f"{show_number(value)} is out of range (allowed {bounds.describe()})"


# --- the hyperparameters and their reading (the module docstring's rules)
ARCH = "deepseek4"

_FLOATISH = FLOAT_TYPES | {ValueType.UINT32, ValueType.INT32}


@dataclass(frozen=True)
class DeepSeekV4HParams:
    n_layer: int
    n_embd: int
    n_vocab: int
    n_head: int
    n_head_kv: int
    head_dim: int  # attention.key_length (K and V share it)
    value_dim: int
    n_rot: int
    q_lora_rank: int
    o_lora_rank: int
    n_out_group: int
    n_expert: int
    n_expert_used: int
    n_ff_exp: int
    n_expert_shared: int
    n_hash_layer: int
    n_swa: int
    n_indexer_head: int
    indexer_head_dim: int
    indexer_top_k: int
    n_hc: int
    sinkhorn_iters: int
    expert_group_count: int
    expert_group_used_count: int
    rope_orig_ctx: int
    rope_freq_base: float
    rope_scaling_factor: float
    yarn_beta_fast: float
    yarn_beta_slow: float
    compress_rope_freq_base: float
    expert_weights_scale: float
    rms_eps: float
    hc_eps: float
    expert_weights_norm: bool
    compress_ratios: tuple[int, ...]  # one per layer (extra file entries dropped)
    swiglu_clamp: tuple[float, ...]  # one per layer

    # ---- derived sizes ----------------------------------------------------

    @property
    def hc_dim(self) -> int:
        return self.n_hc * self.n_embd

    @property
    def hc_mix(self) -> int:
        return 2 * self.n_hc + self.n_hc * self.n_hc

    @property
    def q_dim(self) -> int:
        return self.n_head * self.head_dim

    @property
    def group_in_dim(self) -> int:
        """Head values one output group consumes: (H/G) * Dh."""
        return self.n_head // self.n_out_group * self.head_dim

    @property
    def n_rope_free(self) -> int:
        return self.head_dim - self.n_rot

    def compressor_width(self, layer: int) -> int:
        """Rows of the attention compressor: 2*Dh for overlapping ratio-4 layers."""
        ratio = self.compress_ratios[layer]
        return (2 if ratio == 4 else 1) * self.head_dim

    def has_indexer(self, layer: int) -> bool:
        return self.compress_ratios[layer] == 4

    def is_hash_layer(self, layer: int) -> bool:
        return layer < self.n_hash_layer


# key suffix -> field, for the type-exact u32 keys
_U32_KEYS: dict[str, str] = {
    "block_count": "n_layer",
    "embedding_length": "n_embd",
    "vocab_size": "n_vocab",
    "attention.head_count": "n_head",
    "attention.head_count_kv": "n_head_kv",
    "attention.key_length": "head_dim",
    "attention.value_length": "value_dim",
    "rope.dimension_count": "n_rot",
    "attention.q_lora_rank": "q_lora_rank",
    "attention.output_lora_rank": "o_lora_rank",
    "attention.output_group_count": "n_out_group",
    "expert_count": "n_expert",
    "expert_used_count": "n_expert_used",
    "expert_feed_forward_length": "n_ff_exp",
    "expert_shared_count": "n_expert_shared",
    "hash_layer_count": "n_hash_layer",
    "attention.sliding_window": "n_swa",
    "attention.indexer.head_count": "n_indexer_head",
    "attention.indexer.key_length": "indexer_head_dim",
    "attention.indexer.top_k": "indexer_top_k",
    "hyper_connection.count": "n_hc",
    "hyper_connection.sinkhorn_iterations": "sinkhorn_iters",
}
_OPTIONAL_U32_KEYS: dict[str, str] = {
    "expert_group_count": "expert_group_count",
    "expert_group_used_count": "expert_group_used_count",
}
_FLOAT_KEYS: dict[str, str] = {
    "rope.freq_base": "rope_freq_base",
    "rope.scaling.factor": "rope_scaling_factor",
    "rope.scaling.yarn_beta_fast": "yarn_beta_fast",
    "rope.scaling.yarn_beta_slow": "yarn_beta_slow",
    "attention.compress_rope_freq_base": "compress_rope_freq_base",
    "expert_weights_scale": "expert_weights_scale",
    "attention.layer_norm_rms_epsilon": "rms_eps",
    "hyper_connection.epsilon": "hc_eps",
}

# --- interoperability keys (docs/reference/formats.md §2.2).
#
# llama.cpp's `deepseek4` loader (src/llama-model.cpp load_hparams, src/models/deepseek4.cpp
# at llama.cpp 0c1e570) also requires `context_length` and `expert_gating_func`, reads
# `rope.scaling.original_context_length` as u32, and falls back to linear rope scaling
# without `rope.scaling.type`. Our forward pass needs none of them, so the reader
# accepts files without them (every file written before they were added), but a present
# one must say what this engine computes: a file that claims another gating or scaling
# would be run wrongly, so it is refused.
#
# llama.cpp's `llama_expert_gating_func_type` (src/llama-hparams.h): 0 none, 1 softmax,
# 2 sigmoid, 3 softmax over the router weights, 4 sqrt(softplus) -- DeepSeek V4's.
EXPERT_GATING_NAMES = {
    0: "none", 1: "softmax", 2: "sigmoid", 3: "softmax-weight", 4: "sqrt-softplus",
}  # fmt: skip
EXPERT_GATING_SQRT_SOFTPLUS = 4
ROPE_SCALING_TYPE = "yarn"
CONTEXT_LENGTH_BOUNDS = Bounds(1, (1 << 32) - 1)  # a u32; llama.cpp's n_ctx_train
CONTEXT_LENGTH_KEY = f"{ARCH}.context_length"
GATING_KEY = f"{ARCH}.expert_gating_func"
ROPE_SCALING_TYPE_KEY = f"{ARCH}.rope.scaling.type"
# llama.cpp's converter writes no vocab_size (its loader counts the token list).
TOKENS_KEY = "tokenizer.ggml.tokens"
# llama.cpp's MTP layout (ds4.domain.model.nextn): block_count counts the MTP layer.
NEXTN_KEY = f"{ARCH}.nextn_predict_layers"
# Keys llama.cpp's converter writes that restate ours: they must agree when present.
SHARED_CLAMP_KEY = f"{ARCH}.swiglu_clamp_shexp"
EMBEDDING_OUT_KEY = f"{ARCH}.embedding_length_out"


def context_length(hp: DeepSeekV4HParams) -> int:
    """The trained context: YaRN stretches the original context by the scaling factor
    (Flash: 65536 * 16 = 1048576, its config's max_position_embeddings), capped to u32."""
    return min(int(hp.rope_orig_ctx * hp.rope_scaling_factor), int(CONTEXT_LENGTH_BOUNDS.high))


# The keys a writer emits, with their storage types: those of the reader (which insists
# on them for the u32, float and bool keys) and those llama.cpp's loader reads.
KEY_TYPES: dict[str, ValueType] = {
    **{f"{ARCH}.{k}": ValueType.UINT32 for k in _U32_KEYS},
    **{f"{ARCH}.{k}": ValueType.UINT32 for k in _OPTIONAL_U32_KEYS},
    **{f"{ARCH}.{k}": ValueType.FLOAT32 for k in _FLOAT_KEYS},
    f"{ARCH}.rope.scaling.original_context_length": ValueType.UINT32,
    f"{ARCH}.expert_weights_norm": ValueType.BOOL,
    CONTEXT_LENGTH_KEY: ValueType.UINT32,
    GATING_KEY: ValueType.UINT32,
    ROPE_SCALING_TYPE_KEY: ValueType.STRING,
}
FIELD_TO_KEY: dict[str, str] = {
    **{f: f"{ARCH}.{k}" for k, f in {**_U32_KEYS, **_OPTIONAL_U32_KEYS, **_FLOAT_KEYS}.items()},
    "rope_orig_ctx": f"{ARCH}.rope.scaling.original_context_length",
    "expert_weights_norm": f"{ARCH}.expert_weights_norm",
    "compress_ratios": f"{ARCH}.attention.compress_ratios",
    "swiglu_clamp": f"{ARCH}.swiglu_clamp_exp",
}


class MetadataReader:
    """Typed, range-checked reads of GGUF metadata that collect every problem instead of
    stopping at the first (the model's hparams here, the vision encoder's in
    domain/vision/hparams.py)."""

    def __init__(self, metadata: Mapping[str, MetaValue]) -> None:
        self.metadata = metadata
        self.problems: list[Problem] = []
        self.values: dict[str, object] = {}

    def fail(self, key: str, message: str) -> None:
        self.problems.append(Problem(key, message))

    def get(self, key: str, accepted: frozenset[ValueType], optional: bool = False) -> object:
        entry = self.metadata.get(key)
        if entry is None:
            if not optional:
                self.fail(key, "missing")
            return None
        if entry.vtype not in accepted:
            names = "/".join(sorted(t.name.lower() for t in accepted))
            self.fail(key, f"stored as {entry.describe_type()}, expected {names}")
            return None
        return entry.value

    def bounded(self, key: str, value: object, bounds: Bounds | None) -> object:
        """value, or None (and a problem) when it is outside bounds."""
        if bounds is None or not isinstance(value, int | float):
            return value
        complaint = out_of_range(value, bounds)
        if complaint is not None:
            self.fail(key, complaint)
            return None
        return value

    def array(self, key: str, items: frozenset[ValueType], n_layer: int | None) -> list[object]:
        """The first n_layer items (none when n_layer is unknown: nothing to check against)."""
        entry = self.metadata.get(key)
        if entry is None:
            self.fail(key, "missing")
            return []
        values = entry.items()
        if values is None or entry.item_type not in items:
            names = "/".join(sorted(t.name.lower() for t in items))
            self.fail(key, f"stored as {entry.describe_type()}, expected array[{names}]")
            return []
        if n_layer is None:
            return []
        if len(values) < n_layer:
            self.fail(key, f"has {len(values)} entries, need one per layer ({n_layer})")
            return []
        return list(values[:n_layer])

    def first_bad_layer(
        self,
        key: str,
        what: str,
        values: Sequence[float],
        ok: Callable[[float], bool],
        allowed: str,
    ) -> None:
        for layer, value in enumerate(values):
            if not ok(value):
                self.fail(key, f"layer {layer} has {what} {show_number(value)} (allowed {allowed})")
                return


def read_hparams(
    metadata: Mapping[str, MetaValue],
) -> tuple[DeepSeekV4HParams | None, list[Problem]]:
    """Read every `deepseek4.*` key; return the hyperparameters (if complete) and problems.

    None when any key is missing, mistyped or out of range: a catalog or an engine
    must never be sized from such values.
    """
    r = MetadataReader(metadata)
    arch = metadata.get("general.architecture")
    if arch is not None and arch.value != ARCH:
        r.fail("general.architecture", f"is {arch.value!r}, expected {ARCH!r}")
    u32 = frozenset({ValueType.UINT32})
    for suffix, name in _U32_KEYS.items():
        key = f"{ARCH}.{suffix}"
        if name == "n_vocab" and key not in metadata:
            r.values[name] = r.bounded(key, _vocab_from_tokens(r, key), INT_BOUNDS[name])
            continue
        r.values[name] = r.bounded(key, r.get(key, u32), INT_BOUNDS.get(name))
    for suffix, name in _OPTIONAL_U32_KEYS.items():
        value = r.get(f"{ARCH}.{suffix}", u32, optional=True)
        r.values[name] = 0 if value is None else value
    for suffix, name in _FLOAT_KEYS.items():
        key = f"{ARCH}.{suffix}"
        value = r.get(key, _FLOATISH)
        value = None if value is None else float(value)  # type: ignore[arg-type]
        r.values[name] = r.bounded(key, value, FLOAT_BOUNDS[name])
    key = f"{ARCH}.rope.scaling.original_context_length"
    value = r.get(key, frozenset({ValueType.UINT64, ValueType.UINT32}))
    r.values["rope_orig_ctx"] = r.bounded(key, value, INT_BOUNDS["rope_orig_ctx"])
    r.values["expert_weights_norm"] = r.get(
        f"{ARCH}.expert_weights_norm", frozenset({ValueType.BOOL})
    )
    _check_interop_keys(r)
    _count_out_nextn(r)
    n_layer = r.values["n_layer"]
    count = n_layer if isinstance(n_layer, int) else None
    ratios_key, clamps_key = f"{ARCH}.attention.compress_ratios", f"{ARCH}.swiglu_clamp_exp"
    ratios = [
        int(x)  # type: ignore[call-overload]
        for x in r.array(ratios_key, frozenset({ValueType.UINT32, ValueType.INT32}), count)
    ]
    clamps = [float(x) for x in r.array(clamps_key, FLOAT_TYPES, count)]  # type: ignore[arg-type]
    r.first_bad_layer(
        ratios_key, "ratio", ratios, COMPRESS_RATIOS.__contains__, COMPRESS_RATIOS_TEXT
    )
    r.first_bad_layer(clamps_key, "clamp", clamps, SWIGLU_CLAMP.admits, SWIGLU_CLAMP.describe())
    r.values["compress_ratios"] = tuple(ratios)
    r.values["swiglu_clamp"] = tuple(clamps)
    _check_restated_keys(r, clamps)

    if r.problems or count is None or not ratios or not clamps:
        return None, r.problems
    hparams = DeepSeekV4HParams(**r.values)  # type: ignore[arg-type]
    return hparams, r.problems + check_architecture(hparams)


def _vocab_from_tokens(r: MetadataReader, key: str) -> object:
    """No vocab_size (llama.cpp's converter writes none): the token list's length."""
    tokens = r.metadata.get(TOKENS_KEY)
    if tokens is None:
        r.fail(key, f"missing, and no {TOKENS_KEY} to count it from")
        return None
    if tokens.items() is None or tokens.item_type is not ValueType.STRING:
        r.fail(TOKENS_KEY, f"stored as {tokens.describe_type()}, expected array[string]")
        return None
    return len(tokens.items() or ())


def _check_interop_keys(r: MetadataReader) -> None:
    """The llama.cpp keys (see above): optional, but typed, in range and ours when present."""
    value = r.get(CONTEXT_LENGTH_KEY, frozenset({ValueType.UINT32, ValueType.UINT64}), True)
    if value is not None:
        r.bounded(CONTEXT_LENGTH_KEY, value, CONTEXT_LENGTH_BOUNDS)
    gating = r.get(GATING_KEY, frozenset({ValueType.UINT32}), optional=True)
    if isinstance(gating, int) and gating != EXPERT_GATING_SQRT_SOFTPLUS:
        name = EXPERT_GATING_NAMES.get(gating, "unknown")
        r.fail(GATING_KEY, f"is {gating} ({name}); DeepSeek V4 routes with "
               f"{EXPERT_GATING_SQRT_SOFTPLUS} (sqrt-softplus)")  # fmt: skip
    scaling = r.get(ROPE_SCALING_TYPE_KEY, frozenset({ValueType.STRING}), optional=True)
    if scaling is not None and scaling != ROPE_SCALING_TYPE:
        r.fail(ROPE_SCALING_TYPE_KEY, f"is {scaling!r}; DeepSeek V4 uses {ROPE_SCALING_TYPE!r}")


def _count_out_nextn(r: MetadataReader) -> None:
    """n_layer is the trunk: llama.cpp's block_count also counts its MTP layers."""
    value = r.get(NEXTN_KEY, frozenset({ValueType.UINT32}), optional=True)
    n_layer = r.values["n_layer"]
    if not isinstance(value, int) or not isinstance(n_layer, int) or value == 0:
        return
    if value != 1:
        r.fail(NEXTN_KEY, f"is {value}; one MTP layer (1) or none (0) is supported")
    elif n_layer < 2:
        r.fail(NEXTN_KEY, f"leaves no trunk layer of block_count {n_layer}")
    else:
        r.values["n_layer"] = n_layer - 1


def _check_restated_keys(r: MetadataReader, clamps: list[float]) -> None:
    """swiglu_clamp_shexp and embedding_length_out (llama.cpp's converter writes both):
    this engine clamps shared experts like routed ones and streams n_hc * n_embd."""
    shared = r.metadata.get(SHARED_CLAMP_KEY)
    if shared is not None:
        values = shared.items()
        if values is None or shared.item_type not in FLOAT_TYPES:
            r.fail(SHARED_CLAMP_KEY, f"stored as {shared.describe_type()}, expected array[float32]")
        elif [float(v) for v in values[: len(clamps)]] != clamps:
            r.fail(SHARED_CLAMP_KEY, "differs from swiglu_clamp_exp (one clamp is supported)")
    out = r.get(EMBEDDING_OUT_KEY, frozenset({ValueType.UINT32}), optional=True)
    n_hc, n_embd = r.values.get("n_hc"), r.values.get("n_embd")
    numbers = isinstance(out, int) and isinstance(n_hc, int) and isinstance(n_embd, int)
    if numbers and out != n_hc * n_embd:  # type: ignore[operator]
        r.fail(EMBEDDING_OUT_KEY, f"is {out}, expected hyper_connection.count * "
               f"embedding_length = {n_hc * n_embd}")  # type: ignore[operator]  # fmt: skip


def check_architecture(hp: DeepSeekV4HParams) -> list[Problem]:
    """Shape rules any DeepSeek V4 model obeys, whatever its size."""
    out: list[Problem] = []

    def need(cond: bool, field: str, message: str) -> None:
        if not cond:
            out.append(Problem(FIELD_TO_KEY.get(field, field), message))

    need(hp.n_head_kv == 1, "n_head_kv", f"must be 1 (shared K=V head), got {hp.n_head_kv}")
    need(hp.value_dim == hp.head_dim, "value_dim", "must equal key_length (K and V are shared)")
    need(0 < hp.n_rot < hp.head_dim and hp.n_rot % 2 == 0, "n_rot",
         f"must be even and below key_length {hp.head_dim}, got {hp.n_rot}")  # fmt: skip
    need(hp.n_out_group > 0 and hp.n_head % max(hp.n_out_group, 1) == 0, "n_out_group",
         f"must divide head_count {hp.n_head}, got {hp.n_out_group}")  # fmt: skip
    need(hp.n_expert_used <= hp.n_expert, "n_expert_used",
         f"{hp.n_expert_used} exceeds expert_count {hp.n_expert}")  # fmt: skip
    need(hp.n_expert_shared == 1, "n_expert_shared", f"must be 1, got {hp.n_expert_shared}")
    need(hp.n_hash_layer <= hp.n_layer, "n_hash_layer", "exceeds block_count")
    need(hp.expert_group_count == 0 and hp.expert_group_used_count == 0, "expert_group_count",
         "group-limited routing is not part of DeepSeek V4 (must be 0)")  # fmt: skip
    need(hp.indexer_head_dim > hp.n_rot, "indexer_head_dim",
         f"must exceed rope.dimension_count {hp.n_rot}")  # fmt: skip
    return out


def hparams_metadata(hp: DeepSeekV4HParams) -> dict[str, MetaValue]:
    """The `deepseek4.*` records that describe hp, in KEY_TYPES' storage types: every key
    this reader and llama.cpp's loader read (the one list every writer of ours uses)."""
    out: dict[str, MetaValue] = {"general.architecture": MetaValue(ValueType.STRING, ARCH)}
    for f in fields(hp):
        key = FIELD_TO_KEY[f.name]
        value = getattr(hp, f.name)
        if f.name == "compress_ratios":
            out[key] = MetaValue(ValueType.ARRAY, list(value), ValueType.UINT32)
        elif f.name == "swiglu_clamp":
            out[key] = MetaValue(ValueType.ARRAY, list(value), ValueType.FLOAT32)
        else:
            out[key] = MetaValue(KEY_TYPES[key], value)
    out[CONTEXT_LENGTH_KEY] = MetaValue(KEY_TYPES[CONTEXT_LENGTH_KEY], context_length(hp))
    out[GATING_KEY] = MetaValue(KEY_TYPES[GATING_KEY], EXPERT_GATING_SQRT_SOFTPLUS)
    out[ROPE_SCALING_TYPE_KEY] = MetaValue(KEY_TYPES[ROPE_SCALING_TYPE_KEY], ROPE_SCALING_TYPE)
    return out
