"""The model as the native forward sees it: one ds4_fw_layer struct per layer and the
head struct, built once at load with pointers into the mmapped GGUF blocks (matrices)
and into small f32 copies (norms, HC scale/base, sinks, ape, bias, YaRN ramp).

Every array a struct points into is kept in `keep`, so the pointers stay valid for the
life of the layout (the GGUF map itself outlives the runner).

A layout may hold a contiguous range of layers only, with or without the head: a
distributed worker (adapters/compute/ray) builds its own range and touches no other
layer's tensors, the coordinator builds the head alone. LayoutBuilder fills one layer
or head struct from any GGUF (the MTP block's file too, adapters/compute/cpu/mtp.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ds4 import _native_cpu  # type: ignore[attr-defined]
from ds4.adapters.compute import cpu_kernels
from ds4.adapters.gguf.model_files import TensorValues
from ds4.domain.engine_math.layers import RopeParams, Yarn, rope_angles, yarn_ramp
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.model_file import ModelFile

_ffi = _native_cpu.ffi

# ds4_fw_layer matrix field -> tensor suffix after "blk.N."
_LAYER_MATS = {
    "hc_attn_fn": "hc_attn_fn.weight", "q_a": "attn_q_a.weight", "q_b": "attn_q_b.weight",
    "kv": "attn_kv.weight", "out_a": "attn_output_a.weight", "out_b": "attn_output_b.weight",
    "comp_kv": "attn_compressor_kv.weight", "comp_gate": "attn_compressor_gate.weight",
    "idx_kv": "indexer_compressor_kv.weight", "idx_gate": "indexer_compressor_gate.weight",
    "idx_q_b": "indexer.attn_q_b.weight", "idx_proj": "indexer.proj.weight",
    "hc_ffn_fn": "hc_ffn_fn.weight", "gate_inp": "ffn_gate_inp.weight",
    "gate_exps": "ffn_gate_exps.weight", "up_exps": "ffn_up_exps.weight",
    "down_exps": "ffn_down_exps.weight", "gate_sh": "ffn_gate_shexp.weight",
    "up_sh": "ffn_up_shexp.weight", "down_sh": "ffn_down_shexp.weight",
}  # fmt: skip
# ds4_fw_layer f32 vector field -> tensor suffix
_LAYER_VECS = {
    "hc_attn_scale": "hc_attn_scale.weight", "hc_attn_base": "hc_attn_base.weight",
    "attn_norm": "attn_norm.weight", "q_a_norm": "attn_q_a_norm.weight",
    "kv_norm": "attn_kv_a_norm.weight", "sinks": "attn_sinks.weight",
    "comp_ape": "attn_compressor_ape.weight", "comp_norm": "attn_compressor_norm.weight",
    "idx_ape": "indexer_compressor_ape.weight", "idx_norm": "indexer_compressor_norm.weight",
    "hc_ffn_scale": "hc_ffn_scale.weight", "hc_ffn_base": "hc_ffn_base.weight",
    "ffn_norm": "ffn_norm.weight", "probs_bias": "exp_probs_b.bias",
}  # fmt: skip


# Hyper-connection streams the native forward holds on the stack (DS4_FW_MAX_HC in
# native/cpu/fwd_internal.h); every DeepSeek V4 model has 4.
MAX_HC = 16


class LayoutBuilder:
    """Fills ds4_fw_* structs from one GGUF: matrices point into its mmapped blocks,
    small vectors into f32 copies kept alive in `keep`."""

    def __init__(self, model: ModelFile, hp: DeepSeekV4HParams, weights: TensorValues) -> None:
        if hp.n_hc > MAX_HC:
            raise Ds4Error(
                f"{hp.n_hc} hyper-connection streams: the cpu backend takes at most {MAX_HC}; "
                "use --backend reference"
            )
        self.hp = hp
        self._model = model
        self._weights = weights
        self.keep: list[Any] = []

    def ptr(self, ctype: str, arr: npt.NDArray[Any]) -> Any:
        arr = np.ascontiguousarray(arr)
        self.keep.append(arr)
        return _ffi.cast(ctype, arr.ctypes.data)

    def mat(self, dst: Any, name: str) -> None:
        if name not in self._model.tensors:
            return  # data stays NULL: the layer has no such tensor
        info = self._model.tensors[name]
        if info.ggml_type not in cpu_kernels.MATMUL_TYPES:
            raise Ds4Error(f"{name}: the CPU backend has no kernel for {info.ggml_type.name}")
        raw = self._model.raw(name)
        self.keep.append(raw)
        dst.data = _ffi.cast("const uint8_t *", raw.ctypes.data)
        dst.row_stride = raw.strides[-2]
        dst.expert_stride = raw.strides[0] if raw.ndim == 3 else 0
        dst.rows = info.numpy_shape[-2]
        dst.cols = info.numpy_shape[-1]
        dst.type = int(info.ggml_type)

    def vec(self, name: str) -> Any:
        if name not in self._model.tensors:
            return _ffi.NULL
        return self.ptr("const float *", self._weights.small(name).astype(np.float32))

    def layer(self, c: Any, prefix: str, ratio: int, hash_layer: bool, clamp: float) -> None:
        """One ds4_fw_layer from the tensors named prefix + suffix."""
        hp = self.hp
        c.n_embd, c.n_hc, c.n_head, c.head_dim = hp.n_embd, hp.n_hc, hp.n_head, hp.head_dim
        c.n_rot, c.q_rank, c.o_rank, c.n_groups = (
            hp.n_rot, hp.q_lora_rank, hp.o_lora_rank, hp.n_out_group,
        )  # fmt: skip
        c.n_swa, c.ratio, c.has_indexer = hp.n_swa, ratio, int(ratio == 4)
        c.n_idx_head, c.idx_dim, c.idx_top_k = (
            hp.n_indexer_head, hp.indexer_head_dim, hp.indexer_top_k,
        )  # fmt: skip
        c.n_expert, c.n_used, c.n_ff = hp.n_expert, hp.n_expert_used, hp.n_ff_exp
        c.hash_layer, c.norm_route = int(hash_layer), int(hp.expert_weights_norm)
        c.sinkhorn_iters, c.n_vocab = hp.sinkhorn_iters, hp.n_vocab
        c.rms_eps, c.hc_eps = hp.rms_eps, hp.hc_eps
        c.clamp, c.route_scale = clamp, hp.expert_weights_scale
        if ratio == 0:
            rope = RopeParams(hp.n_rot, hp.rope_freq_base, None)
            c.rope_base, c.yarn_factor, c.yarn_ramp = hp.rope_freq_base, 1.0, _ffi.NULL
        else:
            yarn = Yarn(hp.rope_scaling_factor, hp.rope_orig_ctx, hp.yarn_beta_fast,
                        hp.yarn_beta_slow)  # fmt: skip
            rope = RopeParams(hp.n_rot, hp.compress_rope_freq_base, yarn)
            c.rope_base, c.yarn_factor = hp.compress_rope_freq_base, hp.rope_scaling_factor
            ramp = yarn_ramp(hp.n_rot, hp.compress_rope_freq_base, yarn)
            c.yarn_ramp = self.ptr("const float *", ramp.astype(np.float32))
        # the direct form's per-pair frequency is its angle at position 1
        inv_freq = rope_angles(np.array([1], dtype=np.int64), rope, iterated=False)[0]
        c.rope_inv_freq = self.ptr("const float *", inv_freq.astype(np.float32))
        for field, suffix in _LAYER_MATS.items():
            self.mat(getattr(c, field), prefix + suffix)
        for field, suffix in _LAYER_VECS.items():
            setattr(c, field, self.vec(prefix + suffix))
        if hash_layer:
            name = prefix + "ffn_gate_tid2eid.weight"
            info = self._model.tensors[name]
            if info.ggml_type is not GGMLType.I32 or info.numpy_shape[-1] != hp.n_expert_used:
                raise Ds4Error(f"{name}: expected I32 [{hp.n_expert_used}, n_vocab]")
            table = np.ascontiguousarray(self._model.raw(name)).view("<i4")
            if table.size and not 0 <= int(table.min()) <= int(table.max()) < hp.n_expert:
                raise Ds4Error(
                    f"{name}: expert ids must lie in [0, {hp.n_expert}), found "
                    f"{int(table.min())}..{int(table.max())}"
                )
            c.n_vocab = table.shape[0]
            c.tid2eid = self.ptr("const int32_t *", table)


class NativeLayout(LayoutBuilder):
    def __init__(
        self,
        model: ModelFile,
        hp: DeepSeekV4HParams,
        weights: TensorValues,
        *,
        layers: range | None = None,
        head: bool = True,
    ) -> None:
        """`layers`: the layers to lay out (default all), in order; `layers[i]` of the
        native array is layer `layers.start + i`. `head`: build the output head."""
        super().__init__(model, hp, weights)
        span = range(hp.n_layer) if layers is None else layers
        if span.step != 1 or not 0 <= span.start <= span.stop <= hp.n_layer:
            raise Ds4Error(f"layers {span} are not a range of the model's {hp.n_layer}")
        self.layer_range = span
        # one array: one native call for the whole range
        self.layers = _ffi.new("ds4_fw_layer[]", len(self.layer_range))
        for i, il in enumerate(self.layer_range):
            self.layer(self.layers[i], f"blk.{il}.", hp.compress_ratios[il],
                       hp.is_hash_layer(il), hp.swiglu_clamp[il])  # fmt: skip
        self.head = self._head() if head else _ffi.NULL

    def set_steering(self, dirs: npt.NDArray[np.float32] | None, attn: float, ffn: float) -> None:
        """Directional steering on every laid-out layer (docs/steering.md): dirs
        (n_layer, D) unit rows by model layer, or None to turn it off."""
        for i, il in enumerate(self.layer_range):
            c = self.layers[i]
            if dirs is None:
                c.steer_dir, c.steer_attn, c.steer_ffn = _ffi.NULL, 0.0, 0.0
            else:
                c.steer_dir = self.ptr("const float *", dirs[il].astype(np.float32))
                c.steer_attn, c.steer_ffn = attn, ffn

    def set_capture(self, rows: npt.NDArray[np.float32] | None, attn: bool) -> None:
        """Copy each laid-out layer's attention (attn) or FFN output at a call's last row
        into rows[model layer] (n_layer, D), or stop (None)."""
        for i, il in enumerate(self.layer_range):
            c = self.layers[i]
            c.capture_attn = c.capture_ffn = _ffi.NULL
            if rows is not None:
                ptr = _ffi.cast("float *", rows[il].ctypes.data)
                if attn:
                    c.capture_attn = ptr
                else:
                    c.capture_ffn = ptr

    def _head(self) -> Any:
        hp = self.hp
        h = _ffi.new("ds4_fw_head *")
        self.keep.append(h)
        h.n_embd, h.n_hc, h.rms_eps, h.hc_eps = hp.n_embd, hp.n_hc, hp.rms_eps, hp.hc_eps
        self.mat(h.hc_fn, "output_hc_fn.weight")
        self.mat(h.output, "output.weight")
        h.hc_scale = self.vec("output_hc_scale.weight")
        h.hc_base = self.vec("output_hc_base.weight")
        h.norm = self.vec("output_norm.weight")
        return h
