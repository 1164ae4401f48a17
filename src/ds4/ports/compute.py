"""Compute: a model runner and the per-sequence state it evaluates tokens into."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from ds4.domain.model.hparams import DeepSeekV4HParams


class ComputeSession(Protocol):
    """Engine-owned state of one token sequence (KV rows, compressor frontiers, logits)."""

    @property
    def ctx(self) -> int:
        """Capacity in tokens."""
        ...

    @property
    def tokens(self) -> Sequence[int]:
        """The tokens evaluated into the state, in order."""
        ...

    def prefill(
        self,
        tokens: Sequence[int],
        *,
        chunk: int = 0,
        progress: Callable[[int, int], None] | None = None,
        all_logits: bool = False,
    ) -> npt.NDArray[np.float32]:
        """Append tokens and return logits.

        chunk > 0 evaluates in chunks of that many tokens; progress(done, total) runs
        after each chunk and may raise to cancel, leaving the state consistent at the
        last finished chunk. Returns the logits after the last token [V], or after
        every appended token [n, V] with all_logits. Raises Ds4Error if
        len(tokens) + current > ctx or an id is out of range.
        """
        ...

    def eval(self, token: int) -> npt.NDArray[np.float32]:
        """Append one token and return its logits [V]."""
        ...

    def logits(self) -> npt.NDArray[np.float32]:
        """Logits after the last token (Ds4Error when the state is empty)."""
        ...

    def rewind_floor(self, n: int) -> int:
        """Largest m <= n to which rewind(m) is exact (0 if none)."""
        ...

    def rewind(self, n: int) -> None:
        """Drop the tokens after n (requires rewind_floor(n) == n)."""
        ...

    def invalidate(self) -> None:
        """Empty the state."""
        ...

    def payload(self) -> bytes:
        """The DSV4 snapshot payload (formats.md §5), logits included."""
        ...

    def load_payload(self, data: bytes) -> None:
        """Restore from a payload; Ds4Error on any validation failure (formats.md §5.4)."""
        ...


class ModelRunner(Protocol):
    @property
    def hparams(self) -> DeepSeekV4HParams: ...

    @property
    def routed_quant_bits(self) -> int:
        """4 if layer 0's routed gate experts are Q4_K, else 2 (formats.md)."""
        ...

    def new_session(self, ctx: int) -> ComputeSession: ...
