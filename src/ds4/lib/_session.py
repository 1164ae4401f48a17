"""`Session`: one sequence's engine state, driven the way the CLI and server drive it.

Prefill is generation.loop.prefill (the longest exactly rewindable common prefix is
kept, the rest evaluated in chunks); a chat turn is generation.loop.decode_turn with
its events handed to a callback; rewinds, in-memory snapshots and payloads are the
ComputeSession's own. Nothing here computes anything itself. The argument check every
face of the library uses (`int_in`) lives here too, at the bottom of its imports.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

from ds4.apps.flag_types import INT_MAX, SEED_MAX
from ds4.domain.engine.cancel import CancelCheck, never_cancel
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.events import Finished, GenerationEvent
from ds4.domain.generation.loop import (
    OnToken,
    TurnSettings,
    decode_tokens,
    decode_turn,
    ignore_token,
    prefill,
)
from ds4.domain.sampling import GREEDY, SamplingParams
from ds4.ports.compute import ComputeSession, StateCheckpoint
from ds4.ports.tokenizer import Tokenizer

OnEvent = Callable[[GenerationEvent], None]
OnProgress = Callable[[int, int], None]
Snapshot = StateCheckpoint


# ---- argument checks of the library faces --------------------------------------------
# A bad value is a Ds4Error naming it, never a clamp, a hang or a failure deep inside
# the engine (docs/library.md).


def int_in(name: str, value: object, low: int, high: int) -> int:
    """`value` as an int in low..high (bool refused: True is not a count)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise Ds4Error(f"{name} must be an integer, not {type(value).__name__}")
    if not low <= value <= high:
        raise Ds4Error(f"{name} {value} is out of range ({low}..{high})")
    return value


def _ignore_event(_event: GenerationEvent) -> None:
    return None


def _checked_stops(stops: Sequence[str]) -> tuple[str, ...]:
    if isinstance(stops, str):  # a bare string would become one stop per character
        raise Ds4Error("stops must be a list of strings, not a str")
    out = tuple(stops)
    for index, stop in enumerate(out):
        if not isinstance(stop, str) or not stop:
            raise Ds4Error(f"stops[{index}] = {stop!r} is not a non-empty string")
    return out


def _checked_sampling(sampling: SamplingParams | None) -> SamplingParams:
    if sampling is None:
        return GREEDY
    if not isinstance(sampling, SamplingParams):
        raise Ds4Error(f"sampling must be a SamplingParams, not {type(sampling).__name__}")
    int_in("sampling.seed", sampling.seed, 1, SEED_MAX)
    int_in("sampling.top_k", sampling.top_k, 0, INT_MAX)
    return sampling.normalized()


class Session:
    """A sequence of tokens evaluated into the engine, with its logits.

    Get one from `Model.new_session`. Not thread-safe: one caller at a time.
    """

    def __init__(self, compute: ComputeSession, live: EngineSession, tokenizer: Tokenizer) -> None:
        self._compute = compute
        self._live = live
        self._tokenizer = tokenizer
        self._reused = 0  # what the last prefill kept; reported as cached by generate

    @property
    def ctx(self) -> int:
        """Capacity in tokens."""
        return self._live.ctx

    @property
    def tokens(self) -> tuple[int, ...]:
        """The tokens in the state, in order."""
        return tuple(self._live.tokens)

    def __len__(self) -> int:
        return self._live.pos

    # ---- prompt ----------------------------------------------------------------------

    def prefill(
        self,
        prompt: str | Sequence[int],
        *,
        on_progress: OnProgress | None = None,
        cancel: CancelCheck = never_cancel,
    ) -> int:
        """Bring the state to exactly `prompt` (text is tokenized as Model.tokenize does);
        return how many of its tokens were kept from the state instead of evaluated.

        on_progress(done, total) runs after each evaluated chunk; cancel() is asked
        before each chunk and, when it says yes, CancelledError leaves the state at
        the last finished chunk. Ds4Error when the prompt is empty or leaves no room
        for a generated token (len(prompt) >= ctx).
        """
        ids = self._tokenizer.encode(prompt) if isinstance(prompt, str) else list(prompt)
        if len(ids) >= self.ctx:  # the counts, as `ds4 cli` gives them
            raise Ds4Error(
                f"prompt exceeds context: {len(ids)} tokens, and ctx={self.ctx} needs room "
                "for at least one more"
            )
        steps = prefill(self._live, ids, cancel=cancel)
        while True:
            try:
                progress = next(steps)
            except StopIteration as done:
                self._reused = int(done.value)
                return self._reused
            if on_progress is not None:
                on_progress(progress.done, progress.total)

    # ---- generation ------------------------------------------------------------------

    def generate(
        self,
        *,
        max_tokens: int = 256,
        sampling: SamplingParams | None = None,
        stops: Sequence[str] = (),
        tools: bool = False,
        on_event: OnEvent = _ignore_event,
        on_token: OnToken = ignore_token,
        cancel: CancelCheck = never_cancel,
    ) -> Finished:
        """Decode one assistant turn after the prefilled prompt; return its Finished.

        Streams through on_event: TextDelta, ReasoningDelta and the ToolCall* events
        as tokens are sampled, then the Finished it returns. on_token(id) runs after
        each token is evaluated into the state. The turn starts inside reasoning when
        the state ends with <think>; tools=True: the prompt declared tools, so a DSML
        block becomes tool calls (and is sampled greedily). sampling: default greedy.
        The state keeps every sampled token (EOS is never evaluated).
        """
        int_in("max_tokens", max_tokens, 0, INT_MAX)
        if not len(self):
            raise Ds4Error("the session is empty: prefill a prompt first")
        settings = TurnSettings(
            sampling=_checked_sampling(sampling),
            max_tokens=max_tokens,
            stops=_checked_stops(stops),
            tools_active=tools,
            thinking=self._live.tokens[-1] == self._tokenizer.special.think_open,
        )
        events = decode_turn(
            self._live,
            self._tokenizer,
            settings,
            prompt_tokens=len(self),
            cached=self._reused,
            cancel=cancel,
            on_token=on_token,
        )
        self._reused = 0
        for event in events:
            on_event(event)
            if isinstance(event, Finished):
                return event
        raise AssertionError("decode_turn always ends with Finished")  # pragma: no cover

    def generate_tokens(
        self,
        max_tokens: int,
        *,
        sampling: SamplingParams | None = None,
        on_token: OnToken = ignore_token,
        cancel: CancelCheck = never_cancel,
    ) -> list[int]:
        """Plain decoding, no chat protocol: sample up to max_tokens ids (stopping
        before EOS or a full context); on_token(id) runs for each one as it is
        evaluated into the state."""
        int_in("max_tokens", max_tokens, 0, INT_MAX)
        if not len(self):
            raise Ds4Error("the session is empty: prefill a prompt first")
        out: list[int] = []
        eos = self._tokenizer.special.eos
        for token in decode_tokens(
            self._live, _checked_sampling(sampling), max_tokens, eos=eos, cancel=cancel
        ):
            out.append(token)
            on_token(token)
        return out

    def logits(self) -> npt.NDArray[np.float32]:
        """The next-token logits after the last token [vocab] (Ds4Error when empty)."""
        return self._live.logits()

    # ---- rewinds and copies ----------------------------------------------------------

    def rewind_floor(self, n: int) -> int:
        """The largest m <= n the state can be cut back to exactly (compressed rows and
        sliding windows make some positions unreachable; 0 always is)."""
        int_in("n", n, 0, len(self))
        return self._compute.rewind_floor(n)

    def rewind(self, n: int) -> None:
        """Keep the first n tokens (and their logits); n must be a rewind_floor."""
        int_in("n", n, 0, len(self))
        self._compute.rewind(n)

    def reset(self) -> None:
        """Empty the state."""
        self._live.invalidate()

    def snapshot(self) -> Snapshot:
        """An in-memory copy of the whole state; restore() returns to it exactly (same
        logits, same rewind floors), any number of times."""
        return self._compute.checkpoint()

    def restore(self, snapshot: Snapshot) -> None:
        """Return to a snapshot of a session of the same model and ctx (else Ds4Error)."""
        self._compute.restore(snapshot)

    def payload(self) -> bytes:
        """The state as bytes (the DSV4 payload a `.kv` file holds, logits included)."""
        return self._live.payload()

    def load_payload(self, payload: bytes) -> None:
        """Restore a payload from a session of the same model; a bad one empties the
        state and raises Ds4Error."""
        self._live.load_payload(payload)

    def _live_session(self) -> EngineSession:
        """The domain session (for KvFiles, the other face that drives it)."""
        return self._live
