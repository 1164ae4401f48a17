"""The device-resident forward (docs/vulkan.md#device-forward, ADR 0066).

A chunk's streams and the sequence's KV state stay in device buffers; each layer is
recorded into the step and the step goes to the GPU as one submission (HOST_FALLBACKS,
the detours that would add one each, is empty). Only the logits (and streams a caller
asks for) come back. `run`/`head` implement the reference's ChunkForward over host LayerStates
(uploading and downloading them: the generic, slow path); VulkanState drives
`run_device` over states that live on the device.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.forward import LayerSetup
from ds4.adapters.compute.reference.state import LayerState
from ds4.adapters.compute.vulkan.attention_block import attention_block as attention
from ds4.adapters.compute.vulkan.device_state import DeviceLayerState, download_layers
from ds4.adapters.compute.vulkan.embed import EMBED_TYPES, record_embed
from ds4.adapters.compute.vulkan.ffn_block import ffn_block as ffn
from ds4.adapters.compute.vulkan.hc import HEAD, LAYER, record_hc_post, record_hc_split, split_width
from ds4.adapters.compute.vulkan.ops import Ops
from ds4.adapters.compute.vulkan.step import BufferPool, Step, Value
from ds4.adapters.compute.vulkan.submission import Recorder
from ds4.adapters.compute.vulkan.weight_store import VulkanWeightStore
from ds4.domain.engine_math.lowprec import Numerics
from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

# Host detours the device forward can take (docs/vulkan.md#status): none inside a
# step. Outside it, steering and activation capture run the reference forward on the
# same device weights (VulkanState); an embedding table that is neither F16 nor F32 is
# gathered on the host and uploaded (n * n_hc * D floats per step).
HOST_FALLBACKS: tuple[str, ...] = ()


# Ops per command buffer before a layer boundary submits (an op records up to ~15
# dispatches; submission.MAX_SETS bounds them): a Flash step records ~45 ops per layer.
MAX_PENDING_OPS = 3000


@dataclass
class StepReport:
    """What the last step cost: submissions, and host fallbacks taken by name."""

    tokens: int = 0
    submissions: int = 0
    fallbacks: Counter[str] = field(default_factory=Counter)


class VulkanForward:
    def __init__(self, hp: DeepSeekV4HParams, store: VulkanWeightStore, numerics: Numerics) -> None:
        self.hp = hp
        self.store = store
        self.numerics = numerics
        self.ops = Ops(store)
        self.pool = BufferPool(store.rt)
        self.setups = [LayerSetup(hp, il, store, numerics) for il in range(hp.n_layer)]
        self.last = StepReport()

    # ---- steps -----------------------------------------------------------------

    def step(self) -> Step:
        return Step(self.store.rt, self.pool)

    def finish(self, step: Step, tokens: int) -> None:
        """Close the step and keep its cost as `last`."""
        step.close()
        self.last = StepReport(tokens, step.submissions, step.fallbacks)

    # ---- ChunkForward over host LayerStates (the generic path) -----------------

    def run(self, tokens: I64, positions: I64, states: list[LayerState]) -> F32:
        rt = self.store.rt
        dev = [DeviceLayerState(rt, self.hp, il) for il in range(self.hp.n_layer)]
        step = self.step()
        try:
            for d, s in zip(dev, states, strict=True):
                d.upload(step, s)
            streams = self.run_device(step, tokens, positions, dev)
            fresh = download_layers(step, dev, self.hp, list(range(self.hp.n_layer)))
            for s, f in zip(states, fresh, strict=True):
                s.raw, s.attn, s.index = f.raw, f.attn, f.index
                s.version += 1
            (out,) = step.np(streams)
        finally:
            self.finish(step, int(tokens.size))
            for d in dev:
                d.release()
        result: F32 = out
        return result

    def head(self, streams: F32) -> F32:
        step = self.step()
        try:
            (logits,) = step.np(self.head_device(step, step.host(streams)))
        finally:
            self.finish(step, 0)
        out: F32 = logits
        return out

    # ---- the device path -----------------------------------------------------------

    def run_device(
        self, step: Step, tokens: I64, positions: I64, states: list[DeviceLayerState]
    ) -> Value:
        """Record the chunk's layers over device states; the final streams (n, S, D)."""
        hp = self.hp
        streams = self._embed(step, tokens)
        tables: dict[int, tuple[Value, Value]] = {}
        for il in range(hp.n_layer):
            setup = self.setups[il]
            kind = 0 if setup.ratio == 0 else 1
            if kind not in tables:
                tables[kind] = self.ops.rope_tables(step, positions, setup.rope(),
                                                    self.numerics.iterated_rope)  # fmt: skip
            streams = self.layer(step, setup, streams, tokens, positions, states[il],
                                 tables[kind])  # fmt: skip
            if step.pending > MAX_PENDING_OPS:
                step.flush()  # stay inside one command buffer's descriptor budget
        return streams

    def _embed(self, step: Step, tokens: I64) -> Value:
        """The first streams (n, S, D): the tokens' embedding rows in every stream,
        gathered on the device from the resident table (F16/F32; other types on the host)."""
        hp, n = self.hp, int(tokens.size)
        table = self.store.device("token_embd.weight")
        if table.ggml_type not in EMBED_TYPES:
            e = self.store.rows("token_embd.weight", tokens)
            return step.host(np.repeat(e[:, None, :], hp.n_hc, axis=1).astype(np.float32))
        if n and (int(tokens.min()) < 0 or int(tokens.max()) >= table.rows):
            raise Ds4Error(f"token ids must be in 0..{table.rows - 1}")
        ids = step.dev(step.host(tokens.astype(np.uint32), np.uint32))
        streams = step.new((n, hp.n_hc, hp.n_embd))
        out = streams.buf
        assert out is not None
        step.record(lambda rec: record_embed(rec, table, ids, out, n, hp.n_hc))
        return streams

    def layer(
        self, step: Step, setup: LayerSetup, streams: Value, tokens: I64, positions: I64,
        state: DeviceLayerState, tables: tuple[Value, Value],
    ) -> Value:  # fmt: skip
        eps, pre = self.hp.rms_eps, setup.prefix
        x_in, mix = self._hc_pre(step, setup, streams, "attn")
        h = self.ops.norm(step, x_in, pre + "attn_norm.weight", self.hp.n_embd, eps)
        a = attention(self.ops, step, setup, h, positions, state, tables)
        streams = self._hc_post(step, a, streams, mix)
        f_in, mix = self._hc_pre(step, setup, streams, "ffn")
        g = self.ops.norm(step, f_in, pre + "ffn_norm.weight", self.hp.n_embd, eps)
        y = ffn(self.ops, step, setup, g, tokens)
        return self._hc_post(step, y, streams, mix)

    def head_device(self, step: Step, streams: Value) -> Value:
        """Logits (n, V) of final streams (n, S, D)."""
        hp = self.hp
        z, _ = self._hc_mix(step, streams, "output_hc_", HEAD)
        zn = self.ops.norm(step, z, "output_norm.weight", hp.n_embd, hp.rms_eps)
        return self.ops.mm(step, "output.weight", zn)

    def _hc_pre(self, step: Step, setup: LayerSetup, streams: Value, kind: str
                ) -> tuple[Value, Value]:  # fmt: skip
        return self._hc_mix(step, streams, f"{setup.prefix}hc_{kind}_", LAYER)

    def _hc_mix(self, step: Step, streams: Value, hc: str, mode: int) -> tuple[Value, Value]:
        """HC pre (mode LAYER) or the head's collapse (HEAD): flat RMSNorm, the hc fn
        product, the split (Sinkhorn for a layer) and the pre-weighted stream sum;
        returns (x (n, D), split)."""
        hp = self.hp
        n = streams.shape[0]
        flat = self.ops.norm(step, streams, None, hp.n_hc * hp.n_embd, hp.rms_eps)
        mix = self.ops.mm(step, hc + "fn.weight", _flat(flat, n))
        split, x = step.new((n, split_width(hp.n_hc, mode))), step.new((n, hp.n_embd))
        bufs = (step.dev(mix), self.ops.vec(hc + "scale.weight"), self.ops.vec(hc + "base.weight"),
                step.dev(streams), split.buf, x.buf)  # fmt: skip
        n_hc, dim, iters, eps = hp.n_hc, hp.n_embd, hp.sinkhorn_iters, hp.hc_eps

        def record(rec: Recorder) -> None:
            mb, sc, bs, sb, spb, xb = bufs
            assert spb is not None and xb is not None
            record_hc_split(rec, mb, sc, bs, sb, spb, xb, n, n_hc, dim, iters, eps, mode)

        step.record(record)
        return x, split

    def _hc_post(self, step: Step, y: Value, streams: Value, split: Value) -> Value:
        hp = self.hp
        n = streams.shape[0]
        out = step.new((n, hp.n_hc, hp.n_embd))
        yb, sb, pb, ob = step.dev(y), step.dev(streams), step.dev(split), out.buf
        assert ob is not None
        step.record(lambda rec: record_hc_post(rec, yb, sb, pb, ob, n, hp.n_hc, hp.n_embd))
        return out

    def close(self) -> None:
        self.pool.close()


def _flat(v: Value, n: int) -> Value:
    """The same value seen as (n, everything else)."""
    return Value((n, int(np.prod(v.shape)) // n), v.dtype, buf=v.buf,
                 arr=None if v.arr is None else v.arr.reshape(n, -1))  # fmt: skip
