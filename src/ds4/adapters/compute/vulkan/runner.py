"""`--backend vulkan`: the device-resident forward, the sequence state over it and the
runner (docs/vulkan.md#device-forward, ADR 0066).

A chunk's streams and the sequence's KV state stay in device buffers; each layer is
recorded into the step and the step goes to the GPU as one submission (HOST_FALLBACKS,
the detours that would add one each, is empty). Only the logits (and streams a caller
asks for) come back. Weight products run over the raw GGUF blocks resident on the
device. Steering and activation capture run the reference forward with the same device
weight products instead.
"""

from __future__ import annotations

import copy
import weakref
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.reference.forward import Forward, LayerSetup
from ds4.adapters.compute.reference.runner import ReferenceRunner, reference_numerics
from ds4.adapters.compute.reference.state import LayerState, ReferenceState
from ds4.adapters.compute.vulkan.attention import attention_block as attention
from ds4.adapters.compute.vulkan.ffn import ffn_block as ffn
from ds4.adapters.compute.vulkan.hc import (
    EMBED_TYPES,
    HEAD,
    LAYER,
    HcBuffers,
    HcShape,
    record_embed,
    record_hc_post,
    record_hc_split,
    split_width,
)
from ds4.adapters.compute.vulkan.ops import Ops
from ds4.adapters.compute.vulkan.runtime import runtime
from ds4.adapters.compute.vulkan.step import (
    BufferPool,
    DeviceLayerState,
    DeviceStep,
    Value,
    download_layers,
)
from ds4.adapters.compute.vulkan.vk_api import VulkanUnavailableError
from ds4.adapters.compute.vulkan.weights import VulkanWeightStore
from ds4.adapters.quant.numpy_codec import NumpyDequantizer
from ds4.domain.engine.compressor_frontier import frontier_start
from ds4.domain.engine_math.lowprec import Numerics
from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.compute import ModelRunner, SequenceState
from ds4.ports.model_file import Dequantizer, ModelFile

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

# Host detours the device forward can take (docs/vulkan.md#status): none inside a
# step. Outside it, steering and activation capture run the reference forward on the
# same device weights (VulkanState); an embedding table that is neither F16, BF16 nor F32 is
# gathered on the host and uploaded (n * n_hc * D floats per step).
HOST_FALLBACKS: tuple[str, ...] = ()


# Ops per command buffer before a layer boundary submits (an op records up to ~15
# dispatches; submission.MAX_SETS bounds them): a Flash step records ~45 ops per layer.
MAX_PENDING_OPS = 3000


@dataclass
class DeviceStepReport:
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
        self.last = DeviceStepReport()

    # ---- steps -----------------------------------------------------------------

    def step(self) -> DeviceStep:
        return DeviceStep(self.store.rt, self.pool)

    def finish(self, step: DeviceStep, tokens: int) -> None:
        """Close the step and keep its cost as `last`."""
        step.close()
        self.last = DeviceStepReport(tokens, step.submissions, step.fallbacks)

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
        self, step: DeviceStep, tokens: I64, positions: I64, states: list[DeviceLayerState]
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

    def _embed(self, step: DeviceStep, tokens: I64) -> Value:
        """The first streams (n, S, D): the tokens' embedding rows in every stream,
        gathered on the device from the resident table (F16/BF16/F32; other types on the host)."""
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
        self, step: DeviceStep, setup: LayerSetup, streams: Value, tokens: I64, positions: I64,
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

    def head_device(self, step: DeviceStep, streams: Value) -> Value:
        """Logits (n, V) of final streams (n, S, D)."""
        hp = self.hp
        z, _ = self._hc_mix(step, streams, "output_hc_", HEAD)
        zn = self.ops.norm(step, z, "output_norm.weight", hp.n_embd, hp.rms_eps)
        return self.ops.mm(step, "output.weight", zn)

    def _hc_pre(self, step: DeviceStep, setup: LayerSetup, streams: Value, kind: str
                ) -> tuple[Value, Value]:  # fmt: skip
        return self._hc_mix(step, streams, f"{setup.prefix}hc_{kind}_", LAYER)

    def _hc_mix(self, step: DeviceStep, streams: Value, hc: str, mode: int) -> tuple[Value, Value]:
        """HC pre (mode LAYER) or the head's collapse (HEAD): flat RMSNorm, the hc fn
        product, the split (Sinkhorn for a layer) and the pre-weighted stream sum;
        returns (x (n, D), split)."""
        hp = self.hp
        n = streams.shape[0]
        flat = self.ops.norm(step, streams, None, hp.n_hc * hp.n_embd, hp.rms_eps)
        mix = self.ops.mm(step, hc + "fn.weight", _flat(flat, n))
        split, x = step.new((n, split_width(hp.n_hc, mode))), step.new((n, hp.n_embd))
        mb, sc = step.dev(mix), self.ops.vec(hc + "scale.weight")
        bs = self.ops.vec(hc + "base.weight")
        sb, spb, xb = step.dev(streams), split.buf, x.buf
        assert spb is not None and xb is not None
        b = HcBuffers(sb, sc, bs, mb, spb, xb)
        s = HcShape(n, hp.n_hc, hp.n_embd, hp.sinkhorn_iters, hp.hc_eps, hp.rms_eps, mode)
        step.record(lambda rec: record_hc_split(rec, b, s))
        return x, split

    def _hc_post(self, step: DeviceStep, y: Value, streams: Value, split: Value) -> Value:
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


# -----------------------------------------------------------------------------
# VulkanState: the SequenceState port with the KV state resident on the device.
#
# The device state is the truth while the sequence decodes; the host LayerStates the
# reference session code reads (payloads, clones, checkpoints) are downloaded when asked
# for, and a restored or assigned host state is uploaded before the next step. Truncate
# and trim act on the device counters and buffers directly, so rewinds cost no transfer.


class VulkanState(ReferenceState):
    def __init__(self, device: VulkanForward, host: Forward, ctx: int) -> None:
        """host: the reference forward on the same device weights, for what the device
        path does not do (steering and activation capture)."""
        self._dev_fwd = device
        self._device: list[DeviceLayerState] | None = None
        self._host: list[LayerState] | None = None
        super().__init__(host, ctx)
        self._release = weakref.finalize(self, _release, [])

    # ---- where the truth lives -------------------------------------------------------

    @property
    def layers(self) -> list[LayerState]:
        """The host view (downloaded from the device when the device is ahead)."""
        if self._host is None:
            if self._device is None:
                raise Ds4Error("vulkan: this sequence's state was lost when the device failed "
                               "mid-step; start a new session")  # fmt: skip
            fwd = self._dev_fwd
            step = fwd.step()
            try:
                layers = list(range(len(self._device)))
                self._host = download_layers(step, self._device, fwd.hp, layers)
            finally:
                step.close()
        return self._host

    @layers.setter
    def layers(self, states: list[LayerState]) -> None:
        self._host = states
        self._drop_device()

    def _on_device(self) -> list[DeviceLayerState]:
        if self._device is None:
            fwd = self._dev_fwd
            host = self.layers
            rt = fwd.store.rt
            dev = [DeviceLayerState(rt, fwd.hp, il) for il in range(fwd.hp.n_layer)]
            step = fwd.step()
            try:
                for d, s in zip(dev, host, strict=True):
                    d.upload(step, s)
            finally:
                step.close()
            self._device = dev
            self._release.detach()
            self._release = weakref.finalize(self, _release, dev)
        return self._device

    def _drop_device(self) -> None:
        if self._device is not None:
            self._release()
            self._device = None

    # ---- the port --------------------------------------------------------------------

    @property
    def length(self) -> int:
        if self._device is not None:
            return self._device[0].raw.n
        return self.layers[0].raw.n

    def forward_streams(
        self, tokens: npt.NDArray[np.int64], all_logits: bool, keep: int
    ) -> tuple[F32, F32]:
        host_fwd = self._fwd
        assert isinstance(host_fwd, Forward)
        if host_fwd.steering is not None or host_fwd.capture_component is not None:
            self.layers  # noqa: B018 -- bring the host view up to date
            self._drop_device()
            return super().forward_streams(tokens, all_logits, keep)  # host forward
        dev = self._on_device()
        start = self.length
        fwd = self._dev_fwd
        positions = np.arange(start, start + tokens.size, dtype=np.int64)
        step = fwd.step()
        try:
            streams = fwd.run_device(step, tokens, positions, dev)
            self._host = None  # the device is ahead from here on
            n = int(tokens.size)
            last = streams if all_logits else _last_rows(step, streams, n)
            (logits,) = step.np(fwd.head_device(step, last))
            k = min(keep, n)
            if k:
                (s,) = step.np(streams)
                kept: F32 = s[n - k :]
            else:
                kept = np.zeros((0, self._hp.n_hc, self._hp.n_embd), np.float32)
        except BaseException:
            try:
                step.close()  # recorded growth copies still land: the buffers stay whole
            except BaseException:
                self._drop_device()  # the device failed mid-step: its state is unknown
                raise
            for d in dev:
                d.truncate(start)  # leave the state as it was before this chunk
            raise
        fwd.finish(step, int(tokens.size))
        out: F32 = logits
        return out, kept

    def truncate(self, n: int) -> None:
        if self._device is not None:
            for d in self._device:
                d.truncate(n)
        if self._host is not None:
            for s in self._host:
                s.truncate(n)

    def trim(self, keep_from: int) -> None:
        if self._device is not None:
            for d in self._device:
                n = d.raw.n
                d.trim(keep_from, [frontier_start(c.ratio, n) for c in d.compressors()])
        if self._host is not None:
            for s in self._host:
                s.trim(keep_from)

    def history_ok(self, m: int) -> bool:
        if self._device is None:
            return super().history_ok(m)
        for d in self._device:
            if max(0, m + 1 - self._hp.n_swa) < d.raw.base:
                return False
            for c in d.compressors():
                need = frontier_start(c.ratio, m)
                if need < m and need < c.kv.base:
                    return False
        return True

    def clone(self) -> SequenceState:
        twin = VulkanState(self._dev_fwd, self._fwd_host(), self._ctx)
        twin.layers = [_copy_layer(s) for s in self.layers]
        return twin

    @property
    def nbytes(self) -> int:
        if self._device is not None:
            return sum(d.nbytes for d in self._device)
        return super().nbytes

    def _fwd_host(self) -> Forward:
        host = self._fwd
        assert isinstance(host, Forward)
        return host


def _last_rows(step: DeviceStep, streams: Value, n: int) -> Value:
    """The last token's streams (1, S, D) of (n, S, D), copied on the device."""
    if n == 1:
        return streams
    if streams.arr is not None:
        return step.host(streams.arr[-1:])
    width = int(np.prod(streams.shape[1:]))
    last = step.new((1, *streams.shape[1:]))
    assert last.buf is not None
    step.copy(step.dev(streams), last.buf, width * 4, (n - 1) * width * 4, 0)
    return last


def _copy_layer(s: LayerState) -> LayerState:
    return copy.deepcopy(s)


def _release(dev: list[DeviceLayerState]) -> None:
    for d in dev:
        d.release()


# -----------------------------------------------------------------------------
# `--backend vulkan`: the device-resident forward (docs/vulkan.md, ADR 0066).
#
# The sequence's KV state and each step's activations live in device buffers; a step is
# recorded into one submission plus one per host fallback still taken (the list is
# forward.HOST_FALLBACKS, reported by docs/vulkan.md#status). Weight products run over the
# raw GGUF blocks resident on the device. Steering and activation capture run the
# reference forward with the same device weight products instead.


class VulkanRunner(ReferenceRunner):
    """The reference runner's session machinery over device-resident states."""

    def __init__(self, model: ModelFile, hparams: DeepSeekV4HParams, numerics: Numerics,
                 dequantizer: Dequantizer, store: VulkanWeightStore) -> None:  # fmt: skip
        super().__init__(model, hparams, numerics, dequantizer, weights=store)
        self.device_forward = VulkanForward(hparams, store, numerics)

    def new_state(self, ctx: int) -> SequenceState:
        return VulkanState(self.device_forward, self.forward, ctx)


def vulkan_runner(
    model: ModelFile,
    hparams: DeepSeekV4HParams,
    *,
    numerics: str = "ds4",
    dequantizer: Dequantizer | None = None,
    device_forward: bool = True,
) -> ModelRunner:
    """The vulkan backend over an opened model; Ds4Error saying why where it cannot run.
    device_forward False: the earlier path (reference forward on the host, each weight
    product one submission), kept for side-by-side measurement."""
    chosen = reference_numerics(numerics, hparams)
    try:
        rt = runtime()
    except VulkanUnavailableError as exc:
        raise Ds4Error(f"--backend vulkan: {exc}") from None
    deq = dequantizer or NumpyDequantizer()
    store = VulkanWeightStore(model, deq, chosen, rt)
    if not device_forward:
        return ReferenceRunner(model, hparams, chosen, deq, weights=store)
    return VulkanRunner(model, hparams, chosen, deq, store)
