"""The compressor frontier of docs/reference/model.md §3.4, §5.3, as every backend keeps and
snapshots it.

A compressor pools `ratio` consecutive positions into one row; ratio 4 also reads the
previous window (overlap). Between emissions the state that matters is the frontier:
the per-token inputs (kv projection, score = gate + ape) of the current, unfinished
window, plus the previous window for ratio 4. A snapshot stores the frontier in its
canonical slot layout; a backend that keeps per-token inputs rebuilds them from it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
EMPTY_SCORE = -1.0e30  # an unused slot's score: it never wins the pooling max

# (start, end) -> the per-token input rows [start, end) of one kind (kv or score)
RowSpan = Callable[[int, int], F32]


def lanes(ratio: int) -> int:
    """Values per token and row width: ratio 4 keeps two lanes (previous, current)."""
    return 2 if ratio == 4 else 1


def frontier_slots(ratio: int) -> int:
    return 2 * ratio if ratio == 4 else ratio


def frontier_start(ratio: int, n_tokens: int) -> int:
    """First position whose inputs the frontier after n_tokens holds."""
    if ratio == 4:
        return max(0, 4 * (n_tokens // 4) - 4)
    return n_tokens - n_tokens % ratio


def used_slots(ratio: int, n_tokens: int) -> npt.NDArray[np.bool_]:
    """Which slots the frontier after n_tokens fills; the others hold the cleared values
    (kv 0, score EMPTY_SCORE) that frontier_from_inputs writes."""
    used = np.zeros(frontier_slots(ratio), dtype=np.bool_)
    base = n_tokens - n_tokens % ratio
    if ratio == 4 and base >= 4:
        used[0:4] = True
    first = 4 if ratio == 4 else 0
    used[first : first + n_tokens - base] = True
    return used


def frontier_from_inputs(
    ratio: int, width: int, n_tokens: int, kv: RowSpan, score: RowSpan
) -> tuple[F32, F32]:
    """The canonical (S_kv, S_sc) after n_tokens from the per-token inputs; unused
    slots are cleared (kv 0, score EMPTY_SCORE)."""
    slots = frontier_slots(ratio)
    s_kv = np.zeros((slots, width), dtype=np.float32)
    s_sc = np.full((slots, width), EMPTY_SCORE, dtype=np.float32)
    base = n_tokens - n_tokens % ratio
    if ratio == 4 and base >= 4:
        s_kv[0:4], s_sc[0:4] = kv(base - 4, base), score(base - 4, base)
    first = 4 if ratio == 4 else 0
    cur = n_tokens - base
    s_kv[first : first + cur] = kv(base, n_tokens)
    s_sc[first : first + cur] = score(base, n_tokens)
    return s_kv, s_sc


def inputs_from_frontier(ratio: int, n_tokens: int, s_kv: F32, s_sc: F32) -> tuple[int, F32, F32]:
    """(first position, kv rows, score rows): the per-token inputs the frontier after
    n_tokens holds, to write back at that position (earlier inputs are not needed)."""
    base = n_tokens - n_tokens % ratio
    cur = n_tokens - base
    if ratio == 4 and base >= 4:
        kv = np.concatenate([s_kv[0:4], s_kv[4 : 4 + cur]])
        sc = np.concatenate([s_sc[0:4], s_sc[4 : 4 + cur]])
        return base - 4, kv, sc
    first = 4 if ratio == 4 else 0
    return base, s_kv[first : first + cur], s_sc[first : first + cur]
