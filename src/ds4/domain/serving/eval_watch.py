"""A ComputeSession that tells the worker after each decoded token (for continued saves).

The generation loop only sees the domain Session; continued KV checkpoints must be
written at exact positions while decoding (server.md §6.6, "before each decode
step"), so the worker wraps the engine's session and sets `on_eval` for one decode.
Everything else is delegated unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ds4.ports.compute import ComputeSession, StateCheckpoint


class EvalWatch:
    def __init__(self, inner: ComputeSession) -> None:
        self.inner = inner
        self.on_eval: Callable[[int], None] | None = None

    @property
    def ctx(self) -> int:
        return self.inner.ctx

    @property
    def tokens(self) -> Sequence[int]:
        return self.inner.tokens

    def prefill(
        self,
        tokens: Sequence[int],
        *,
        chunk: int = 0,
        progress: Callable[[int, int], None] | None = None,
        all_logits: bool = False,
    ) -> npt.NDArray[np.float32]:
        return self.inner.prefill(tokens, chunk=chunk, progress=progress, all_logits=all_logits)

    def eval(self, token: int) -> npt.NDArray[np.float32]:
        logits = self.inner.eval(token)
        if self.on_eval is not None:
            self.on_eval(token)
        return logits

    def logits(self) -> npt.NDArray[np.float32]:
        return self.inner.logits()

    def rewind_floor(self, n: int) -> int:
        return self.inner.rewind_floor(n)

    def rewind(self, n: int) -> None:
        self.inner.rewind(n)

    def invalidate(self) -> None:
        self.inner.invalidate()

    def payload(self) -> bytes:
        return self.inner.payload()

    def load_payload(self, data: bytes) -> None:
        self.inner.load_payload(data)

    def checkpoint(self) -> StateCheckpoint:
        return self.inner.checkpoint()

    def restore(self, checkpoint: StateCheckpoint) -> None:
        self.inner.restore(checkpoint)
