"""ReferenceState: the SequenceState port on numpy LayerStates and the numpy forward."""

from __future__ import annotations

import copy
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.forward import ChunkForward
from ds4.adapters.compute.reference.kv_state import LayerState
from ds4.adapters.compute.reference.payload import restore_states, snapshot_of
from ds4.domain.engine.dsv4_payload import SessionSnapshot
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.compute import SequenceState

F32 = npt.NDArray[np.float32]


class ReferenceState:
    def __init__(self, forward: ChunkForward, ctx: int) -> None:
        self._fwd = forward
        self._hp: DeepSeekV4HParams = forward.hp
        self._ctx = ctx
        self.layers = [LayerState(self._hp, il) for il in range(self._hp.n_layer)]

    @property
    def length(self) -> int:
        return self.layers[0].raw.n

    def forward(self, tokens: npt.NDArray[np.int64], all_logits: bool) -> F32:
        return self.forward_streams(tokens, all_logits, 0)[0]

    def forward_streams(
        self, tokens: npt.NDArray[np.int64], all_logits: bool, keep: int
    ) -> tuple[F32, F32]:
        start = self.length
        positions = np.arange(start, start + tokens.size, dtype=np.int64)
        try:
            streams = self._fwd.run(tokens, positions, self.layers)
            logits = self._fwd.head(streams if all_logits else streams[-1:])
        except BaseException:
            self.truncate(start)  # leave the state as it was before this chunk
            raise
        return logits, streams[streams.shape[0] - min(keep, streams.shape[0]) :]

    def truncate(self, n: int) -> None:
        for s in self.layers:
            s.truncate(n)

    def trim(self, keep_from: int) -> None:
        for s in self.layers:
            s.trim(keep_from)

    def history_ok(self, m: int) -> bool:
        for s in self.layers:
            if max(0, m + 1 - self._hp.n_swa) < s.raw.base:
                return False
            for comp in s.compressors():
                need = comp.frontier_start(m)
                if need < m and need < comp.kv.base:
                    return False
        return True

    def snapshot(self, tokens: Sequence[int], logits: F32) -> SessionSnapshot:
        return snapshot_of(self._hp, self._ctx, tokens, logits, self.layers)

    def restore(self, snapshot: SessionSnapshot) -> None:
        self.layers = restore_states(self._hp, snapshot)

    def clone(self) -> SequenceState:
        twin = ReferenceState(self._fwd, self._ctx)
        twin.layers = copy.deepcopy(self.layers)
        return twin

    @property
    def nbytes(self) -> int:
        total = 0
        for s in self.layers:
            total += s.raw.reserve(0).nbytes
            for comp in s.compressors():
                total += sum(g.reserve(0).nbytes for g in (comp.kv, comp.score, comp.rows))
        return total
