"""The device forward's building blocks over step Values: weight products, RMSNorm, RoPE,
attention, row copies (docs/vulkan.md#device-forward). Each records into the step;
nothing here waits for the device except the marked host fallbacks."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan.actquant import record_quantize_for
from ds4.adapters.compute.vulkan.buffers import Buffer
from ds4.adapters.compute.vulkan.matvec import SHADERS, VulkanWeights, kernel_tables, record_matmul
from ds4.adapters.compute.vulkan.matvec_q8 import SHADERS_Q8, record_matmul_q8
from ds4.adapters.compute.vulkan.norm import record_rmsnorm
from ds4.adapters.compute.vulkan.rope import record_rope, rope_tables
from ds4.adapters.compute.vulkan.step import Step, Value
from ds4.adapters.compute.vulkan.weight_store import VulkanWeightStore
from ds4.domain.engine_math.layers import RopeParams
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType

F32 = npt.NDArray[np.float32]
T = TypeVar("T")
I64 = npt.NDArray[np.int64]


class Ops:
    """Device ops bound to one weight store; small vectors are uploaded once and kept."""

    def __init__(self, store: VulkanWeightStore) -> None:
        self.store = store
        self.rt = store.rt
        self._vecs: dict[str, Buffer] = {}
        self._objects: dict[str, object] = {}
        self._lock = threading.Lock()

    def vec(self, name: str) -> Buffer:
        """A small f32 tensor (norm weight, sinks) resident on the device."""
        with self._lock:
            have = self._vecs.get(name)
            if have is None:
                data = np.ascontiguousarray(self.store.small(name), dtype=np.float32)
                have = self._vecs[name] = self.rt.upload(data)
        return have

    def mm(self, step: Step, name: str, x: Value, *, rows: slice | None = None,
           expert: int | None = None) -> Value:  # fmt: skip
        """y (n, out) = W x[t] for x (n, in), as the weight store's matmul computes it."""
        w = self.store.device(name, rows=rows, expert=expert)
        return self.mm_w(step, w, x)

    def mm_w(self, step: Step, w: VulkanWeights, x: Value) -> Value:
        n = x.shape[0]
        if int(np.prod(x.shape[1:])) != w.cols:
            raise Ds4Error(f"matmul: activations {x.shape} do not fit {w.cols} columns")
        if w.ggml_type not in SHADERS:
            raise Ds4Error(f"{w.ggml_type.name} weights have no Vulkan kernel yet")
        tables = kernel_tables(self.rt, w)
        y = step.new((n, w.rows))
        ybuf = y.buf
        assert ybuf is not None
        if self.store.activation_quant and w.ggml_type in SHADERS_Q8:
            acts = self._quantized(step, w, x)
            bufs = [acts[0], acts[1], ybuf, acts[2]]
            step.record(lambda rec: record_matmul_q8(rec, w, bufs, n, tables))
            return y
        xbuf = step.dev(x)
        step.record(lambda rec: record_matmul(rec, w, xbuf, ybuf, n, tables))
        return y

    def _quantized(self, step: Step, w: VulkanWeights, x: Value) -> list[Buffer]:
        """[codes, scales, bsums] of x as w's integer dot needs them, quantized on the
        device (bit-identical to the engine's host quantizers)."""
        n = x.shape[0]
        acts = self.act_buffers(step, w, n, 1)
        xbuf = step.dev(x)
        step.record(lambda rec: record_quantize_for(rec, w, xbuf, acts, n))
        return [acts[0], acts[1], acts[3]]

    def act_buffers(self, step: Step, w: VulkanWeights, n_rows: int, n_out: int) -> list[Buffer]:
        """[codes, scales, y, bsums] for n_rows activations of w's width and n_out output
        rows of w.rows (step buffers)."""
        block = 32 if w.ggml_type is GGMLType.Q8_0 else 256
        n_blocks = n_rows * w.cols // block
        return [step.alloc(n_rows * w.cols), step.alloc(n_blocks * 4),
                step.alloc(n_out * w.rows * 4), step.alloc(n_blocks * 16 * 4)]  # fmt: skip

    def norm(self, step: Step, x: Value, weight: str | None, dim: int, eps: float) -> Value:
        """RMSNorm of each dim-wide row of x, times the named weight if any."""
        n_rows = int(np.prod(x.shape)) // dim
        xbuf = step.dev(x)
        y = step.new(x.shape)
        ybuf = y.buf
        assert ybuf is not None
        wbuf = self.vec(weight) if weight is not None else xbuf
        weighted = weight is not None
        step.record(lambda rec: record_rmsnorm(rec, xbuf, wbuf, ybuf, dim, n_rows, eps, weighted))
        return y

    def rope_tables(self, step: Step, positions: I64, rp: RopeParams, iterated: bool
                    ) -> tuple[Value, Value]:  # fmt: skip
        """cos/sin for these positions (host trig, as the reference rounds it), uploaded."""
        cos, sin = rope_tables(positions, rp, iterated=iterated)
        return step.host(cos), step.host(sin)

    def rope(self, step: Step, x: Value, shape: tuple[int, int, int], tables: tuple[Value, Value],
             n_rot: int, *, inverse: bool = False) -> None:  # fmt: skip
        """Rotate x (n_tok, n_head, dim) in place."""
        xbuf, cbuf, sbuf = step.dev(x), step.dev(tables[0]), step.dev(tables[1])
        step.record(lambda rec: record_rope(rec, xbuf, cbuf, sbuf, shape, n_rot, inverse))
        x.changed_on_device()

    def zeros(self, nbytes: int) -> Buffer:
        """A device buffer of at least nbytes zero bytes (kept)."""
        with self._lock:
            have = self._vecs.get(f"zeros.{nbytes}")
            if have is None:
                have = self._vecs[f"zeros.{nbytes}"] = self.rt.upload(np.zeros(nbytes, np.uint8))
        return have

    def cached(self, name: str, make: Callable[[], T]) -> T:
        """A per-runner object built once under name (e.g. a layer's FfnWeights)."""
        with self._lock:
            have = self._objects.get(name)
        if have is None:
            have = make()
            with self._lock:
                have = self._objects.setdefault(name, have)
        return cast(T, have)

    def table(self, name: str, make: Callable[[], npt.NDArray[Any]]) -> Buffer:
        """A device copy of a derived constant (e.g. the hash-routing table), kept."""
        with self._lock:
            have = self._vecs.get(name)
        if have is None:
            data = make()
            with self._lock:
                have = self._vecs.setdefault(name, self.rt.upload(data))
        return have
