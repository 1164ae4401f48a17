"""Compute: a model runner and the per-sequence state it evaluates tokens into.

A backend implements `SequenceState`, the raw per-layer state of one sequence
(evaluate, truncate, trim, snapshot, copy); the domain's EngineSession runs directly
over it, keeping the token list, logits, exact rewind floors, payloads and in-memory
checkpoints (docs/session-model.md). `ComputeSession` is what such a session offers a
runner's batch, a benchmark or a scorer: EngineSession is one, and a runner that is no
SequenceState (the scripted backend, test doubles) makes its own, which an
EngineSession then drives as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ds4.domain.engine.dsv4_payload import SessionSnapshot
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.steering.directions import Steering


class SequenceState(Protocol):
    """A backend's state of one token sequence: per layer the raw KV rows, compressor
    inputs and emitted rows, kept by absolute position. It knows positions, not tokens."""

    @property
    def length(self) -> int:
        """Positions evaluated into the state."""
        ...

    def forward(self, tokens: npt.NDArray[np.int64], all_logits: bool) -> npt.NDArray[np.float32]:
        """Evaluate `tokens` at positions length..; logits (n, V), or (1, V) for the last
        token unless all_logits. On any error the state is left as it was."""
        ...

    def forward_streams(
        self, tokens: npt.NDArray[np.int64], all_logits: bool, keep: int
    ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
        """forward(), also returning the final HC streams (k, S, D) of the last
        k = min(keep, n) tokens: what a drafter reads (docs/mtp.md)."""
        ...

    def truncate(self, n: int) -> None:
        """Drop positions from n on."""
        ...

    def trim(self, keep_from: int) -> None:
        """Forget per-token history before keep_from that the state no longer reads
        (amortised: it may keep more)."""
        ...

    def history_ok(self, m: int) -> bool:
        """Whether the kept history rebuilds the state after m positions exactly."""
        ...

    def snapshot(self, tokens: Sequence[int], logits: npt.NDArray[np.float32]) -> SessionSnapshot:
        """The payload view of the state after len(tokens) == length positions."""
        ...

    def restore(self, snapshot: SessionSnapshot) -> None:
        """Replace the state by what a (validated) snapshot describes."""
        ...

    def clone(self) -> SequenceState:
        """An independent deep copy (history included)."""
        ...

    @property
    def nbytes(self) -> int:
        """Memory the state holds."""
        ...


class StateCheckpoint(Protocol):
    """An in-memory copy of a session's whole state (checkpoint()); restorable any
    number of times, into the session that took it or another of the same runner."""

    @property
    def tokens(self) -> Sequence[int]: ...

    @property
    def nbytes(self) -> int: ...

    def rewind_floor(self, n: int) -> int:
        """What a session restored to this checkpoint gives for rewind_floor(n): which
        shorter prefixes it reaches exactly (a store of checkpoints compares them
        without restoring any)."""
        ...


class ComputeSession(Protocol):
    """Engine-owned state of one token sequence (KV rows, compressor frontiers, logits):
    an EngineSession over a backend state, or a double's own."""

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
        """The DSV4 snapshot payload (docs/reference/formats.md §8), logits included."""
        ...

    def load_payload(self, data: bytes) -> None:
        """Restore from a payload; Ds4Error on any validation failure
        (docs/reference/formats.md §8.4)."""
        ...

    def checkpoint(self) -> StateCheckpoint:
        """A copy of the whole state, history included: restore() brings the session back
        to it exactly (same logits, same rewind floors)."""
        ...

    def restore(self, checkpoint: StateCheckpoint) -> None:
        """Return to a checkpoint; Ds4Error if another runner or context size took it."""
        ...


class ModelRunner(Protocol):
    @property
    def hparams(self) -> DeepSeekV4HParams: ...

    @property
    def routed_quant_bits(self) -> int:
        """4 if layer 0's routed gate experts are Q4_K, else 2 (docs/reference/formats.md §3.3)."""
        ...

    def new_session(self, ctx: int) -> ComputeSession:
        """A fresh session: an EngineSession over a new state (StateRunner), or a
        double's own ComputeSession (EngineSession.over configures or wraps either)."""
        ...

    @property
    def batches_in_one_pass(self) -> bool:
        """Whether eval_batch evaluates its sessions in one pass (weights read once for
        every row). False: it runs them one after another, which a caller may as well do
        itself through each session's own eval/prefill (the scripted double tells a
        request's prefill from its decode by which of the two it gets)."""
        ...

    def eval_batch(
        self, sessions: Sequence[ComputeSession], tokens: Sequence[Sequence[int]]
    ) -> list[npt.NDArray[np.float32]]:
        """Append tokens[i] to sessions[i] (distinct sessions of this runner, each list
        non-empty) in one pass where the backend can: weights are read once for every
        row. Returns the logits after each session's last token; each equals what the
        session would give alone. On error no session changes."""
        ...


# ---- steering ----------------------------------------------------------------------
# Steerable: directional steering and the activation capture it is built from
# (docs/steering.md). The cpu and reference runners implement it.

Component = Literal["attn_out", "ffn_out"]


@runtime_checkable
class Steerable(Protocol):
    def steer(self, steering: Steering | None) -> None:
        """Directional steering on every layer of every session from now on (None: off)."""
        ...

    def capture(self, component: Component | None) -> None:
        """From now on keep, per layer, the component's output (after steering) at the
        last position of each evaluation (None: stop). For single-session runs."""
        ...

    def captured(self) -> npt.NDArray[np.float32]:
        """(n_layer, n_embd): the captured rows of the latest evaluation."""
        ...
