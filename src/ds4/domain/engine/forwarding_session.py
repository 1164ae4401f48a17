"""ForwardingSession: a ComputeSession that hands every call to an inner one.

Wrappers that change how evaluations run (the StepGate's batching, the --power duty
cycle) subclass it and override only those calls; reading and replacing the session's
state always passes straight through.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ds4.ports.compute import ComputeSession, StateCheckpoint

F32 = npt.NDArray[np.float32]


class ForwardingSession:
    def __init__(self, inner: ComputeSession) -> None:
        self._inner = inner

    @property
    def ctx(self) -> int:
        return self._inner.ctx

    @property
    def tokens(self) -> Sequence[int]:
        return self._inner.tokens

    def prefill(
        self,
        tokens: Sequence[int],
        *,
        chunk: int = 0,
        progress: Callable[[int, int], None] | None = None,
        all_logits: bool = False,
    ) -> F32:
        return self._inner.prefill(tokens, chunk=chunk, progress=progress, all_logits=all_logits)

    def eval(self, token: int) -> F32:
        return self._inner.eval(token)

    def logits(self) -> F32:
        return self._inner.logits()

    def rewind(self, n: int) -> None:
        self._inner.rewind(n)

    def rewind_floor(self, n: int) -> int:
        return self._inner.rewind_floor(n)

    def invalidate(self) -> None:
        self._inner.invalidate()

    def payload(self) -> bytes:
        return self._inner.payload()

    def load_payload(self, data: bytes) -> None:
        self._inner.load_payload(data)

    def checkpoint(self) -> StateCheckpoint:
        return self._inner.checkpoint()

    def restore(self, checkpoint: StateCheckpoint) -> None:
        self._inner.restore(checkpoint)
