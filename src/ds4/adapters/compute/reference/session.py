"""ReferenceSession: the ComputeSession port over the numpy forward pass."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.forward import ChunkForward
from ds4.adapters.compute.reference.kv_state import LayerState
from ds4.adapters.compute.reference.payload import decode_payload, encode_payload
from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]


# Per-token history kept for exact rewinds: the last REWIND_HISTORY positions (about
# 0.5 GB across Flash's 43 layers); older rewinds recompute from a checkpoint or token 0.
REWIND_HISTORY = 1024


class ReferenceSession:
    def __init__(
        self, forward: ChunkForward, ctx: int, *, rewind_history: int = REWIND_HISTORY
    ) -> None:
        if ctx < 1:
            raise Ds4Error(f"context size must be at least 1, got {ctx}")
        self._history = max(1, rewind_history)
        self._fwd = forward
        self._hp = forward.hp
        self._ctx = ctx
        self.invalidate()

    # ---- state -------------------------------------------------------------

    @property
    def ctx(self) -> int:
        return self._ctx

    @property
    def tokens(self) -> Sequence[int]:
        return tuple(self._tokens)

    def invalidate(self) -> None:
        self._tokens: list[int] = []
        self._states = [LayerState(self._hp, il) for il in range(self._hp.n_layer)]
        self._logits: F32 | None = None
        self._restored_at: int | None = None  # token count of the last payload restore
        self._restored_logits: F32 | None = None

    def logits(self) -> F32:
        if self._logits is None:
            raise Ds4Error("no logits: the session holds no tokens")
        view = self._logits.view()  # read-only instead of a 0.5 MB copy per token
        view.flags.writeable = False
        return view

    # ---- evaluation --------------------------------------------------------

    def _check(self, tokens: Sequence[int]) -> npt.NDArray[np.int64]:
        ids = np.array(tokens, dtype=np.int64).reshape(-1)
        if len(self._tokens) + ids.size > self._ctx:
            raise Ds4Error(
                f"{len(self._tokens) + ids.size} tokens do not fit the context of {self._ctx}"
            )
        lo, hi = (int(ids[0]), int(ids[0])) if ids.size == 1 else (0, 0)
        if ids.size > 1:
            lo, hi = int(ids.min()), int(ids.max())
        if ids.size and (lo < 0 or hi >= self._hp.n_vocab):
            bad = int(ids[(ids < 0) | (ids >= self._hp.n_vocab)][0])
            raise Ds4Error(f"token id {bad} is outside the vocabulary (0..{self._hp.n_vocab - 1})")
        return ids

    def _run_chunk(self, ids: npt.NDArray[np.int64], all_logits: bool) -> F32:
        start = len(self._tokens)
        positions = np.arange(start, start + ids.size, dtype=np.int64)
        try:
            streams = self._fwd.run(ids, positions, self._states)
            logits = self._fwd.head(streams if all_logits else streams[-1:])
        except BaseException:
            for s in self._states:  # leave the state as it was before this chunk
                s.truncate(start)
            raise
        self._tokens.extend(ids.tolist())
        keep_from = len(self._tokens) - self._history
        if keep_from > 0 and len(self._tokens) % 32 < ids.size:  # amortised: every 32 tokens
            for s in self._states:
                s.trim(keep_from)
            at = self._restored_at
            if at is not None and not self._history_ok(at):
                self._restored_at = None  # its rows are gone: no longer a rewind target
        # a one-row result is ours alone: keep it without another 0.5 MB copy
        self._logits = logits[-1] if logits.shape[0] == 1 else logits[-1].copy()
        return logits

    def prefill(
        self,
        tokens: Sequence[int],
        *,
        chunk: int = 0,
        progress: Callable[[int, int], None] | None = None,
        all_logits: bool = False,
    ) -> F32:
        ids = self._check(tokens)
        total = int(ids.size)
        if total == 0:
            return np.zeros((0, self._hp.n_vocab), np.float32) if all_logits else self.logits()
        step = chunk if chunk > 0 else total
        pieces = []
        for begin in range(0, total, step):
            pieces.append(self._run_chunk(ids[begin : begin + step], all_logits))
            if progress is not None:
                progress(min(begin + step, total), total)
        if all_logits:
            return np.concatenate(pieces).astype(np.float32)
        return self.logits()

    def eval(self, token: int) -> F32:
        self._run_chunk(self._check((token,)), False)  # the decode step, without prefill's loop
        return self.logits()

    # ---- rewind ------------------------------------------------------------

    def _history_ok(self, m: int) -> bool:
        """Whether the kept per-token history rebuilds the state after m tokens exactly
        (a restore or a trim leaves only recent rows: each array's base)."""
        for s in self._states:
            if max(0, m + 1 - self._hp.n_swa) < s.raw.base:
                return False
            for comp in s.compressors():
                need = comp.frontier_start(m)
                if need < m and need < comp.kv.base:
                    return False
        return True

    def rewind_floor(self, n: int) -> int:
        total = len(self._tokens)
        m = max(0, min(n, total))
        while m not in (0, total, self._restored_at) and not self._history_ok(m - 1):
            m -= 1
        return m

    def rewind(self, n: int) -> None:
        """Drop tokens after n; the last kept token is re-evaluated to restore its logits."""
        total = len(self._tokens)
        if n < 0 or n > total or self.rewind_floor(n) != n:
            raise Ds4Error(f"cannot rewind exactly to {n} tokens (floor {self.rewind_floor(n)})")
        if n == total:
            return
        if n == 0:
            self.invalidate()
            return
        if n == self._restored_at:  # the restored state itself, logits from the payload
            for s in self._states:
                s.truncate(n)
            del self._tokens[n:]
            self._logits = self._restored_logits
            return
        last = self._tokens[n - 1]
        for s in self._states:
            s.truncate(n - 1)
        del self._tokens[n - 1 :]
        self._run_chunk(np.array([last], dtype=np.int64), False)

    # ---- snapshots ---------------------------------------------------------

    def payload(self) -> bytes:
        logits = (
            self._logits if self._logits is not None else np.zeros(self._hp.n_vocab, np.float32)
        )
        return encode_payload(self._hp, self._ctx, self._tokens, logits, self._states)

    def load_payload(self, data: bytes) -> None:
        states = [LayerState(self._hp, il) for il in range(self._hp.n_layer)]
        decoded = decode_payload(self._hp, self._ctx, bytes(data), states)
        self._states = states
        self._tokens = decoded.tokens
        self._logits = decoded.logits if decoded.tokens else None
        self._restored_at = len(decoded.tokens)
        self._restored_logits = self._logits
