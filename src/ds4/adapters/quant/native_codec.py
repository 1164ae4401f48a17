"""The Dequantizer and Quantizer ports in native C (ds4._native_quant,
ds4._native_quantize), bit- and byte-identical to the numpy codecs (numpy_codec).

Quantize requests are checked by the same code as the numpy reference (check_request),
so both accept, reject and synthesize importance identically. The C call releases the
GIL, so with threads > 1 row ranges are quantized in parallel; the bytes do not depend
on it.
"""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import numpy.typing as npt

from ds4 import _native_quant, _native_quantize  # type: ignore[attr-defined]
from ds4.adapters.quant.numpy_codec import check_request
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import BLOCK_GEOMETRY, GGMLType
from ds4.domain.gguf.quant_formats import DEQUANTIZABLE

_dq_ffi = _native_quant.ffi
_dq_lib = _native_quant.lib


class NativeDequantizer:
    def dequantize(
        self, raw: npt.NDArray[np.uint8], ggml_type: GGMLType
    ) -> npt.NDArray[np.float32]:
        if ggml_type not in DEQUANTIZABLE:
            raise Ds4Error(f"dequantizing {ggml_type.name} is not supported")
        geo = BLOCK_GEOMETRY[ggml_type]
        lead, row_bytes = raw.shape[:-1], raw.shape[-1]
        if row_bytes % geo.nbytes:
            raise Ds4Error(f"{ggml_type.name}: {row_bytes} bytes is not a whole number of blocks")
        row_elements = row_bytes // geo.nbytes * geo.elements
        src = np.ascontiguousarray(raw)
        out = np.empty((*lead, row_elements), dtype=np.float32)
        n = out.size
        rc = _dq_lib.ds4_dequantize(
            int(ggml_type),
            _dq_ffi.from_buffer("uint8_t[]", src),
            n,
            _dq_ffi.from_buffer("float[]", out),
        )
        if rc != 0:
            raise Ds4Error(f"native dequantize of {ggml_type.name} failed (code {rc})")
        return out


# --- The Quantizer port in native C (ds4._native_quantize), byte-identical to numpy.


# --- quantize

_qz_ffi = _native_quantize.ffi
_qz_lib = _native_quantize.lib
_init_lock = threading.Lock()
_initialised: list[bool] = []  # non-empty once the C tables are built
_ERRORS = {
    1: "unsupported type",
    2: "row length is not a whole number of blocks",
    3: "tables not initialised",
    4: "out of memory building tables",
    5: "IQ2_XXS needs importance weights",
}


def _ensure_tables() -> None:
    with _init_lock:
        if not _initialised:
            rc = _qz_lib.ds4_quantize_init()
            if rc != 0:
                raise Ds4Error(f"native quantizer setup failed: {_ERRORS.get(rc, rc)}")
            _initialised.append(True)


class NativeQuantizer:
    def __init__(self, threads: int = 1) -> None:
        if threads < 1:
            raise Ds4Error(f"quantizer threads must be at least 1, got {threads}")
        self._threads = threads
        _ensure_tables()

    def quantize(
        self,
        values: npt.NDArray[np.float32],
        ggml_type: GGMLType,
        importance: npt.NDArray[np.float32] | None = None,
    ) -> npt.NDArray[np.uint8]:
        req = check_request(values, ggml_type, importance)
        rows = req.rows
        n_rows, row = rows.shape
        row_bytes = req.out_shape[-1]
        out = np.empty((n_rows, row_bytes), dtype=np.uint8)
        imp = (
            _qz_ffi.NULL
            if req.importance is None
            else _qz_ffi.from_buffer("float[]", req.importance)
        )

        def run(begin: int, end: int) -> None:
            if begin == end:
                return
            rc = _qz_lib.ds4_quantize_rows(
                int(ggml_type),
                _qz_ffi.from_buffer("float[]", rows[begin:end]),
                end - begin,
                row,
                imp,
                _qz_ffi.from_buffer("uint8_t[]", out[begin:end]),
            )
            if rc != 0:
                msg = _ERRORS.get(rc, f"code {rc}")
                raise Ds4Error(f"native quantize to {ggml_type.name} failed: {msg}")

        workers = min(self._threads, n_rows)
        if workers <= 1:
            run(0, n_rows)
        else:
            bounds = np.linspace(0, n_rows, workers + 1).astype(int)
            with ThreadPoolExecutor(max_workers=workers) as pool:
                jobs = [pool.submit(run, int(a), int(b)) for a, b in itertools.pairwise(bounds)]
                for job in jobs:
                    job.result()
        return out.reshape(req.out_shape)
