"""A tiny ComputeSession whose logits are a deterministic function of the token history,
and a ModelRunner (FakeRunner) that makes them.

By default the logits after a history are pseudo-random but fixed (seeded by a CRC
of the ids). A `script(history)` can instead name the next token and how strongly
(`Scripted`), so tests make a fake model say exactly what they need. The session
records what it evaluated, so tests can count reuse, and `rewind_step` models an
engine that can only rewind exactly to multiples of a step (compressed rows).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.domain.engine.state_session import eval_one_by_one
from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.model.presets import DEFAULT_TINY_SHAPE, TINY_SHAPES
from ds4.ports.compute import ComputeSession

_MAGIC = b"FAKEDSV4"


@dataclass(frozen=True)
class Scripted:
    """The next token and its logit margin over every other token (all 0)."""

    token: int
    margin: float = 30.0


Script = Callable[[Sequence[int]], Scripted | None]


@dataclass(frozen=True)
class FakeCheckpoint:
    owner: object
    tokens: tuple[int, ...]
    logits: npt.NDArray[np.float32] | None
    floor: Callable[[int, int], int]  # (total, n) -> the exact floor

    @property
    def nbytes(self) -> int:
        return 8 * len(self.tokens)

    def rewind_floor(self, n: int) -> int:
        return self.floor(len(self.tokens), n)


class FakeComputeSession:
    def __init__(
        self,
        *,
        vocab: int = 300,
        ctx: int = 64,
        script: Script | None = None,
        rewind_step: int = 1,
        rewind_history: int | None = None,
        fail_after: int | None = None,
        owner: object = None,
    ) -> None:
        """`fail_after`: eval raises Ds4Error once the state holds that many tokens;
        `rewind_history`: rewinds reach back at most that many tokens from the end (a
        real state's bounded history); `owner` (default: the session itself) scopes
        checkpoints, as a runner does."""
        self.vocab = vocab
        self._ctx = ctx
        self.script = script
        self.rewind_step = rewind_step
        self.rewind_history = rewind_history
        self.fail_after = fail_after
        self.owner = self if owner is None else owner
        self._tokens: list[int] = []
        self._logits: npt.NDArray[np.float32] | None = None
        self.evaluated: list[int] = []  # every token evaluated, in order
        self.prefill_calls: list[int] = []  # lengths passed to prefill

    @property
    def ctx(self) -> int:
        return self._ctx

    @property
    def tokens(self) -> Sequence[int]:
        return tuple(self._tokens)

    def logits_after(self, history: Sequence[int]) -> npt.NDArray[np.float32]:
        if self.script is not None:
            step = self.script(history)
            if step is not None:
                logits = np.zeros(self.vocab, dtype=np.float32)
                logits[step.token] = step.margin
                return logits
        seed = zlib.crc32(np.asarray(history, dtype=np.int64).tobytes())
        rng = np.random.default_rng(seed)
        return (rng.standard_normal(self.vocab) * 3).astype(np.float32)

    def _append(self, token: int) -> npt.NDArray[np.float32]:
        if not 0 <= token < self.vocab:
            raise Ds4Error(f"token id {token} out of range")
        if len(self._tokens) >= self._ctx:
            raise Ds4Error("context is full")
        if self.fail_after is not None and len(self._tokens) >= self.fail_after:
            raise Ds4Error("fake engine failure")
        self._tokens.append(token)
        self.evaluated.append(token)
        self._logits = self.logits_after(self._tokens)
        return self._logits

    def prefill(
        self,
        tokens: Sequence[int],
        *,
        chunk: int = 0,
        progress: Callable[[int, int], None] | None = None,
        all_logits: bool = False,
    ) -> npt.NDArray[np.float32]:
        if len(tokens) + len(self._tokens) > self._ctx:
            raise Ds4Error("prompt exceeds context")
        if any(not 0 <= t < self.vocab for t in tokens):
            raise Ds4Error("token id out of range")
        self.prefill_calls.append(len(tokens))
        rows = []
        step = chunk if chunk > 0 else max(len(tokens), 1)
        for start in range(0, len(tokens), step):
            for token in tokens[start : start + step]:
                rows.append(self._append(token))
            if progress is not None:
                progress(min(start + step, len(tokens)), len(tokens))
        if all_logits:
            return np.stack(rows)
        return self.logits()

    def eval(self, token: int) -> npt.NDArray[np.float32]:
        return self._append(token)

    def logits(self) -> npt.NDArray[np.float32]:
        if self._logits is None or not self._tokens:
            raise Ds4Error("no logits: the state is empty")
        return self._logits

    def rewind_floor(self, n: int) -> int:
        return self._floor(len(self._tokens), n)

    def _floor(self, total: int, n: int) -> int:
        if n >= total:
            return total
        if self.rewind_history is not None and n < total - self.rewind_history:
            return 0
        return n - n % self.rewind_step

    def rewind(self, n: int) -> None:
        assert self.rewind_floor(n) == n, "rewind to an unsafe point"
        del self._tokens[n:]
        self._logits = None  # like a real engine: the logits after n are not kept

    def invalidate(self) -> None:
        self._tokens.clear()
        self._logits = None

    def payload(self) -> bytes:
        return _MAGIC + json.dumps(self._tokens).encode()

    def load_payload(self, data: bytes) -> None:
        """Like a real engine, any malformed payload is a Ds4Error, never another error."""
        if not data.startswith(_MAGIC):
            raise Ds4Error("bad payload magic")
        try:
            tokens = json.loads(data[len(_MAGIC) :])
        except ValueError:
            raise Ds4Error("bad payload: not a JSON token list") from None
        if not isinstance(tokens, list) or len(tokens) >= self._ctx:
            raise Ds4Error("bad payload: not a token list that fits the context")
        if any(type(t) is not int or not 0 <= t < self.vocab for t in tokens):
            raise Ds4Error("bad payload: token id out of range")
        self._tokens = list(tokens)
        self._logits = self.logits_after(self._tokens) if self._tokens else None

    def checkpoint(self) -> FakeCheckpoint:
        return FakeCheckpoint(self.owner, tuple(self._tokens), self._logits, self._floor)

    def restore(self, checkpoint: object) -> None:
        if not isinstance(checkpoint, FakeCheckpoint) or checkpoint.owner is not self.owner:
            raise Ds4Error("checkpoint of another runner")
        self._tokens = list(checkpoint.tokens)
        self._logits = checkpoint.logits


class FakeRunner:
    """A ModelRunner whose sessions are FakeComputeSessions (the tiny model's shape);
    `sessions` keeps each one made, so tests can look at what it evaluated."""

    def __init__(
        self,
        *,
        vocab: int = 300,
        script: Script | None = None,
        rewind_step: int = 1,
        rewind_history: int | None = None,
    ):
        self.vocab = vocab
        self.script = script
        self.rewind_step = rewind_step
        self.rewind_history = rewind_history
        self.sessions: list[FakeComputeSession] = []

    @property
    def hparams(self) -> DeepSeekV4HParams:
        return TINY_SHAPES[DEFAULT_TINY_SHAPE]

    @property
    def routed_quant_bits(self) -> int:
        return 2

    def new_session(self, ctx: int) -> FakeComputeSession:
        session = FakeComputeSession(
            vocab=self.vocab,
            ctx=ctx,
            script=self.script,
            rewind_step=self.rewind_step,
            rewind_history=self.rewind_history,
            owner=self,
        )
        self.sessions.append(session)
        return session

    @property
    def batches_in_one_pass(self) -> bool:
        return False

    def eval_batch(
        self, sessions: Sequence[ComputeSession], tokens: Sequence[Sequence[int]]
    ) -> list[npt.NDArray[np.float32]]:
        return eval_one_by_one(sessions, tokens)
