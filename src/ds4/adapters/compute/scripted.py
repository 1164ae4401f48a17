"""`--backend scripted`: a compute double that plays back scripted model outputs.

The n-th generation request produces the n-th string of the script verbatim as the
model's raw output (it may hold <think>…</think> and DSML tool-call blocks), cycling
when the list runs out. The string is tokenized with the real tokenizer; the logits
after each step put all mass on the next scripted token, then on EOS. So clients see
real tokenization, template, DSML decoding, streaming and API mapping — only the
weights are replaced. A new request starts when a prompt is prefilled after tokens
were generated (or for the first time), or when a payload or checkpoint is restored.
Like the real backends it rewinds exactly only within its last 1024 positions (or to
a restored state's end), so the server's cache decisions are the ones a model gets.
"""

from __future__ import annotations

import json
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from ds4.domain.engine.state_session import REWIND_HISTORY, eval_one_by_one
from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.model.presets import DEFAULT_TINY_SHAPE, TINY_SHAPES
from ds4.ports.compute import ComputeSession, StateCheckpoint
from ds4.ports.tokenizer import Tokenizer


def load_script(path: str) -> list[str]:
    """A JSON list of strings (at least one)."""
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise Ds4Error(f"cannot read script {path}: {error}") from None
    if not isinstance(value, list) or not value or not all(isinstance(s, str) for s in value):
        raise Ds4Error(f"script {path} must be a non-empty JSON list of strings")
    return value


_PAYLOAD_MAGIC = b"SCR1"


class _Script:
    """The shared playback cursor: which output the next request gets."""

    def __init__(self, outputs: Sequence[str], tokenizer: Tokenizer) -> None:
        self._outputs = [tuple(tokenizer.encode(s)) for s in outputs]
        self._next = 0
        self._lock = threading.Lock()

    def take(self) -> tuple[int, ...]:
        with self._lock:
            tokens = self._outputs[self._next % len(self._outputs)]
            self._next += 1
            return tokens


@dataclass(frozen=True)
class _ScriptedCheckpoint:
    owner: object
    tokens: tuple[int, ...]
    kept_from: int
    restored_at: int | None

    @property
    def nbytes(self) -> int:
        return 4 * len(self.tokens)

    def rewind_floor(self, n: int) -> int:
        return _rewind_floor(len(self.tokens), self.kept_from, self.restored_at, n)


def _rewind_floor(total: int, kept_from: int, restored_at: int | None, n: int) -> int:
    """A real state's rule, with its history as one bound: the end, a point after
    `kept_from` (what the bounded history still rebuilds), a restored payload's end, or 0."""
    m = max(0, min(n, total))
    if m in (0, total, restored_at) or m - 1 >= kept_from:
        return m
    return restored_at if restored_at is not None and restored_at <= m else 0


class ScriptedSession:
    def __init__(
        self,
        ctx: int,
        script: _Script,
        vocab: int,
        eos: int,
        delay: Callable[[], None],
        rewind_history: int = REWIND_HISTORY,
    ) -> None:
        """Rewinds are exact only within the last `rewind_history` positions, as the real
        backends' are (StateSession), so the cache decisions a client sees are theirs."""
        self._ctx = ctx
        self._script = script
        self._vocab = vocab
        self._eos = eos
        self._delay = delay
        self._history = max(1, rewind_history)
        self._tokens: list[int] = []
        self._kept_from = 0  # positions before it are no longer rewound to exactly
        self._restored_at: int | None = None  # the token count of the last restore
        self._output: tuple[int, ...] = ()
        self._emitted = 0  # output tokens evaluated since the current request began
        self._generating = True  # the next prefill starts a new request

    @property
    def ctx(self) -> int:
        return self._ctx

    @property
    def tokens(self) -> Sequence[int]:
        return self._tokens

    def _check(self, tokens: Sequence[int]) -> None:
        if len(self._tokens) + len(tokens) > self._ctx:
            raise Ds4Error("prompt exceeds context")
        if any(not 0 <= t < self._vocab for t in tokens):
            raise Ds4Error("token id out of range")

    def _append(self, tokens: Sequence[int]) -> None:
        self._tokens.extend(tokens)
        self._kept_from = max(self._kept_from, len(self._tokens) - self._history)

    def _next_logits(self) -> npt.NDArray[np.float32]:
        logits = np.full(self._vocab, -1e30, dtype=np.float32)
        target = self._output[self._emitted] if self._emitted < len(self._output) else self._eos
        logits[target] = 0.0
        return logits

    def prefill(
        self,
        tokens: Sequence[int],
        *,
        chunk: int = 0,
        progress: Callable[[int, int], None] | None = None,
        all_logits: bool = False,
    ) -> npt.NDArray[np.float32]:
        self._check(tokens)
        if self._generating:
            self._output, self._emitted, self._generating = self._script.take(), 0, False
        step = chunk if chunk > 0 else max(len(tokens), 1)
        for start in range(0, len(tokens), step):
            self._append(tokens[start : start + step])
            if progress is not None:
                progress(min(start + step, len(tokens)), len(tokens))
        logits = self._next_logits()
        return np.tile(logits, (len(tokens), 1)) if all_logits else logits

    def eval(self, token: int) -> npt.NDArray[np.float32]:
        self._check([token])
        self._delay()
        self._append([token])
        self._emitted += 1
        self._generating = True
        return self._next_logits()

    def logits(self) -> npt.NDArray[np.float32]:
        if not self._tokens:
            raise Ds4Error("the state is empty")
        return self._next_logits()

    def rewind_floor(self, n: int) -> int:
        return _rewind_floor(len(self._tokens), self._kept_from, self._restored_at, n)

    def rewind(self, n: int) -> None:
        if self.rewind_floor(n) != n:
            raise Ds4Error(f"cannot rewind exactly to {n} tokens")
        del self._tokens[n:]
        if self._restored_at is not None and self._restored_at > n:
            self._restored_at = None

    def invalidate(self) -> None:
        self._tokens.clear()
        self._kept_from, self._restored_at = 0, None

    def payload(self) -> bytes:
        """`SCR1`, u32 ctx, u32 count, u32 tokens[count] (a stand-in for DSV4)."""
        n = len(self._tokens)
        return _PAYLOAD_MAGIC + struct.pack(f"<II{n}I", self._ctx, n, *self._tokens)

    def load_payload(self, data: bytes) -> None:
        """Restore the tokens; a restored state begins a new request (like a prefill)."""
        if len(data) < 12 or data[:4] != _PAYLOAD_MAGIC:
            raise Ds4Error("bad scripted payload: wrong magic or too short")
        ctx, count = struct.unpack_from("<II", data, 4)
        if len(data) != 12 + 4 * count:
            raise Ds4Error("bad scripted payload: length does not match the token count")
        if ctx > self._ctx or count >= self._ctx:
            raise Ds4Error("bad scripted payload: written for a larger context")
        tokens = list(struct.unpack_from(f"<{count}I", data, 12))
        if any(t >= self._vocab for t in tokens):
            raise Ds4Error("bad scripted payload: token id out of range")
        self._tokens = tokens
        self._kept_from = self._restored_at = len(tokens)
        self._begin_request()

    def _begin_request(self) -> None:
        """A restored state begins a new request (like a prefill after generating)."""
        if self._generating:
            self._output, self._emitted, self._generating = self._script.take(), 0, False

    def checkpoint(self) -> StateCheckpoint:
        return _ScriptedCheckpoint(
            self._script, tuple(self._tokens), self._kept_from, self._restored_at
        )

    def restore(self, checkpoint: StateCheckpoint) -> None:
        if not isinstance(checkpoint, _ScriptedCheckpoint) or checkpoint.owner is not self._script:
            raise Ds4Error("the checkpoint was taken by a session of another model runner")
        self._tokens = list(checkpoint.tokens)
        self._kept_from, self._restored_at = checkpoint.kept_from, checkpoint.restored_at
        self._begin_request()


class ScriptedRunner:
    """ModelRunner for the scripted backend; `token_delay` seconds per generated token
    lets tests watch streaming, queueing and cancellation happen."""

    def __init__(
        self, outputs: Sequence[str], tokenizer: Tokenizer, *, token_delay: float = 0.0
    ) -> None:
        self._script = _Script(outputs, tokenizer)
        self._vocab = tokenizer.vocab_size
        self._eos = tokenizer.special.eos
        self._token_delay = token_delay

    @property
    def hparams(self) -> DeepSeekV4HParams:
        return TINY_SHAPES[DEFAULT_TINY_SHAPE]

    @property
    def routed_quant_bits(self) -> int:
        return 2

    def _delay(self) -> None:
        if self._token_delay > 0:
            time.sleep(self._token_delay)

    def new_session(self, ctx: int) -> ComputeSession:
        return ScriptedSession(ctx, self._script, self._vocab, self._eos, self._delay)

    @property
    def batches_in_one_pass(self) -> bool:
        return False  # and its sessions must see eval for decode, prefill for prompts

    def eval_batch(
        self, sessions: Sequence[ComputeSession], tokens: Sequence[Sequence[int]]
    ) -> list[npt.NDArray[np.float32]]:
        return eval_one_by_one(sessions, tokens)
