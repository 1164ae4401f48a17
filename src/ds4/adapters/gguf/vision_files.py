"""An mmproj GGUF (llama.cpp's deepseek4v layout, docs/vision.md §1) opened and
validated in one step, and its weights decoded to float32 for the reference encoder."""

from __future__ import annotations

import numpy as np

from ds4.adapters.gguf.reader import GGUFFile
from ds4.domain.errors import Ds4Error
from ds4.domain.vision.catalog import validate_vision
from ds4.domain.vision.encoder import F32, VisionLayer, VisionWeights
from ds4.domain.vision.hparams import VisionHParams
from ds4.domain.vision.layout import Sentinels
from ds4.ports.model_file import Dequantizer, ModelFile


def load_vision(path: str) -> tuple[GGUFFile, VisionHParams]:
    """The mmapped file and its hyperparameters; Ds4Error naming every problem."""
    try:
        model = GGUFFile(path)
    except OSError as exc:
        raise Ds4Error(f"cannot open vision encoder {path}: {exc.strerror or exc}") from None
    report = validate_vision(model.metadata, model.tensors)
    if not report.ok or report.hparams is None:
        model.close()
        problems = "; ".join(str(p) for p in report.problems) or "not a deepseek4v encoder"
        raise Ds4Error(f"--vision {path}: {problems}")
    return model, report.hparams


def _values(model: ModelFile, deq: Dequantizer, name: str) -> F32:
    info = model.tensors[name]
    flat = deq.dequantize(model.raw(name), info.ggml_type)
    return np.array(flat.reshape(info.numpy_shape), dtype=np.float32, order="C", copy=True)


def vision_weights(model: ModelFile, deq: Dequantizer, hp: VisionHParams) -> VisionWeights:
    """Every tensor of a validated file as f32 (numpy orientation)."""

    def get(name: str) -> F32:
        return _values(model, deq, name)

    def opt(name: str) -> F32 | None:
        return _values(model, deq, name) if name in model.tensors else None

    layers = []
    for il in range(hp.n_layer):
        pre = f"v.blk.{il}."
        layers.append(VisionLayer(
            ln1=get(pre + "ln1.weight"), qkv=get(pre + "attn_qkv.weight"),
            qkv_b=opt(pre + "attn_qkv.bias"), out=get(pre + "attn_out.weight"),
            out_b=opt(pre + "attn_out.bias"), ln2=get(pre + "ln2.weight"),
            gate=get(pre + "ffn_gate.weight"), gate_b=opt(pre + "ffn_gate.bias"),
            up=get(pre + "ffn_up.weight"), up_b=opt(pre + "ffn_up.bias"),
            down=get(pre + "ffn_down.weight"), down_b=opt(pre + "ffn_down.bias"),
        ))  # fmt: skip
    return VisionWeights(
        patch=get("v.patch_embd.weight"), patch_b=opt("v.patch_embd.bias"),
        layers=tuple(layers), post_ln=opt("v.post_ln.weight"),
        mm1=get("mm.1.weight"), mm1_b=get("mm.1.bias"),
        mm2=get("mm.2.weight"), mm2_b=get("mm.2.bias"),
        sentinels=Sentinels(
            start=get("v.token_embd.img_start"), end=get("v.token_embd.img_end"),
            newline=get("v.image_newline"), pad=get("v.token_embd.img_pad"),
        ),
    )  # fmt: skip
