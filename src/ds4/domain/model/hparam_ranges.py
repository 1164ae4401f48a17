"""Sane ranges for the `deepseek4.*` hyperparameters (docs/adr/0004-gguf-validation.md).

Every number read from a model file is checked here before it sizes a loop, an
allocation or a C `int` in the native structs. The bounds are far above Flash's and
PRO's published values (docs/reference/model.md §1.1, §1.3) but finite, so that a corrupt or hostile
file is refused with one line naming the key instead of hanging, overflowing or
allocating without bound. Relations between keys (n_rot < key_length, ...) are
checked afterwards, in hparams.check_architecture.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


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
