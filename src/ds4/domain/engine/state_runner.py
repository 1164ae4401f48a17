"""StateRunner: what every ModelRunner built on a SequenceState shares (docs/adr/0032).

A backend says how to make an empty state and how to evaluate several states in one
pass; sessions (StateSession) and batches (eval_together) are the same for all.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from functools import partial

import numpy as np
import numpy.typing as npt

from ds4.domain.engine.state_session import REWIND_HISTORY, StateSession, eval_together
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.compute import ComputeSession, SequenceState

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


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

    def new_session(self, ctx: int, *, rewind_history: int = REWIND_HISTORY) -> ComputeSession:
        make = partial(self.new_state, ctx)
        return StateSession(self._hp, make, ctx, owner=self, rewind_history=rewind_history)

    def eval_batch(
        self, sessions: Sequence[ComputeSession], tokens: Sequence[Sequence[int]]
    ) -> list[F32]:
        return eval_together(sessions, tokens, self.forward_states, owner=self)
