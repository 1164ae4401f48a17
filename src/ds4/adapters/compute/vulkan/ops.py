"""The device forward's building blocks over step Values: weight products, RMSNorm, RoPE,
row copies (docs/vulkan.md#device-forward), with the RMSNorm and RoPE kernels themselves
(native/vulkan/rmsnorm.comp, rope.comp). Each op records into the step; nothing here
waits for the device except the marked host fallbacks.
"""

from __future__ import annotations

import struct
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from ds4.adapters.compute.vulkan.device import Buffer
from ds4.adapters.compute.vulkan.runtime import MAX_GROUPS, Recorder, VulkanRuntime, runtime
from ds4.adapters.compute.vulkan.step import DeviceStep, Value
from ds4.adapters.compute.vulkan.weights import (
    SHADERS,
    SHADERS_Q8,
    VulkanWeights,
    VulkanWeightStore,
    kernel_tables,
    per32_activation,
    record_matmul,
    record_matmul_q8,
    record_quantize_for,
)
from ds4.domain.engine_math.layers import RopeParams, rope_angles
from ds4.domain.errors import Ds4Error

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

    def mm(self, step: DeviceStep, name: str, x: Value, *, rows: slice | None = None,
           expert: int | None = None) -> Value:  # fmt: skip
        """y (n, out) = W x[t] for x (n, in), as the weight store's matmul computes it."""
        w = self.store.device(name, rows=rows, expert=expert)
        return self.mm_w(step, w, x)

    def mm_w(self, step: DeviceStep, w: VulkanWeights, x: Value) -> Value:
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

    def _quantized(self, step: DeviceStep, w: VulkanWeights, x: Value) -> list[Buffer]:
        """[codes, scales, bsums] of x as w's integer dot needs them, quantized on the
        device (bit-identical to the engine's host quantizers)."""
        n = x.shape[0]
        acts = self.act_buffers(step, w, n, 1)
        xbuf = step.dev(x)
        step.record(lambda rec: record_quantize_for(rec, w, xbuf, acts, n))
        return [acts[0], acts[1], acts[3]]

    def act_buffers(
        self, step: DeviceStep, w: VulkanWeights, n_rows: int, n_out: int
    ) -> list[Buffer]:
        """[codes, scales, y, bsums] for n_rows activations of w's width and n_out output
        rows of w.rows (step buffers)."""
        block = 32 if per32_activation(w.ggml_type) else 256
        n_blocks = n_rows * w.cols // block
        return [step.alloc(n_rows * w.cols), step.alloc(n_blocks * 4),
                step.alloc(n_out * w.rows * 4), step.alloc(n_blocks * 16 * 4)]  # fmt: skip

    def norm(self, step: DeviceStep, x: Value, weight: str | None, dim: int, eps: float) -> Value:
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

    def rope_tables(self, step: DeviceStep, positions: I64, rp: RopeParams, iterated: bool
                    ) -> tuple[Value, Value]:  # fmt: skip
        """cos/sin for these positions (host trig, as the reference rounds it), uploaded."""
        cos, sin = rope_tables(positions, rp, iterated=iterated)
        return step.host(cos), step.host(sin)

    def rope(self, step: DeviceStep, x: Value, shape: tuple[int, int, int],
             tables: tuple[Value, Value], n_rot: int, *,
             inverse: bool = False) -> None:  # fmt: skip
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


# -----------------------------------------------------------------------------
# RMSNorm on the GPU (native/vulkan/rmsnorm.comp; docs/vulkan.md#kernels).


def rmsnorm(
    x: npt.ArrayLike, weight: npt.ArrayLike | None, eps: float, *, rt: VulkanRuntime | None = None
) -> F32:
    """RMSNorm over the last axis of x (any leading shape), optionally times weight."""
    xs = np.ascontiguousarray(x, dtype=np.float32)
    if xs.ndim == 0 or xs.shape[-1] == 0:
        raise Ds4Error(f"rmsnorm: cannot normalise shape {xs.shape}")
    dim = xs.shape[-1]
    n_rows = xs.size // dim
    if not 0.0 < eps < 1.0:
        raise Ds4Error(f"rmsnorm: eps {eps} outside (0, 1)")
    w = np.ones(dim, np.float32) if weight is None else np.ascontiguousarray(weight, np.float32)
    if w.shape != (dim,):
        raise Ds4Error(f"rmsnorm: weight {w.shape} does not match rows of {dim}")
    rt = rt or runtime()
    xb, wb, yb = (rt.scratch("norm.x", xs.nbytes), rt.scratch("norm.w", w.nbytes),
                  rt.scratch("norm.y", xs.nbytes))  # fmt: skip
    xb.write(xs)
    wb.write(w)
    rt.run(lambda rec: record_rmsnorm(rec, xb, wb, yb, dim, n_rows, eps, weight is not None))
    out: F32 = yb.read(np.float32, xs.size).reshape(xs.shape)
    return out


def record_rmsnorm(
    rec: Recorder, x: Buffer, weight: Buffer, y: Buffer, dim: int, n_rows: int, eps: float,
    weighted: bool,
) -> None:  # fmt: skip
    """Record y = rmsnorm(x) [* weight] over n_rows rows of dim (chained submissions)."""
    push = struct.pack("<IIfI", dim, n_rows, eps, int(weighted))
    gx = min(n_rows, MAX_GROUPS)
    rec.dispatch("rmsnorm", [x, weight, y], push, (gx, -(-n_rows // gx), 1))


# -----------------------------------------------------------------------------
# RoPE / YaRN on the GPU (native/vulkan/rope.comp; docs/vulkan.md#kernels).
#
# The angles and their cos/sin come from the engine's own rope_angles (f32 iteration, YaRN
# blend) and are rounded to f32 once on the host, as the reference does; the device only
# rotates. GPU sin/cos have no accuracy guarantee for large angles (positions in the tens
# of thousands), so computing them there would break agreement with the cpu backend.

WG = 64


def rope_tables(positions: npt.ArrayLike, rp: RopeParams, *, iterated: bool) -> tuple[F32, F32]:
    """cos and sin (n_pos, n_rot/2) in f32, exactly as the reference rounds them."""
    angles = rope_angles(np.asarray(positions, dtype=np.int64), rp, iterated=iterated)
    cos: F32 = np.cos(angles.astype(np.float64)).astype(np.float32)
    sin: F32 = np.sin(angles.astype(np.float64)).astype(np.float32)
    return cos, sin


def apply_rope(
    x: npt.ArrayLike, positions: npt.ArrayLike, rp: RopeParams, *, iterated: bool = True,
    inverse: bool = False, rt: VulkanRuntime | None = None,
) -> F32:  # fmt: skip
    """Rotate the last n_rot dims of x (n_tok, n_head, dim) by each token's position."""
    xs = np.ascontiguousarray(x, dtype=np.float32)
    pos = np.asarray(positions, dtype=np.int64).reshape(-1)
    if xs.ndim != 3 or xs.shape[0] != pos.size:
        raise Ds4Error(f"rope: x {xs.shape} must be (n_tok, n_head, dim) with one position each")
    n_tok, n_head, dim = xs.shape
    if rp.n_rot <= 0 or rp.n_rot % 2 or rp.n_rot > dim:
        raise Ds4Error(f"rope: n_rot {rp.n_rot} must be even and within the head dim {dim}")
    cos, sin = rope_tables(pos, rp, iterated=iterated)
    rt = rt or runtime()
    xb, cb, sb = (rt.scratch("rope.x", xs.nbytes), rt.scratch("rope.cos", cos.nbytes),
                  rt.scratch("rope.sin", sin.nbytes))  # fmt: skip
    xb.write(xs)
    cb.write(cos)
    sb.write(sin)
    rt.run(lambda rec: record_rope(rec, xb, cb, sb, (n_tok, n_head, dim), rp.n_rot, inverse))
    out: F32 = xb.read(np.float32, xs.size).reshape(xs.shape)
    return out


def record_rope(
    rec: Recorder, x: Buffer, cos: Buffer, sin: Buffer, shape: tuple[int, int, int],
    n_rot: int, inverse: bool,
) -> None:  # fmt: skip
    """Record the in-place rotation of x (n_tok, n_head, dim) by rope_tables' cos/sin."""
    n_tok, n_head, dim = shape
    groups = -(-(n_tok * n_head * (n_rot // 2)) // WG)
    gx = min(groups, MAX_GROUPS)
    push = struct.pack("<5I", n_tok, n_head, dim, n_rot, int(inverse))
    rec.dispatch("rope", [x, cos, sin], push, (gx, -(-groups // gx), 1))
