"""IQ2_XXS quantizer (docs/reference/formats.md §6.6), numpy reference.

Each 256-value block is 8 groups of 32; each group is 4 runs of 8 values that share
one grid point (8 magnitudes from {1, 3, 5} x scale in the odd-integer domain) and
carry 7 sign bits (the 8th restores even parity). The search picks per group the
scale whose grid-constrained codes best fit the importance-weighted magnitudes.
"""

from __future__ import annotations

import functools
import itertools

import numpy as np
import numpy.typing as npt

from ds4.adapters.quant.numpy_quantize_search import (
    f16_bytes,
    make_qp,
    nearest_clamped,
    seq_argmin,
    seq_max,
    seq_sum,
)
from ds4.domain.gguf.iq2xxs_tables import IQ2XXS_LEVELS

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]
U8 = npt.NDArray[np.uint8]
f32 = np.float32

KEY_SPACE = 43692  # keys sum(level_i << 2i) with every level in 0..2 are all below this
_SHIFTS = 2 * np.arange(8, dtype=np.int64)


@functools.cache
def _tables() -> tuple[I64, I64, I64, F32]:
    """(key -> grid index or -1, key -> padded neighbour list, grid levels, grid odd values)."""
    levels = np.array(IQ2XXS_LEVELS, dtype=np.int64)
    grid_levels = (levels[:, None] >> _SHIFTS) & 3  # (256, 8)
    grid_odd = 2 * grid_levels + 1
    key_to_index = np.full(KEY_SPACE, -1, dtype=np.int64)
    key_to_index[levels] = np.arange(256)
    combos = np.array(list(itertools.product(range(3), repeat=8)), dtype=np.int64)
    keys = (combos << _SHIFTS).sum(axis=1)
    off = key_to_index[keys] < 0
    odd = 2 * combos[off] + 1
    dist = ((odd[:, None, :] - grid_odd[None, :, :]) ** 2).sum(axis=2)  # (m, 256)
    order = np.argsort(dist, axis=1, kind="stable")  # by (distance, index)
    ranked = np.take_along_axis(dist, order, axis=1)
    second = np.where(ranked > ranked[:, :1], ranked, np.iinfo(np.int64).max).min(axis=1)
    keep = ranked <= second[:, None]  # the two smallest distinct distances: a prefix
    width = int(keep.sum(axis=1).max())
    neighbours = np.full((KEY_SPACE, width), -1, dtype=np.int64)
    neighbours[keys[off]] = np.where(keep[:, :width], order[:, :width], -1)
    return key_to_index, neighbours, grid_levels, grid_odd.astype(np.float32)


def _grid_codes(xa: F32, wa: F32, inv: F32, scale: F32) -> tuple[F32, I64]:
    """Levels (g, 4, 8) and grid indices (g, 4) for magnitudes xa at 1/inv = scale.

    Round each value to a level; a run whose levels are not a grid point takes the
    neighbour with the least weighted error sum(wa * (scale*odd - xa)^2).
    """
    key_to_index, neighbours, grid_levels, grid_odd = _tables()
    la = nearest_clamped(f32(0.5) * (inv[:, None, None] * xa - f32(1)), 0, 2)
    keys = (la.astype(np.int64) << _SHIFTS).sum(axis=2)
    index = key_to_index[keys]
    gi, ki = np.nonzero(index < 0)
    if gi.size:
        cand = neighbours[keys[gi, ki]]  # (m, width), -1 padded
        valid = cand >= 0
        odd = grid_odd[np.where(valid, cand, 0)]  # (m, width, 8)
        x, w, s = xa[gi, ki][:, None, :], wa[gi, ki][:, None, :], scale[gi][:, None]
        diff = s * odd[:, :, 0] - x[:, :, 0]
        err = w[:, :, 0] * diff * diff
        for i in range(1, 8):
            diff = s * odd[:, :, i] - x[:, :, i]
            err = err + w[:, :, i] * diff * diff
        err = np.where(valid, err, np.float32(np.inf)).astype(np.float32)
        pick = seq_argmin(err)
        chosen = cand[np.arange(gi.size), pick]
        index[gi, ki] = chosen
        la[gi, ki] = grid_levels[chosen].astype(np.float32)
    return la, index


def _fit(w: F32, xa: F32, la: F32) -> tuple[F32, F32]:
    odd = (f32(2) * la + f32(1)).reshape(la.shape[0], 32)
    return seq_sum(w * xa * odd), seq_sum(w * odd * odd)


def quantize_iq2_xxs(blocks: F32, importance: F32) -> U8:
    n = blocks.shape[0]
    groups = n * 8
    with np.errstate(all="ignore"):
        sigma2 = seq_sum(blocks * blocks) / f32(256)
        weights = importance * np.sqrt(sigma2[:, None] + blocks * blocks)
        x = blocks.reshape(groups, 4, 8)
        w4 = weights.reshape(groups, 4, 8)
        wa = np.sqrt(w4)
        w = w4.reshape(groups, 32)

        # Signs: 7 stored bits per run of 8, parity fixed by flipping the cheapest value.
        xa = np.abs(x)
        bits = ((x < 0).astype(np.int64) << np.arange(8)).sum(axis=2)  # (g, 4)
        odd_parity = np.bitwise_count(bits.astype(np.uint8)) & 1 == 1
        cheapest = seq_argmin(w4 * x * x)
        flip = odd_parity[:, :, None] & (np.arange(8) == cheapest[:, :, None])
        xa = np.where(flip, -xa, xa)
        signs = (bits ^ np.where(odd_parity, 1 << cheapest, 0)) & 127
        xa32 = xa.reshape(groups, 32)

        biggest = seq_max(xa32[:, 1:], xa32[:, 0])
        scale, _ = make_qp(xa32, w, 4)
        eff = f32(3) * scale
        skip = (biggest < f32(1e-15)) | ~(eff > f32(0))

        best = np.zeros(groups, dtype=np.float32)
        index = np.zeros((groups, 4), dtype=np.int64)
        for t in range(-6, 7):
            inv = (f32(5) + f32(0.1) * f32(t)) / eff
            la, idx = _grid_codes(xa, wa, inv, f32(1) / inv)
            sqx, sq2 = _fit(w, xa32, la)
            take = (sq2 > f32(0)) & (sqx * sqx > best * sq2)
            scale = np.where(take, sqx / sq2, scale)
            best = np.where(take, scale * sqx, best)
            index = np.where(take[:, None], idx, index)

        positive = scale > f32(0)
        la, idx = _grid_codes(xa, wa, f32(1) / scale, scale)
        sqx, sq2 = _fit(w, xa32, la)
        scale = np.where(positive & (sq2 > f32(0)), sqx / sq2, scale)
        index = np.where(positive[:, None], idx, index)
        negative = scale < f32(0)
        scale = np.where(negative, -scale, scale)
        signs = np.where(negative[:, None], ~signs & 127, signs)
        scale = np.where(skip, f32(0), scale).astype(np.float32)
        index = np.where(skip[:, None], 0, index)
        signs = np.where(skip[:, None], 0, signs)

        group_scale = scale.reshape(n, 8)
        max_scale = seq_max(group_scale, f32(0))
        d = (max_scale / f32(31)).astype(np.float32)
        ls = nearest_clamped(f32(0.5) * (group_scale / d[:, None] - f32(1)), 0, 15)
    grid_word = (index.astype(np.uint32) << (8 * np.arange(4, dtype=np.uint32))).sum(axis=1)
    sign_word = (signs.astype(np.uint32) << (7 * np.arange(4, dtype=np.uint32))).sum(axis=1)
    sign_word = sign_word | (ls.reshape(groups).astype(np.uint32) << 28)
    words = np.stack([grid_word, sign_word], axis=1).reshape(n, 16).astype(np.uint32)
    zero = max_scale == f32(0)
    words[zero] = 0
    d = np.where(zero, f32(0), d).astype(np.float32)
    code_bytes = np.ascontiguousarray(words.astype("<u4")).view(np.uint8)
    return np.concatenate([f16_bytes(d), code_bytes], axis=1).astype(np.uint8)
