"""StateRunner: what every ModelRunner built on a SequenceState shares (docs/adr/0032).

A backend says how to make an empty state and how to evaluate several states in one
pass; its sessions (EngineSession over the state) and batches (eval_together) are the
same for all. eval_one_by_one is the batch of a runner that cannot batch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from functools import partial

import numpy as np
import numpy.typing as npt

from ds4.domain.engine.session import REWIND_HISTORY, EngineSession, StateSpec
from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.compute import ComputeSession, SequenceState

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

# (states, ids per state) -> logits after each state's last id, one (1, V) array each
BatchForward = Callable[[Sequence[SequenceState], Sequence[I64]], list[F32]]


class StateRunner(ABC):
    def __init__(self, hparams: DeepSeekV4HParams) -> None:
        self._hp = hparams

    @property
    def hparams(self) -> DeepSeekV4HParams:
        return self._hp

    @abstractmethod
    def new_state(self, ctx: int) -> SequenceState:
        """An empty backend state for a context of ctx tokens."""

    @abstractmethod
    def forward_states(self, states: Sequence[SequenceState], ids: Sequence[I64]) -> list[F32]:
        """Evaluate ids[i] into states[i] for every i (one pass where the backend can);
        the logits after each state's last id, (1, V) each. On error no state changes."""

    def new_session(self, ctx: int, *, rewind_history: int = REWIND_HISTORY) -> EngineSession:
        make = partial(self.new_state, ctx)
        return EngineSession(StateSpec(self._hp, make, ctx, self, rewind_history))

    def eval_batch(
        self, sessions: Sequence[ComputeSession], tokens: Sequence[Sequence[int]]
    ) -> list[F32]:
        return eval_together(sessions, tokens, self.forward_states, owner=self)


def eval_together(
    sessions: Sequence[ComputeSession],
    tokens: Sequence[Sequence[int]],
    forward: BatchForward,
    *,
    owner: object,
) -> list[F32]:
    """Append tokens[i] to sessions[i] for every i in one pass of the backend (`forward`
    evaluates all states together); the logits after each session's last token.

    Every session must be a distinct EngineSession over a state of `owner`, with a
    non-empty list; all are checked before anything is evaluated, and a failed pass
    changes none of them.
    """
    if len(sessions) != len(tokens):
        raise Ds4Error(f"{len(sessions)} sessions but {len(tokens)} token lists")
    mine: list[EngineSession] = []
    states = []
    for s, ids in zip(sessions, tokens, strict=True):
        if not isinstance(s, EngineSession):
            raise Ds4Error("a batch takes sessions of its own model runner only")
        if any(s is other for other in mine):
            raise Ds4Error("a session appears twice in one batch")
        states.append(s.batch_state(owner, ids))
        mine.append(s)
    arrays = [np.asarray(ids, dtype=np.int64).reshape(-1) for ids in tokens]
    logits = forward(states, arrays)
    return [s.batch_done(ids, rows) for s, ids, rows in zip(mine, arrays, logits, strict=True)]


def eval_one_by_one(
    sessions: Sequence[ComputeSession], tokens: Sequence[Sequence[int]]
) -> list[F32]:
    """eval_batch for runners that cannot batch (test doubles): each session in turn."""
    if len(sessions) != len(tokens):
        raise Ds4Error(f"{len(sessions)} sessions but {len(tokens)} token lists")
    return [s.prefill(list(ids)) for s, ids in zip(sessions, tokens, strict=True)]
