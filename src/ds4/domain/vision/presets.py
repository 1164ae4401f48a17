"""Tiny random deepseek4v encoders for tests and demos (docs/vision.md §5): llama.cpp's
mmproj layout at a few hundred KiB, weights scaled to keep activations sane."""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from ds4.domain.model.presets import tensor_rng
from ds4.domain.vision.catalog import SENTINELS, VisionTensorSpec
from ds4.domain.vision.hparams import VisionHParams

F32 = npt.NDArray[np.float32]

# Not the released shape (32 blocks of width 1024, 16 heads; its FFN and aligner widths
# are not published where we read): a tiny one with every part of it.
_TINY = VisionHParams(
    n_layer=2,
    n_embd=64,
    n_head=4,
    n_ff=96,
    patch_size=14,
    n_merge=3,
    n_embd_out=256,  # the tiny main model's n_embd (ds4 gguf tiny)
    image_size=14 * 3 * 16,
    image_min_pixels=14 * 14 * 9 * 4,  # four merged tokens: small images are scaled up
    aligner_dim=128,
    eps=1e-6,
    image_mean=(0.5, 0.5, 0.5),
    image_std=(0.5, 0.5, 0.5),
)

TINY_VISION_SHAPES: dict[str, VisionHParams] = {
    "tiny": _TINY,
    # One block: the fastest encoder, for tests that only need the layout.
    "tiny-1layer": dataclasses.replace(_TINY, n_layer=1),
}
DEFAULT_TINY_VISION = "tiny"


def _normal(rng: np.random.Generator, shape: tuple[int, ...], std: float) -> F32:
    return (rng.standard_normal(shape, dtype=np.float32) * np.float32(std)).astype(np.float32)


def init_vision_tensor(spec: VisionTensorSpec, seed: int) -> F32:
    """Values of one tensor in numpy orientation (reversed GGUF dims)."""
    rng = tensor_rng(seed, spec.name)
    shape = tuple(reversed(spec.dims))
    if spec.name in SENTINELS:
        return _normal(rng, shape, 1.0)
    if len(spec.dims) == 1:
        if spec.name.endswith(("ln1.weight", "ln2.weight", "post_ln.weight")):
            return (1.0 + _normal(rng, shape, 0.1)).astype(np.float32)
        return _normal(rng, shape, 0.02)  # biases
    fan_in = int(np.prod(spec.dims[:-1]))
    if "attn_out" in spec.name or "ffn_down" in spec.name:
        return _normal(rng, shape, 0.5 / np.sqrt(fan_in))  # residual branches start small
    return _normal(rng, shape, 1.0 / np.sqrt(fan_in))
