"""The trained torch model -> a checkpoint directory `ds4 gguf convert` reads.

The checkpoint uses the release's tensor names (docs/oracle/hf_deepseek_v4.md §2) so the
MTP block, which transformers cannot name, can travel with it (`mtp.0.*`, as in the
release). Before writing, every weight is snapped to the grid of the GGML type our quant
preset gives it (F16, or Q8_0 through our own quantizer and back): the converter's
quantization of these values is then exact, the GGUF holds bit for bit the weights the
torch model computes with, and the fp32 logit check compares arithmetic, not rounding.
Rows of tokens never seen in training are written as exact zeros.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from safetensors.numpy import save_file

from ds4.apps import wiring
from ds4.domain.convert.checkpoint_sources import gguf_target
from ds4.domain.convert.hf_config import hparams_from_config
from ds4.domain.convert.plan import quant_plan
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.model.catalog import TensorSpec, model_tensors, mtp_tensors
from tools.demo.shape import DEMO
from tools.demo.torch_model import DemoModel
from tools.oracle.naming import hf_to_official
from tools.oracle.tiny_hf import official_config

QUANT = "q8"  # F16 embedding/HC/router/compressor/indexer, Q8_0 projections and experts
Array = npt.NDArray[Any]

_MTP_EXTRA = {
    "e_proj.weight": "e_proj.weight",
    "h_proj.weight": "h_proj.weight",
    "enorm.weight": "enorm.weight",
    "hnorm.weight": "hnorm.weight",
    "norm.weight": "norm.weight",
    "hc_head.hc_fn": "hc_head_fn",
    "hc_head.hc_base": "hc_head_base",
    "hc_head.hc_scale": "hc_head_scale",
}


def _numpy(state: dict[str, torch.Tensor]) -> dict[str, Array]:
    return {k: v.detach().cpu().numpy().copy() for k, v in state.items()}


def config_json(model: DemoModel) -> dict[str, Any]:
    return official_config(DEMO, model.cfg)


def main_hub(model: DemoModel, seen: npt.NDArray[np.int64]) -> dict[str, Array]:
    state = _numpy(model.hf.state_dict())
    for name, compact in (
        ("model.embed_tokens.weight", model.embed),
        ("lm_head.weight", model.head),
    ):
        full = np.zeros(state[name].shape, np.float32)
        full[seen] = compact.detach().numpy()
        state[name] = full
    return hf_to_official(state)


def mtp_hub(model: DemoModel) -> dict[str, Array]:
    layer = {f"model.layers.0.{k}": v for k, v in _numpy(model.mtp.layer.state_dict()).items()}
    out = {"mtp.0." + k.removeprefix("layers.0."): v for k, v in hf_to_official(layer).items()}
    rest = _numpy({k: v for k, v in model.mtp.state_dict().items() if not k.startswith("layer.")})
    for name, value in rest.items():
        out["mtp.0." + _MTP_EXTRA[name]] = value
    return out


def _specs(config: dict[str, Any]) -> tuple[dict[str, TensorSpec], Any]:
    hp = hparams_from_config(config)
    specs = {s.name: s for s in model_tensors(hp) + mtp_tensors(hp)}
    return specs, hp


def snap(hub: dict[str, Array], config: dict[str, Any]) -> dict[str, Array]:
    """Every float tensor rounded to the values its GGUF type can hold."""
    specs, hp = _specs(config)
    plan = quant_plan(QUANT, hp)
    quantizer, dequantizer = wiring.quantizer("numpy"), wiring.dequantizer("numpy")
    out: dict[str, Array] = {}
    for name, value in hub.items():
        target = gguf_target(name)
        if target is None:
            raise KeyError(f"{name} has no GGUF tensor")
        kind = plan.tensor_type(specs[target.gguf_name], hp)
        values = value.astype(np.float32) if value.dtype.kind == "f" else value
        if kind is GGMLType.F16:
            values = values.astype(np.float16).astype(np.float32)
        elif kind is GGMLType.Q8_0:
            raw = quantizer.quantize(np.ascontiguousarray(values), GGMLType.Q8_0)
            values = dequantizer.dequantize(raw, GGMLType.Q8_0).reshape(values.shape)
        elif kind is GGMLType.I32:
            values = values.astype(np.int32)
        out[name] = np.ascontiguousarray(values)
    return out


def write_checkpoint(hub: dict[str, Array], config: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file(hub, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    text = json.dumps(config, indent=2, sort_keys=True)
    (out_dir / "config.json").write_text(text + "\n", encoding="utf-8")


def load_main(model: DemoModel, hub: dict[str, Array], seen: npt.NDArray[np.int64]) -> None:
    """Put snapped main-model weights back into the torch model (HF and compact rows)."""
    from tools.oracle.naming import official_to_hf

    main = {k: v for k, v in hub.items() if not k.startswith("mtp.")}
    state = {k: torch.from_numpy(np.array(v)) for k, v in official_to_hf(main).items()}
    model.hf.load_state_dict(state, strict=False)
    with torch.no_grad():
        model.embed.copy_(state["model.embed_tokens.weight"][seen])
        model.head.copy_(state["lm_head.weight"][seen])


def load_mtp(model: DemoModel, hub: dict[str, Array]) -> None:
    mtp = {k.removeprefix("mtp.0."): v for k, v in hub.items() if k.startswith("mtp.0.")}
    back = {v: k for k, v in _MTP_EXTRA.items()}
    layer_hub = {f"layers.0.{k}": v for k, v in mtp.items() if k not in back}
    from tools.oracle.naming import official_to_hf

    state = {
        "layer." + k.removeprefix("model.layers.0."): torch.from_numpy(np.array(v))
        for k, v in official_to_hf(layer_hub).items()
    }
    state.update({back[k]: torch.from_numpy(np.array(v)) for k, v in mtp.items() if k in back})
    model.mtp.load_state_dict(state, strict=True)
