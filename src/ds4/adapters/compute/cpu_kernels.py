"""numpy-facing wrappers of the native CPU kernels (ds4._native_cpu, docs/reference/formats.md §5).

Weights are passed as raw GGUF block bytes (a uint8 view of the mmapped tensor, one row
per output value); nothing is dequantized or copied. Activations are f32 and quantized
natively as the weight type requires (per-32 with f32 scale for Q8_0, Q8_K for K-quants
and IQ2_XXS). `impl` picks the kernels: "auto" (best this CPU has), "scalar" (the nominal
formulas, bit-identical to the numpy reference) or a SIMD set by name ("avx2" on x86-64,
"avx512" on x86-64 with AVX-512 VBMI and VNNI, "neon" on aarch64, which uses SDOT where
the CPU has it).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from ds4 import _native_cpu  # type: ignore[attr-defined]
from ds4.domain.engine_math.quant_dots import QuantizedActivation
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.quant_formats import CPU_MATMUL_TYPES, Q8K_ACTIVATION_TYPES

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]

_ffi = _native_cpu.ffi
_lib = _native_cpu.lib

IMPLS: dict[str, int] = {"auto": 0, "scalar": 1, "avx2": 2, "neon": 3, "avx512": 4}
# The weight types with native CPU kernels, and those whose activation is Q8_K
# (QUANT_FORMATS' cpu column).
MATMUL_TYPES = CPU_MATMUL_TYPES
Q8K_TYPES = Q8K_ACTIVATION_TYPES
_ERRORS = {
    1: "weight type not supported",
    2: "shapes do not agree or are not whole blocks",
    3: "kernel implementation not available on this CPU",
    4: "out of memory",
    5: "expert id out of range",
}
_F32 = np.dtype(np.float32)
_from_buffer = _ffi.from_buffer
_Q8K_DTYPE = np.dtype([("d", "<f4"), ("q", "i1", (256,)), ("bsums", "<i2", (16,))])
_Q8A_DTYPE = np.dtype([("d", "<f4"), ("q", "i1", (32,))])


@dataclass(frozen=True)
class ExpertWeights:
    """A 3-D expert tensor as raw blocks: (n_expert, rows, row_bytes) uint8."""

    raw: U8
    ggml_type: GGMLType


def available_impls() -> tuple[str, ...]:
    return tuple(name for name, code in IMPLS.items() if _lib.ds4_cpu_impl_available(code))


def best_impl() -> str:
    code = int(_lib.ds4_cpu_best_impl())
    return next(name for name, c in IMPLS.items() if c == code)


def set_threads(n: int) -> None:
    """Resize the persistent pool (the calling thread counts as one)."""
    if not 1 <= n <= 256 or _lib.ds4_cpu_set_threads(n) != 0:
        raise Ds4Error(f"cannot use {n} CPU threads (1..256)")


def set_pool_spin_us(us: int) -> None:
    """How long idle pool workers spin before sleeping (0 = sleep at once, the default)."""
    if not 0 <= us <= 10000 or _lib.ds4_cpu_set_pool_spin_us(us) != 0:
        raise Ds4Error(f"pool spin of {us} us is out of range (0..10000)")


def threads() -> int:
    return int(_lib.ds4_cpu_threads())


def quantize_activation_q8_0(x: npt.ArrayLike) -> QuantizedActivation:
    """Per-32 int8 codes with f32 scales; rows of a 2-D x are quantized independently."""
    xs = _f32_rows(x)
    nb = -(-xs.shape[-1] // 32)
    out = np.zeros((xs.shape[0], nb), dtype=_Q8A_DTYPE)
    for t in range(xs.shape[0]):
        _lib.ds4_cpu_quantize_q8a(
            _ptr("float *", xs[t]), xs.shape[-1], _ptr("ds4_block_q8a *", out[t])
        )
    shape = np.shape(x)[:-1]
    return QuantizedActivation(
        out["q"].astype(np.int32).reshape(*shape, nb, 32), out["d"].reshape(*shape, nb)
    )


def quantize_activation_q8k(x: npt.ArrayLike) -> QuantizedActivation:
    """Q8_K blocks (codes, f32 scale d, 16 bsums per 256 values); length % 256 == 0."""
    xs = _f32_rows(x)
    if xs.shape[-1] % 256:
        raise Ds4Error(f"Q8_K needs a multiple of 256 values, got {xs.shape[-1]}")
    nb = xs.shape[-1] // 256
    out = np.zeros((xs.shape[0], nb), dtype=_Q8K_DTYPE)
    for t in range(xs.shape[0]):
        _lib.ds4_cpu_quantize_q8k(
            _ptr("float *", xs[t]), xs.shape[-1], _ptr("ds4_block_q8k *", out[t])
        )
    shape = np.shape(x)[:-1]
    return QuantizedActivation(
        out["q"].astype(np.int32).reshape(*shape, nb, 256),
        out["d"].reshape(*shape, nb),
        out["bsums"].astype(np.int32).reshape(*shape, nb, 16),
    )


def matvec(
    raw: U8, ggml_type: GGMLType | int, x: npt.ArrayLike, *, threads: int | None = None,
    impl: str = "auto",
) -> F32:  # fmt: skip
    """y = W x for raw weight rows (rows, row_bytes) and x (cols,) -> (rows,)."""
    kind = _matmul_type(ggml_type)
    xv = np.ascontiguousarray(x, dtype=np.float32)
    if xv.ndim != 1:
        raise Ds4Error(f"matvec takes one activation vector, got shape {xv.shape}")
    rows, row_stride = _check_rows(raw, kind, xv.shape[0], "weight")
    y = np.empty(rows, dtype=np.float32)
    code = _impl_code(impl, threads)
    rc = _lib.ds4_cpu_matmul(
        int(kind), _ptr("uint8_t *", raw), row_stride, rows, xv.shape[0],
        _ptr("float *", xv), 1, _ptr("float *", y), code,
    )  # fmt: skip
    _raise_on(rc, f"matvec {kind.name} {raw.shape} x {xv.shape}")
    return y


def matmul(
    raw: U8, ggml_type: GGMLType | int, x: npt.ArrayLike, *, threads: int | None = None,
    impl: str = "auto",
) -> F32:  # fmt: skip
    """y[t] = W x[t] for x (n_tok, cols) -> (n_tok, rows); each token as its own matvec."""
    kind = _matmul_type(ggml_type)
    xs = np.ascontiguousarray(x, dtype=np.float32)
    if xs.ndim != 2:
        raise Ds4Error(f"matmul takes (tokens, cols) activations, got shape {xs.shape}")
    rows, row_stride = _check_rows(raw, kind, xs.shape[1], "weight")
    y = np.empty((xs.shape[0], rows), dtype=np.float32)
    code = _impl_code(impl, threads)
    rc = _lib.ds4_cpu_matmul(
        int(kind), _ptr("uint8_t *", raw), row_stride, rows, xs.shape[1],
        _ptr("float *", xs), xs.shape[0], _ptr("float *", y), code,
    )  # fmt: skip
    _raise_on(rc, f"matmul {kind.name} {raw.shape} x {xs.shape}")
    return y


class PreparedProduct:
    """y = W x for one fixed weight matrix, checked once: the weight type, the raw
    blocks' shape and strides and the kernel set are validated here, and the weight
    pointer, the row geometry and the implementation code are kept, so a call checks
    only its activation (type, length, layout) before entering C. For callers that run
    the same product many times (the fixed cost of cpu_kernels.matvec is mostly these
    checks and conversions)."""

    __slots__ = ("_args", "_call", "_code", "_cols", "_kind", "_raw", "_rows", "_what", "_xshape")

    def __init__(
        self, raw: U8, ggml_type: GGMLType | int, cols: int, *, impl: str = "auto"
    ) -> None:
        kind = _matmul_type(ggml_type)
        if not isinstance(cols, int) or cols <= 0:
            raise Ds4Error(f"prepared product: cols must be a positive int, got {cols!r}")
        rows, row_stride = _check_rows(raw, kind, cols, "weight")
        self._code = _impl_code(impl, None)
        self._raw = raw  # keeps the weight buffer alive for the pointer below
        self._kind, self._rows, self._cols = int(kind), rows, cols
        self._args = (int(kind), _ptr("uint8_t *", raw), row_stride, rows, cols)
        self._call, self._xshape = _lib.ds4_cpu_matmul, (cols,)
        self._what = f"{kind.name} {raw.shape}"

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, cols): outputs and inputs of one product."""
        return self._rows, self._cols

    def matvec(self, x: npt.ArrayLike, out: F32 | None = None) -> F32:
        """W x for x (cols,) f32 -> (rows,); into `out` ((rows,) f32, contiguous) if given."""
        if not (type(x) is np.ndarray and x.dtype is _F32 and x.shape == self._xshape
                and x.flags.c_contiguous):  # fmt: skip
            x = self._activation(x, 1)
        y = (
            np.empty(self._rows, dtype=np.float32)
            if out is None
            else self._output(out, (self._rows,))
        )
        rc = self._call(*self._args, _from_buffer("float[]", x), 1,
                        _from_buffer("float[]", y), self._code)  # fmt: skip
        if rc:
            _raise_on(rc, f"prepared matvec {self._what}")
        return y

    def matmul(self, x: npt.ArrayLike, out: F32 | None = None) -> F32:
        """W x[t] for x (n_tok, cols) f32 -> (n_tok, rows); into `out` if given."""
        xs = self._activation(x, 2)
        n_tok = xs.shape[0]
        y = (
            np.empty((n_tok, self._rows), np.float32)
            if out is None
            else self._output(out, (n_tok, self._rows))
        )
        rc = self._call(*self._args, _from_buffer("float[]", xs), n_tok,
                        _from_buffer("float[]", y), self._code)  # fmt: skip
        if rc:
            _raise_on(rc, f"prepared matmul {self._what} x {xs.shape}")
        return y

    def _activation(self, x: npt.ArrayLike, ndim: int) -> F32:
        """x as contiguous f32: (cols,) for matvec (ndim 1), (n_tok, cols) for matmul."""
        xs: F32 = np.ascontiguousarray(x, dtype=np.float32)
        if xs.ndim != ndim or xs.shape[-1] != self._cols or xs.size == 0:
            what = "one activation vector" if ndim == 1 else "(tokens, cols) activations"
            raise Ds4Error(f"prepared product {self._what} takes {what} of {self._cols} "
                           f"values, got shape {xs.shape}")  # fmt: skip
        return xs

    def _output(self, out: F32, shape: tuple[int, ...]) -> F32:
        """The caller's output buffer, checked against the product's output shape."""
        if not (type(out) is np.ndarray and out.dtype is _F32 and out.shape == shape
                and out.flags.c_contiguous and out.flags.writeable):  # fmt: skip
            raise Ds4Error(f"prepared product {self._what}: out must be a writeable "
                           f"contiguous float32 array of shape {shape}")  # fmt: skip
        return out


def prepare(
    raw: U8, ggml_type: GGMLType | int, cols: int, *, impl: str = "auto"
) -> PreparedProduct:
    """A PreparedProduct for raw weight rows (rows, row_bytes) holding `cols` values."""
    return PreparedProduct(raw, ggml_type, cols, impl=impl)


def moe_forward(
    x: npt.ArrayLike,
    gate: ExpertWeights,
    up: ExpertWeights,
    down: ExpertWeights,
    expert_ids: npt.ArrayLike,
    route_weights: npt.ArrayLike,
    *,
    clamp: float,
    threads: int | None = None,
    impl: str = "auto",
) -> F32:
    """Routed experts for one token (docs/reference/formats.md §5.8): x (n_embd,) -> (n_embd,)."""
    xv = np.ascontiguousarray(x, dtype=np.float32)
    ids = np.ascontiguousarray(expert_ids, dtype=np.int32)
    wts = np.ascontiguousarray(route_weights, dtype=np.float32)
    if xv.ndim != 1 or ids.ndim != 1 or ids.shape != wts.shape:
        raise Ds4Error(f"moe_forward: x {xv.shape}, ids {ids.shape}, weights {wts.shape}")
    for part in (gate, up, down):
        if part.ggml_type not in Q8K_TYPES or part.raw.ndim != 3:
            names = "/".join(t.name for t in sorted(Q8K_TYPES))
            raise Ds4Error(f"moe_forward: expert weights must be 3-D {names}, got "
                           f"{GGMLType(part.ggml_type).name} {part.raw.shape}")  # fmt: skip
    n_embd, n_expert = xv.shape[0], gate.raw.shape[0]
    n_ff, _ = _check_rows(gate.raw[0], gate.ggml_type, n_embd, "gate")
    if up.raw.shape[:2] != gate.raw.shape[:2] or down.raw.shape[:2] != (n_expert, n_embd):
        raise Ds4Error(
            f"moe_forward: gate {gate.raw.shape}, up {up.raw.shape}, down {down.raw.shape}"
        )
    _check_rows(up.raw[0], up.ggml_type, n_embd, "up")
    _check_rows(down.raw[0], down.ggml_type, n_ff, "down")
    out = np.empty(n_embd, dtype=np.float32)
    code = _impl_code(impl, threads)
    keep = [_experts(part) for part in (gate, up, down)]
    rc = _lib.ds4_cpu_moe(
        _ptr("float *", xv), n_embd, n_ff, n_expert, *keep, _ptr("int32_t *", ids),
        _ptr("float *", wts), ids.shape[0], float(clamp), _ptr("float *", out), code,
    )  # fmt: skip
    _raise_on(rc, f"moe_forward ids {ids.tolist()}")
    return out


def q2k_x8_repack(raw: U8) -> U8:
    """Q2_K rows (rows, row_bytes) interleaved 8 at a time, a new array of the same
    shape for `q2k_x8_matvec` (docs/adr/0067-q2k-row-interleaved-repack.md)."""
    cols = _q2k_cols(raw, "q2k_x8_repack")
    out = np.empty(raw.shape, dtype=np.uint8)
    rc = _lib.ds4_cpu_q2k_x8_repack(
        _ptr("uint8_t *", raw), raw.strides[0], raw.shape[0], cols, _ptr("uint8_t *", out)
    )
    _raise_on(rc, f"q2k_x8_repack {raw.shape}")
    return out


def q2k_x8_unpack(packed: U8) -> U8:
    """The GGUF rows back from `q2k_x8_repack`'s output."""
    cols = _q2k_cols(packed, "q2k_x8_unpack")
    out = np.empty(packed.shape, dtype=np.uint8)
    rc = _lib.ds4_cpu_q2k_x8_unpack(
        _ptr("uint8_t *", np.ascontiguousarray(packed)), packed.shape[0], cols,
        _ptr("uint8_t *", out),
    )  # fmt: skip
    _raise_on(rc, f"q2k_x8_unpack {packed.shape}")
    return out


def q2k_x8_matvec(
    packed: U8, x: npt.ArrayLike, *, threads: int | None = None, impl: str = "auto"
) -> F32:
    """y = W x for one token over repacked Q2_K rows (AVX-512 set only). Within the
    scalar kernel's rounding bound, the same bits for any thread count, not bit-identical
    to `matvec` on the GGUF rows."""
    xv = np.ascontiguousarray(x, dtype=np.float32)
    cols = _q2k_cols(packed, "q2k_x8_matvec")
    if xv.shape != (cols,):
        raise Ds4Error(f"q2k_x8_matvec: x of shape {xv.shape}, rows of {cols} values")
    if not packed.flags.c_contiguous:
        raise Ds4Error("q2k_x8_matvec: repacked rows must be one contiguous array")
    y = np.empty(packed.shape[0], dtype=np.float32)
    code = _impl_code(impl, threads)
    rc = _lib.ds4_cpu_q2k_x8_matvec(
        _ptr("uint8_t *", packed), packed.shape[0], cols, _ptr("float *", xv),
        _ptr("float *", y), code,
    )  # fmt: skip
    _raise_on(rc, f"q2k_x8_matvec {packed.shape} (impl {impl!r})")
    return y


def _q2k_cols(raw: U8, what: str) -> int:
    """Values per row of a 2-D uint8 array of whole Q2_K rows."""
    if raw.dtype != np.uint8 or raw.ndim != 2 or raw.shape[1] % 84:
        raise Ds4Error(f"{what}: expected 2-D uint8 Q2_K rows (84 bytes a block), got "
                       f"{raw.dtype} {raw.shape}")  # fmt: skip
    cols: int = raw.shape[1] // 84 * 256
    _check_rows(raw, GGMLType.Q2_K, cols, what)
    return cols


def _f32_rows(x: npt.ArrayLike) -> F32:
    xs = np.asarray(x, dtype=np.float32)
    if xs.ndim == 0 or xs.shape[-1] == 0:
        raise Ds4Error(f"cannot quantize an activation of shape {xs.shape}")
    rows: F32 = np.ascontiguousarray(xs.reshape(-1, xs.shape[-1]))
    return rows


def _matmul_type(ggml_type: GGMLType | int) -> GGMLType:
    if ggml_type in MATMUL_TYPES and isinstance(ggml_type, GGMLType):
        return ggml_type  # the common call: no enum construction (part of the fixed cost)
    try:
        kind = GGMLType(int(ggml_type))
    except ValueError:
        raise Ds4Error(f"unknown GGML type {ggml_type}") from None
    if kind not in MATMUL_TYPES:
        raise Ds4Error(f"the CPU kernels do not support {kind.name} weights")
    return kind


@functools.lru_cache(maxsize=256)
def _row_bytes(kind: int, cols: int) -> int:
    return int(_lib.ds4_cpu_row_bytes(kind, cols))


def _check_rows(raw: U8, kind: GGMLType, cols: int, what: str) -> tuple[int, int]:
    """(rows, row_stride) of a raw 2-D block view whose rows hold `cols` values."""
    if raw.dtype != np.uint8 or raw.ndim != 2:
        raise Ds4Error(f"{what}: expected 2-D uint8 raw blocks, got {raw.dtype} {raw.shape}")
    need = _row_bytes(int(kind), cols)
    if need == 0 or raw.shape[1] != need:
        raise Ds4Error(f"{what}: {kind.name} rows of {cols} values need {need or 'whole-block'} "
                       f"bytes, got {raw.shape[1]}")  # fmt: skip
    if raw.strides[1] != 1 or raw.strides[0] < need:
        raise Ds4Error(f"{what}: rows must be contiguous bytes (strides {raw.strides})")
    return raw.shape[0], raw.strides[0]


def _experts(part: ExpertWeights) -> Any:
    s = _ffi.new("ds4_cpu_experts *")
    s.base = _ptr("uint8_t *", part.raw)
    s.expert_stride = part.raw.strides[0]
    s.row_stride = part.raw.strides[1]
    s.type = int(part.ggml_type)
    if part.raw.strides[2] != 1:
        raise Ds4Error(f"expert rows must be contiguous bytes (strides {part.raw.strides})")
    return s


# The CPU does not change under a running process: availability is asked once.
_AVAILABLE = {name: bool(_lib.ds4_cpu_impl_available(code)) for name, code in IMPLS.items()}


def _impl_code(impl: str, n_threads: int | None) -> int:
    code = IMPLS.get(impl)
    if code is None or not _AVAILABLE.get(impl, False):
        raise Ds4Error(f"CPU kernel set {impl!r} is not available (have {available_impls()})")
    if n_threads is not None and n_threads != threads():
        set_threads(n_threads)
    return code


def _ptr(ctype: str, arr: npt.NDArray[Any]) -> Any:
    """A pointer to arr's first element (valid while the caller holds arr). from_buffer
    for contiguous arrays: a few times cheaper than arr.ctypes, which dominated the fixed
    cost of a small product."""
    if arr.flags.c_contiguous and arr.size:
        return _from_buffer(_ARRAY_OF[ctype], arr)
    return _ffi.cast(ctype, arr.ctypes.data)


_ARRAY_OF = {c: c.replace(" *", "[]") for c in (
    "uint8_t *", "float *", "int32_t *", "ds4_block_q8a *", "ds4_block_q8k *"
)}  # fmt: skip


def _raise_on(rc: int, what: str) -> None:
    if rc != 0:
        raise Ds4Error(f"{what}: {_ERRORS.get(rc, f'native error {rc}')}")
