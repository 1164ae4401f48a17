"""The MTP block on the native CPU backend (docs/mtp.md): the DraftModel port.

The block is one more ds4_fw_layer (ratio 0, top-k routed, window_from_kept) run over
its own one-layer ds4_fw_seq, fed by ds4_fw_mtp_input_forward (e_proj/h_proj of the
normalised embedding and main-model streams) and read out by ds4_fw_head_forward with
its own HC head and norm and the main model's output matrix. Same kernels and numerics
as the main model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ds4 import _native_cpu  # type: ignore[attr-defined]
from ds4.adapters.compute.cpu.native_forward import NativeForward, error_text
from ds4.adapters.compute.cpu.native_layout import LayoutBuilder
from ds4.adapters.gguf.model_files import TensorValues
from ds4.adapters.quant.native_codec import NativeDequantizer
from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.model.presets import mtp_clamp
from ds4.ports.drafter import DraftState
from ds4.ports.model_file import ModelFile

F32 = npt.NDArray[np.float32]
I64 = npt.NDArray[np.int64]

_ffi = _native_cpu.ffi
_lib = _native_cpu.lib
PREFIX = "mtp.0."


def _fptr(arr: F32) -> Any:
    return _ffi.cast("float *", _ffi.from_buffer(arr))


class CpuDraftModel:
    def __init__(self, main: NativeForward, model: ModelFile, hp: DeepSeekV4HParams) -> None:
        self.main = main
        self.hp = hp
        self._build = LayoutBuilder(model, hp, TensorValues(model, NativeDequantizer()))
        b = self._build
        self.layer = _ffi.new("ds4_fw_layer[]", 1)
        b.layer(self.layer[0], PREFIX, 0, False, mtp_clamp(main.hp))
        self.layer[0].window_from_kept = 1
        self.input = _ffi.new("ds4_fw_mtp_input *")
        self.input.n_embd, self.input.n_hc, self.input.rms_eps = hp.n_embd, hp.n_hc, hp.rms_eps
        b.mat(self.input.e_proj, PREFIX + "e_proj.weight")
        b.mat(self.input.h_proj, PREFIX + "h_proj.weight")
        self.input.enorm = b.vec(PREFIX + "enorm.weight")
        self.input.hnorm = b.vec(PREFIX + "hnorm.weight")
        h = self.head = _ffi.new("ds4_fw_head *")
        h.n_embd, h.n_hc, h.rms_eps, h.hc_eps = hp.n_embd, hp.n_hc, hp.rms_eps, hp.hc_eps
        b.mat(h.hc_fn, PREFIX + "hc_head_fn.weight")
        main.layout.mat(h.output, "output.weight")  # shared with the main model
        h.hc_scale = b.vec(PREFIX + "hc_head_scale.weight")
        h.hc_base = b.vec(PREFIX + "hc_head_base.weight")
        h.norm = b.vec(PREFIX + "norm.weight")
        self._failed = _ffi.new("int *")

    @property
    def window(self) -> int:
        return self.hp.n_swa

    def new_state(self) -> DraftState:
        return CpuDraftState(self)

    def new_seq(self) -> Any:
        seq = _lib.ds4_fw_seq_new(self.layer, 1)
        if seq == _ffi.NULL:
            raise Ds4Error("out of memory for the MTP block's state")
        return _ffi.gc(seq, _lib.ds4_fw_seq_free)

    def block_input(self, hidden: F32, tokens: I64) -> F32:
        k = int(tokens.size)
        emb = np.ascontiguousarray(self.main.embed_rows(tokens))
        hid = np.ascontiguousarray(hidden, dtype=np.float32)
        x = np.empty((k, self.hp.n_hc, self.hp.n_embd), dtype=np.float32)
        rc = _lib.ds4_fw_mtp_input_forward(
            self.input, _fptr(emb), _fptr(hid), k, _fptr(x), self.main.opts
        )
        if rc:
            raise Ds4Error(f"MTP input: {error_text(rc)}")
        return x

    def run(self, seq: Any, x: F32, tokens: I64) -> None:
        ids = tokens.astype(np.int32)
        rc = _lib.ds4_fw_seq_forward(
            seq, self.layer, _fptr(x), _ffi.cast("int32_t *", _ffi.from_buffer(ids)),
            int(ids.size), self.main.opts, self._failed,
        )  # fmt: skip
        if rc:
            raise Ds4Error(f"MTP block: {error_text(rc)}")

    def logits(self, streams: F32) -> F32:
        s = np.ascontiguousarray(streams, dtype=np.float32)
        out = np.empty((s.shape[0], int(self.head.output.rows)), dtype=np.float32)
        rc = _lib.ds4_fw_head_forward(self.head, _fptr(s), s.shape[0], _fptr(out), self.main.opts)
        if rc:
            raise Ds4Error(f"MTP head: {error_text(rc)}")
        return out


class CpuDraftState:
    def __init__(self, model: CpuDraftModel) -> None:
        self._m = model
        self._seq = model.new_seq()
        self._view = (_ffi.new("int64_t *"), _ffi.new("int64_t *"), _ffi.new("size_t *"))

    @property
    def base(self) -> int:
        base, n, width = self._view
        _lib.ds4_fw_seq_rows(self._seq, 0, _lib.DS4_SEQ_RAW, base, n, width)
        return int(base[0]) if n[0] > base[0] else self.length

    @property
    def length(self) -> int:
        return int(_lib.ds4_fw_seq_len(self._seq))

    def restart(self, position: int) -> None:
        seq = self._m.new_seq()
        if position:  # an empty array starts where its first row will go
            _lib.ds4_fw_seq_set_rows(seq, 0, _lib.DS4_SEQ_RAW, position, _ffi.NULL, 0)
            _lib.ds4_fw_seq_set_len(seq, position)
        self._seq = seq

    def truncate(self, n: int) -> None:
        if n <= self.base:
            self.restart(n)
        else:
            _lib.ds4_fw_seq_truncate(self._seq, n)

    def trim(self, keep_from: int) -> None:
        _lib.ds4_fw_seq_trim(self._seq, keep_from)

    def advance(self, hidden: F32, tokens: I64) -> F32:
        ids = np.asarray(tokens, dtype=np.int64).reshape(-1)
        x = self._m.block_input(hidden, ids)
        self._m.run(self._seq, x, ids)  # the native call leaves the state as it was on error
        return x

    def logits(self, streams: F32) -> F32:
        return self._m.logits(streams)
