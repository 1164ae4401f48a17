"""From decoded RGB pixels to the encoder's input (docs/vision.md §2): size limits, the
resize solver that fits the token block into MAX_TOKENS, a Pillow-compatible bicubic
resample (fixed point, byte-exact with PIL and with llama.cpp's port of it), grey
padding, and normalization to float32 planes.

Every size is range-checked before anything is allocated from it; a refusal is one
Ds4Error line naming the image's size and the limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.domain.errors import Ds4Error
from ds4.domain.vision.hparams import MAX_TOKENS, MAX_WH_RATIO, PAD_COLOR, VisionHParams
from ds4.domain.vision.layout import grid_tokens

U8 = npt.NDArray[np.uint8]
F32 = npt.NDArray[np.float32]

# ds4's own limits on a decoded image (not llama.cpp's, which has none before decode).
MAX_SIDE = 16384
MAX_PIXELS = 1 << 25  # 32 Mpx: an 8K frame
MAX_ASPECT = 256  # long side : short side


class ImageError(Ds4Error):
    """An image ds4 will not encode; the message names its size and the limit."""


def check_image_size(width: int, height: int) -> None:
    """Refuse sizes outside the limits above (called before decoding the pixels)."""
    if width < 1 or height < 1:
        raise ImageError(f"image is {width}x{height} pixels: empty")
    if width > MAX_SIDE or height > MAX_SIDE:
        raise ImageError(f"image is {width}x{height} pixels: a side exceeds {MAX_SIDE}")
    if width * height > MAX_PIXELS:
        raise ImageError(f"image is {width}x{height} pixels: more than {MAX_PIXELS} pixels")
    if max(width, height) > MAX_ASPECT * min(width, height):
        raise ImageError(f"image is {width}x{height} pixels: aspect ratio beyond "
                         f"{MAX_ASPECT}:1")  # fmt: skip


@dataclass(frozen=True)
class RGBImage:
    """Decoded pixels, [height, width, 3] uint8, rows top to bottom."""

    pixels: U8

    def __post_init__(self) -> None:
        p = self.pixels
        if p.dtype != np.uint8 or p.ndim != 3 or p.shape[2] != 3:
            raise ImageError(f"pixels must be [height, width, 3] uint8, got {p.shape} {p.dtype}")
        check_image_size(self.width, self.height)

    @property
    def width(self) -> int:
        return int(self.pixels.shape[1])

    @property
    def height(self) -> int:
        return int(self.pixels.shape[0])


# --- the resize solver (llama.cpp mtmd-image.cpp, deepseek4v: safe_resize and friends)
def _align(x: int, n: int) -> int:
    return (x + n - 1) // n * n


def _grid(best_h: int, best_w: int, p: int, r: int) -> tuple[int, int]:
    return (best_w // p + r - 1) // r, (best_h // p + r - 1) // r


def _solve(height: int, width: int, p: int, r: int, budget: int) -> tuple[int, int]:
    """The largest (best_h, best_w) whose block fits `budget` tokens at this aspect."""
    ratio = height / width
    max_w_f = math.sqrt((budget - 2) / ratio + 0.25) - 0.5
    max_h_f = max_w_f * ratio
    if max_w_f < 1.0:
        max_h = (budget - 2) // 2
        max_h -= max_h % 2
        return max_h * p * r, p * r
    if max_h_f < 2.0:
        max_w = max((budget - 2) // 2 - 1, 2)
        return 2 * p * r, max_w * p * r
    max_w_i = math.floor(max_w_f)
    max_h_i = math.floor(max_h_f)
    max_h_i -= max_h_i % 2
    beta = min(max_w_i * p * r / width, max_h_i * p * r / height)
    return math.floor(height * beta / p) * p, math.floor(width * beta / p) * p


@dataclass(frozen=True)
class ResizePlan:
    width: int  # the encoder's input size, multiples of patch_size
    height: int
    stretch: bool  # True: plain resize (extreme width); False: fit and pad grey
    grid_w: int  # merged tokens per row / rows of the aligner's grid
    grid_h: int


def plan_resize(width: int, height: int, hp: VisionHParams) -> ResizePlan:
    check_image_size(width, height)
    p, r = hp.patch_size, hp.n_merge
    w, h = width, height
    w = min(w, h * MAX_WH_RATIO)
    if hp.image_min_pixels > 0 and w * h < hp.image_min_pixels:
        up = math.sqrt(hp.image_min_pixels / (float(w) * h))
        w, h = int(w * up), int(h * up)
    if w < 1 or h < 1:
        raise ImageError(f"image is {width}x{height} pixels: too thin to resize")
    best_h, best_w = _align(h, p), _align(w, p)
    cap = MAX_TOKENS - 3  # room for the lead pads
    budget = cap
    while grid_tokens(*_grid(best_h, best_w, p, r)) > cap:
        if budget <= 4:
            raise ImageError(f"image is {width}x{height} pixels: no size fits {MAX_TOKENS} tokens")
        best_h, best_w = _solve(h, w, p, r, budget)
        if best_h < p or best_w < p:
            raise ImageError(f"image is {width}x{height} pixels: too thin to resize")
        budget -= 1
    grid_w, grid_h = _grid(best_h, best_w, p, r)
    return ResizePlan(best_w, best_h, width >= MAX_WH_RATIO * height, grid_w, grid_h)


# --- Pillow's separable resampling (libImaging/Resample.c), bicubic a = -0.5
_PRECISION_BITS = 32 - 8 - 2
_SUPPORT = 2.0


def _bicubic(x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    a = -0.5
    x = np.abs(x)
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    far = (((x - 5) * x + 8) * x - 4) * a
    out: npt.NDArray[np.float64] = np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))
    return out


I64 = npt.NDArray[np.int64]


def _coefficients(in_size: int, out_size: int) -> tuple[I64, I64]:
    """(first input index [out], fixed-point weights [out, ksize], zero past each count)."""
    scale = in_size / out_size
    filterscale = max(scale, 1.0)
    support = _SUPPORT * filterscale
    ksize = math.ceil(support) * 2 + 1
    center = (np.arange(out_size, dtype=np.float64) + 0.5) * scale
    xmin = np.maximum(np.trunc(center - support + 0.5), 0).astype(np.int64)
    xmax = np.minimum(np.trunc(center + support + 0.5), in_size).astype(np.int64) - xmin
    k = np.arange(ksize, dtype=np.int64)
    raw = _bicubic(((k[None, :] + xmin[:, None]) - center[:, None] + 0.5) * (1.0 / filterscale))
    raw = np.where(k[None, :] < xmax[:, None], raw, 0.0)
    total = np.zeros(out_size, dtype=np.float64)
    for col in range(ksize):  # summed in order, as Pillow does
        total += raw[:, col]
    raw = np.where(total[:, None] != 0.0, raw / np.where(total == 0.0, 1.0, total)[:, None], raw)
    fixed = np.trunc(raw * float(1 << _PRECISION_BITS) + np.where(raw < 0, -0.5, 0.5))
    return xmin, fixed.astype(np.int64)


def _resample_axis(src: npt.NDArray[np.uint8], out_size: int, axis: int) -> U8:
    in_size = src.shape[axis]
    xmin, weights = _coefficients(in_size, out_size)
    moved = np.moveaxis(src, axis, 0).astype(np.int64)
    acc = np.full((out_size, *moved.shape[1:]), 1 << (_PRECISION_BITS - 1), dtype=np.int64)
    extra = (1,) * (moved.ndim - 1)
    for col in range(weights.shape[1]):
        index = np.minimum(xmin + col, in_size - 1)
        acc += moved[index] * weights[:, col].reshape(out_size, *extra)
    out = np.clip(acc >> _PRECISION_BITS, 0, 255).astype(np.uint8)
    return np.ascontiguousarray(np.moveaxis(out, 0, axis))


def resize_bicubic(pixels: U8, width: int, height: int) -> U8:
    """PIL.Image.resize((width, height), BICUBIC) on [h, w, 3] uint8, byte for byte."""
    if not (1 <= width <= 65536 and 1 <= height <= 65536):
        raise ImageError(f"resize target {width}x{height} is out of range")
    out = pixels
    if width != pixels.shape[1]:
        out = _resample_axis(out, width, axis=1)
    if height != pixels.shape[0]:
        out = _resample_axis(out, height, axis=0)
    return out


def _round_half_away(x: float) -> int:
    return math.floor(x + 0.5) if x >= 0 else -math.floor(-x + 0.5)


def fit_and_pad(pixels: U8, width: int, height: int) -> U8:
    """Aspect-preserving resize centred on a grey canvas (PIL ImageOps.pad's rounding)."""
    h0, w0 = pixels.shape[0], pixels.shape[1]
    if (w0, h0) == (width, height):
        return pixels.copy()
    scale = min(np.float32(width) / np.float32(w0), np.float32(height) / np.float32(h0))
    new_w = min(_round_half_away(float(np.float32(w0) * scale)), width)
    new_h = min(_round_half_away(float(np.float32(h0) * scale)), height)
    if new_w < 1 or new_h < 1:
        raise ImageError(f"image is {w0}x{h0} pixels: too thin to fit {width}x{height}")
    inner = resize_bicubic(pixels, new_w, new_h)
    canvas = np.empty((height, width, 3), dtype=np.uint8)
    canvas[:] = np.array(PAD_COLOR, dtype=np.uint8)
    off_x = _round_half_away(float(np.float32(width - new_w) / np.float32(2.0)))
    off_y = _round_half_away(float(np.float32(height - new_h) / np.float32(2.0)))
    canvas[off_y : off_y + new_h, off_x : off_x + new_w] = inner
    return canvas


@dataclass(frozen=True)
class PreparedImage:
    """The encoder's input: normalized float32 planes [3, height, width]."""

    planes: F32
    grid_w: int
    grid_h: int

    @property
    def width(self) -> int:
        return int(self.planes.shape[2])

    @property
    def height(self) -> int:
        return int(self.planes.shape[1])


def normalize(pixels: U8, hp: VisionHParams) -> F32:
    """[h, w, 3] uint8 -> [3, h, w] float32: (x / 255 - mean) / std, in float32."""
    x = pixels.astype(np.float32) / np.float32(255.0)
    mean = np.array(hp.image_mean, dtype=np.float32)
    std = np.array(hp.image_std, dtype=np.float32)
    out: F32 = np.ascontiguousarray(((x - mean) / std).transpose(2, 0, 1))
    return out


def prepare_image(image: RGBImage, hp: VisionHParams) -> PreparedImage:
    plan = plan_resize(image.width, image.height, hp)
    if plan.stretch:
        if (plan.width, plan.height) == (image.width, image.height):
            sized = image.pixels
        else:
            sized = resize_bicubic(image.pixels, plan.width, plan.height)
    else:
        sized = fit_and_pad(image.pixels, plan.width, plan.height)
    return PreparedImage(normalize(sized, hp), plan.grid_w, plan.grid_h)
