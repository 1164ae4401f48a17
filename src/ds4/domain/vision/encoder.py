"""The deepseek4v encoder in numpy, float32 throughout (docs/vision.md §4): patch
embedding, SwiGLU ViT blocks with 2-D RoPE and RMSNorm, the n_merge x n_merge patch
merge and the two-layer GELU aligner into the language model's width.

`encode_grid` is pure: weights come in as f32 arrays (numpy orientation, [out, in]),
already decoded by whoever read the file (ds4.adapters.compute.reference.vision).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.domain.engine_math.layers import f16round
from ds4.domain.errors import Ds4Error
from ds4.domain.vision.hparams import ROPE_THETA, VisionHParams
from ds4.domain.vision.layout import BlockLayout, Sentinels, assemble_block, block_slots, lead_for
from ds4.domain.vision.preprocess import PreparedImage

F32 = npt.NDArray[np.float32]


@dataclass(frozen=True)
class VisionLayer:
    ln1: F32
    qkv: F32  # [3 * n_embd, n_embd]: Q, K, V, each head's dims contiguous
    qkv_b: F32 | None
    out: F32
    out_b: F32 | None
    ln2: F32
    gate: F32
    gate_b: F32 | None
    up: F32
    up_b: F32 | None
    down: F32
    down_b: F32 | None


@dataclass(frozen=True)
class VisionWeights:
    patch: F32  # [n_embd, 3, p, p]
    patch_b: F32 | None
    layers: tuple[VisionLayer, ...]
    post_ln: F32 | None
    mm1: F32  # [aligner_dim, n_embd * n_merge^2]
    mm1_b: F32
    mm2: F32  # [n_embd_out, aligner_dim]
    mm2_b: F32
    sentinels: Sentinels


def _linear(x: F32, w: F32, b: F32 | None) -> F32:
    y = x @ w.T
    if b is not None:
        y = y + b
    return y.astype(np.float32, copy=False)


def rmsnorm(x: F32, w: F32, eps: float) -> F32:
    ms = np.mean(x.astype(np.float64) ** 2, axis=-1, keepdims=True)
    out: F32 = (x * (1.0 / np.sqrt(ms + eps)).astype(np.float32) * w).astype(np.float32)
    return out


def silu(x: F32) -> F32:
    return (x / (np.float32(1) + np.exp(-x))).astype(np.float32)


_erf = np.frompyfunc(math.erf, 1, 1)


def gelu_erf(x: F32) -> F32:
    """0.5 x (1 + erf(x / sqrt 2)), erf in double (math.erf), the result in float32."""
    scaled = np.asarray(x, dtype=np.float64) * (1.0 / math.sqrt(2.0))
    e = np.asarray(_erf(scaled), dtype=np.float64)
    out: F32 = (0.5 * x * (1.0 + e)).astype(np.float32)
    return out


def rope_2d(x: F32, rows: npt.NDArray[np.int64], cols: npt.NDArray[np.int64]) -> F32:
    """x [n, heads, d]: dims i and i + d/2 rotate as a pair; pairs 0..d/4-1 by the
    patch's row, d/4..d/2-1 by its column, frequency theta^(-4j/d) for pair j of each."""
    d = x.shape[-1]
    quarter = d // 4
    freq = np.float32(ROPE_THETA) ** (-np.arange(quarter, dtype=np.float32) * np.float32(4.0 / d))
    ang = np.concatenate(
        [rows[:, None].astype(np.float32) * freq, cols[:, None].astype(np.float32) * freq], axis=1
    )[:, None, :]  # [n, 1, d/2]
    cos, sin = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return np.concatenate([a * cos - b * sin, a * sin + b * cos], axis=-1).astype(np.float32)


def _attention(x: F32, lw: VisionLayer, hp: VisionHParams, rows: npt.NDArray[np.int64],
               cols: npt.NDArray[np.int64]) -> F32:  # fmt: skip
    n, d, heads, dh = x.shape[0], hp.n_embd, hp.n_head, hp.head_dim
    qkv = _linear(x, lw.qkv, lw.qkv_b)
    q = rope_2d(qkv[:, :d].reshape(n, heads, dh), rows, cols)
    k = rope_2d(qkv[:, d : 2 * d].reshape(n, heads, dh), rows, cols)
    v = qkv[:, 2 * d :].reshape(n, heads, dh)
    scale = np.float32(1.0 / math.sqrt(dh))
    mixed = np.empty((n, heads, dh), dtype=np.float32)
    for h in range(heads):  # one head's [n, n] scores at a time (3456^2 floats at most)
        scores = (q[:, h] @ k[:, h].T).astype(np.float32) * scale
        scores -= scores.max(axis=-1, keepdims=True)
        probs = np.exp(scores)
        probs /= probs.sum(axis=-1, keepdims=True)
        mixed[:, h] = probs @ v[:, h]
    return _linear(mixed.reshape(n, d), lw.out, lw.out_b)


def vit(planes: F32, w: VisionWeights, hp: VisionHParams) -> F32:
    """[3, H, W] -> patch features [py * px, n_embd] (row-major patch order)."""
    p = hp.patch_size
    _, height, width = planes.shape
    if height % p or width % p:
        raise Ds4Error(f"encoder input {width}x{height} is not a multiple of the patch {p}")
    py, px = height // p, width // p
    patches = planes.reshape(3, py, p, px, p).transpose(1, 3, 0, 2, 4).reshape(py * px, -1)
    # llama.cpp's ggml_conv_2d lays the patches out in F16 and multiplies them with the
    # kernel in F16 (accumulating in F32): both sides are rounded to F16 here too.
    kernel = f16round(w.patch.reshape(hp.n_embd, -1))
    x = _linear(f16round(np.ascontiguousarray(patches)), kernel, w.patch_b)
    index = np.arange(py * px, dtype=np.int64)
    rows, cols = index // px, index % px
    for lw in w.layers:
        x = (x + _attention(rmsnorm(x, lw.ln1, hp.eps), lw, hp, rows, cols)).astype(np.float32)
        h = rmsnorm(x, lw.ln2, hp.eps)
        f = silu(_linear(h, lw.gate, lw.gate_b)) * _linear(h, lw.up, lw.up_b)
        x = (x + _linear(f.astype(np.float32), lw.down, lw.down_b)).astype(np.float32)
    if w.post_ln is not None:
        x = rmsnorm(x, w.post_ln, hp.eps)
    return x


def merge_patches(x: F32, px: int, py: int, r: int) -> tuple[F32, int, int]:
    """Zero-pad the patch grid to multiples of r, then each r x r cell becomes one
    token of its features laid out channel-major: index c * r * r + dy * r + dx."""
    c = x.shape[1]
    gw, gh = -(-px // r), -(-py // r)
    grid = np.zeros((gh * r, gw * r, c), dtype=np.float32)
    grid[:py, :px] = x.reshape(py, px, c)
    cells = grid.reshape(gh, r, gw, r, c).transpose(0, 2, 4, 1, 3)
    return np.ascontiguousarray(cells.reshape(gh * gw, c * r * r)), gw, gh


def encode_grid(image: PreparedImage, w: VisionWeights, hp: VisionHParams) -> F32:
    """The aligner's output [grid_h * grid_w, n_embd_out] for one prepared image."""
    x = vit(image.planes, w, hp)
    merged, gw, gh = merge_patches(x, image.width // hp.patch_size,
                                   image.height // hp.patch_size, hp.n_merge)  # fmt: skip
    if (gw, gh) != (image.grid_w, image.grid_h):
        raise Ds4Error(f"merged grid {gw}x{gh} differs from the planned {image.grid_w}x"
                       f"{image.grid_h}")  # fmt: skip
    hidden = gelu_erf(_linear(merged, w.mm1, w.mm1_b))
    return _linear(hidden, w.mm2, w.mm2_b)


@dataclass(frozen=True)
class EncodedImage:
    """One image through the encoder, independent of where it goes in the prompt: the
    aligner grid and the four sentinel embeddings. `block` places it."""

    grid: F32  # [grid_h * grid_w, n_embd_out]
    grid_w: int
    grid_h: int
    sentinels: Sentinels

    def layout(self, n_past: int) -> BlockLayout:
        return BlockLayout(self.grid_w, self.grid_h, lead_for(n_past))

    def block(self, n_past: int) -> tuple[F32, npt.NDArray[np.int64]]:
        """(embeddings [n_tokens, n_embd_out], slots [n_tokens]) for a block starting
        after n_past prompt positions; slots as ds4.domain.vision.layout.block_slots."""
        layout = self.layout(n_past)
        return assemble_block(self.grid, self.sentinels, layout), block_slots(layout)
