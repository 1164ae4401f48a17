"""The MTP block on the reference backend (docs/mtp.md): the DraftModel port in numpy.

One step over rows at positions q: x_in[s] = e_proj(rmsnorm(embed(token), enorm)) +
h_proj(rmsnorm(hidden[s], hnorm)), then one block as the main layers run it (ratio 0,
biased top-k routing, its own raw window), then its own HC head and norm before the
main model's output matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.forward import Forward, LayerSetup, WeightStore
from ds4.adapters.compute.reference.state import LayerState
from ds4.domain.engine_math.layers import rmsnorm
from ds4.domain.engine_math.lowprec import Numerics
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.model.presets import mtp_clamp
from ds4.ports.drafter import DraftState
from ds4.ports.model_file import Dequantizer, ModelFile

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

PREFIX = "mtp.0."


@dataclass(frozen=True)
class MtpSetup(LayerSetup):
    """The block's tensors under mtp.0.: ratio 0, never hash-routed, partial windows."""

    @property
    def prefix(self) -> str:
        return PREFIX

    @property
    def ratio(self) -> int:
        return 0

    @property
    def is_hash(self) -> bool:
        return False

    @property
    def clamp(self) -> float:
        return mtp_clamp(self.hp)

    @property
    def window_from_kept(self) -> bool:
        return True


class ReferenceDraftModel:
    def __init__(
        self,
        main: Forward,
        model: ModelFile,
        hp: DeepSeekV4HParams,
        numerics: Numerics,
        dequantizer: Dequantizer,
    ) -> None:
        self.main = main
        self.hp = hp
        self.weights = WeightStore(model, dequantizer, numerics)
        self.setup = MtpSetup(hp, 0, self.weights, numerics)

    @property
    def window(self) -> int:
        return self.hp.n_swa

    def new_state(self) -> DraftState:
        return ReferenceDraftState(self)

    def block_input(self, hidden: F32, tokens: I64) -> F32:
        hp, w = self.hp, self.weights
        emb = self.main.weights.rows("token_embd.weight", tokens)
        e = rmsnorm(np.asarray(emb, np.float32), w.small(PREFIX + "enorm.weight"), hp.rms_eps)
        ep = w.matmul(PREFIX + "e_proj.weight", e)
        k = hidden.shape[0]
        flat = np.asarray(hidden, np.float32).reshape(k * hp.n_hc, hp.n_embd)
        hn = rmsnorm(flat, w.small(PREFIX + "hnorm.weight"), hp.rms_eps)
        hproj = w.matmul(PREFIX + "h_proj.weight", hn).reshape(k, hp.n_hc, hp.n_embd)
        out: F32 = (ep[:, None, :] + hproj).astype(np.float32)
        return out


class ReferenceDraftState:
    def __init__(self, model: ReferenceDraftModel) -> None:
        self._m = model
        self._layer = LayerState(model.hp, None)

    @property
    def base(self) -> int:
        return self._layer.raw.base

    @property
    def length(self) -> int:
        return self._layer.raw.n

    def restart(self, position: int) -> None:
        self._layer = LayerState(self._m.hp, None)
        self._layer.raw.set_rows(position, np.zeros((0, self._m.hp.head_dim), np.float32))

    def truncate(self, n: int) -> None:
        if n <= self.base:
            self.restart(n)
        else:
            self._layer.truncate(n)

    def trim(self, keep_from: int) -> None:
        self._layer.trim(keep_from)

    def advance(self, hidden: F32, tokens: I64) -> F32:
        start = self.length
        ids = np.asarray(tokens, dtype=np.int64).reshape(-1)
        positions = np.arange(start, start + ids.size, dtype=np.int64)
        try:
            x = self._m.block_input(hidden, ids)
            return self._m.main.layer_with(self._m.setup, x, ids, positions, self._layer)
        except BaseException:
            self._layer.truncate(start)
            raise

    def logits(self, streams: F32) -> F32:
        return self._m.main.head_with(
            streams, self._m.weights, PREFIX + "hc_head_", PREFIX + "norm.weight"
        )
