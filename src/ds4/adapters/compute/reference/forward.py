"""Whole-model forward of a chunk of tokens: embedding, layers (layer-major), head
(docs/reference/model.md §3.1–3.11)."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.attention_layer import LayerSetup, attention_sublayer
from ds4.adapters.compute.reference.ffn_layer import ffn_sublayer
from ds4.adapters.compute.reference.kv_state import LayerState
from ds4.adapters.compute.reference.weights import WeightStore
from ds4.domain.engine_math.layers import (
    HcMix,
    hc_post,
    hc_split,
    head_weights,
    rmsnorm,
    weighted_streams,
)
from ds4.domain.engine_math.lowprec import Numerics
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.steering.directions import Steering, steer_rows

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]


class ChunkForward(Protocol):
    """What a session needs of a forward pass (numpy here, native in the CPU backend)."""

    hp: DeepSeekV4HParams

    def run(self, tokens: I64, positions: I64, states: list[LayerState]) -> F32: ...

    def head(self, streams: F32) -> F32: ...


class Forward:
    def __init__(self, hp: DeepSeekV4HParams, weights: WeightStore, numerics: Numerics) -> None:
        self.hp = hp
        self.weights = weights
        self.setups = [LayerSetup(hp, il, weights, numerics) for il in range(hp.n_layer)]
        # directional steering and activation capture (docs/steering.md), main layers only
        self.steering: Steering | None = None
        self.capture_component: str | None = None
        self.captured = np.zeros((hp.n_layer, hp.n_embd), np.float32)

    def _hc_pre(self, setup: LayerSetup, streams: F32, kind: str) -> tuple[F32, HcMix]:
        hp = self.hp
        flat = rmsnorm(streams.reshape(streams.shape[0], -1), None, hp.rms_eps)
        mix = setup.mm(f"hc_{kind}_fn.weight", flat)
        scale, base = setup.vec(f"hc_{kind}_scale.weight"), setup.vec(f"hc_{kind}_base.weight")
        split = hc_split(mix, scale, base, hp.n_hc, hp.sinkhorn_iters, hp.hc_eps)
        return weighted_streams(streams, split.pre), split

    def layer(self, il: int, streams: F32, tokens: I64, positions: I64, state: LayerState) -> F32:
        return self.layer_with(self.setups[il], streams, tokens, positions, state, il)

    def layer_with(
        self,
        setup: LayerSetup,
        streams: F32,
        tokens: I64,
        positions: I64,
        state: LayerState,
        main_layer: int | None = None,
    ) -> F32:
        """One block (HC pre, attention, HC post, HC pre, FFN, HC post) as `setup` names it;
        `main_layer`: its index among the main layers (steering and capture apply)."""
        eps = self.hp.rms_eps
        x_in, mix = self._hc_pre(setup, streams, "attn")
        h = rmsnorm(x_in, setup.vec("attn_norm.weight"), eps)
        a = self._sublayer_out(attention_sublayer(setup, h, positions, state), main_layer, "attn")
        streams = hc_post(a, streams, mix)
        f_in, mix = self._hc_pre(setup, streams, "ffn")
        g = rmsnorm(f_in, setup.vec("ffn_norm.weight"), eps)
        y = self._sublayer_out(self.ffn(setup, g, tokens), main_layer, "ffn")
        return hc_post(y, streams, mix)

    def _sublayer_out(self, y: F32, layer: int | None, kind: str) -> F32:
        """Steering, then capture, of a sublayer output before HC post."""
        if layer is None:
            return y
        s = self.steering
        scale = 0.0 if s is None else (s.attn if kind == "attn" else s.ffn)
        if s is not None and scale != 0.0:
            y = steer_rows(y, s.directions[layer], scale)
        if self.capture_component == kind + "_out":
            self.captured[layer] = y[-1]
        return y

    def ffn(self, setup: LayerSetup, g: F32, tokens: I64) -> F32:
        """The FFN sublayer (a hook: other backends route experts their own way)."""
        return ffn_sublayer(setup, g, tokens)

    def run(self, tokens: I64, positions: I64, states: list[LayerState]) -> F32:
        """Evaluate the chunk into the states; return the final HC streams (n, S, D)."""
        e = self.weights.rows("token_embd.weight", tokens)
        streams = np.repeat(e[:, None, :], self.hp.n_hc, axis=1).astype(np.float32)
        for il in range(self.hp.n_layer):
            streams = self.layer(il, streams, tokens, positions, states[il])
        return streams

    def head(self, streams: F32) -> F32:
        """Logits (n, V) from final HC streams (n, S, D)."""
        return self.head_with(streams, self.weights, "output_hc_", "output_norm.weight")

    def head_with(self, streams: F32, store: WeightStore, hc: str, norm: str) -> F32:
        """The output head with the HC head `hc`{fn,scale,base}.weight and norm `norm`
        from `store` (the MTP block has its own), always this model's output matrix."""
        hp = self.hp
        flat = rmsnorm(streams.reshape(streams.shape[0], -1), None, hp.rms_eps)
        mix = store.matmul(hc + "fn.weight", flat)
        wts = head_weights(
            mix, store.small(hc + "scale.weight"), store.small(hc + "base.weight"), hp.hc_eps
        )
        z = rmsnorm(weighted_streams(streams, wts), store.small(norm), hp.rms_eps)
        return self.weights.matmul("output.weight", z)
