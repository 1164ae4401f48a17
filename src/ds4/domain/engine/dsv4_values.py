"""Value checks of a decoded DSV4 payload (docs/adr/0007-kv-file-integrity.md).

Intact bytes can still hold a state no session could have reached (a writer's bug, or a
damaged state saved before these checks existed); restoring it would change every
answer after it. So the decoder checks every float, vectorised (a Flash payload is
hundreds of MB), against what a session really keeps (docs/reference/model.md §3.4, §5.1):

- cached rows (raw window, compressed attention and indexer rows) are f16-rounded when
  stored: finite and |v| <= 65504, the largest f16;
- the logits and the compressor frontier's per-token inputs: finite and |v| <= 1e29,
  so no used slot reads as the pooling's empty mark (<= -5e29) and no pooled sum of
  them overflows f32;
- unused frontier slots hold exactly what `frontier_from_inputs` clears them to
  (kv 0, score EMPTY_SCORE).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from ds4.domain.engine.compressor_frontier import EMPTY_SCORE, used_slots
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]
MAX_ROW = 65504.0  # the largest finite f16
MAX_STATE = 1e29


def _within(values: F32, bound: float) -> bool:
    """Every value finite and within ±bound (two passes, no temporaries: NaN propagates
    through min/max and fails both comparisons)."""
    if values.size == 0:
        return True
    return bool(-bound <= values.min() and values.max() <= bound)


def check_rows(what: str, rows: F32) -> None:
    if not _within(rows, MAX_ROW):
        raise Ds4Error(f"snapshot {what} hold a value that is not a finite f16")


def check_state(what: str, values: F32) -> None:
    if not _within(values, MAX_STATE):
        raise Ds4Error(f"snapshot {what} hold a value that is not finite or beyond ±{MAX_STATE:g}")


def check_frontier(what: str, ratio: int, n_tokens: int, s_kv: F32, s_sc: F32) -> None:
    used = used_slots(ratio, n_tokens)
    check_state(f"{what} frontier inputs", s_kv[used])
    check_state(f"{what} frontier scores", s_sc[used])
    if (s_kv[~used] != 0).any() or (s_sc[~used] != EMPTY_SCORE).any():
        raise Ds4Error(f"snapshot {what} frontier has values in slots it does not use")
