"""Speculative decoding: a draft model proposes the next tokens, the main model checks
them all in one batched evaluation (docs/mtp.md).

Two levels, as for compute: a backend implements `DraftModel`, the MTP block, and its
per-sequence `DraftState` (the block's own raw-window cache, rows by absolute
position); the domain's MtpDrafter turns them into the `Drafter` a decode loop asks
for proposals.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


class DraftState(Protocol):
    """The MTP block's window cache of one sequence: one row per position in
    [base, length); a query at p attends to the rows max(base, p - window + 1) .. p."""

    @property
    def base(self) -> int: ...

    @property
    def length(self) -> int: ...

    def restart(self, position: int) -> None:
        """Drop every row; the next row goes at `position` (nothing before it is seen)."""
        ...

    def truncate(self, n: int) -> None:
        """Drop the rows from position n on (never below base)."""
        ...

    def trim(self, keep_from: int) -> None:
        """Forget rows before keep_from (no later query reads them)."""
        ...

    def advance(self, hidden: F32, tokens: I64) -> F32:
        """Evaluate rows at positions length, length + 1, ...: row t pairs the final HC
        streams hidden[t] (S, D) of position length + t with tokens[t], the token that
        follows it. Returns the block's output streams (k, S, D). On error the state is
        as it was."""
        ...

    def logits(self, streams: F32) -> F32:
        """The block's logits (k, V) for output streams (k, S, D)."""
        ...


class DraftModel(Protocol):
    @property
    def window(self) -> int:
        """Rows a query sees (the main model's sliding window)."""
        ...

    def new_state(self) -> DraftState: ...


class Drafter(Protocol):
    """Proposals for one sequence (the session it was built on)."""

    def draft(self, token: int, limit: int) -> list[int]:
        """Up to `limit` tokens likely to follow the session's tokens and then `token`
        (sampled, not yet evaluated); [] when there is nothing to draft from."""
        ...

    def settle(self, proposed: int, accepted: int) -> None:
        """How many of the last proposals the main model accepted (statistics)."""
        ...
