"""A tiny DeepSeek V4 checkpoint in the release's own format, for llama.cpp's converter.

    python -m tools.peer.tiny_release --out DIR [--schedule hca128] [--seed 2] [--no-mtp]

llama.cpp's `convert_hf_to_gguf.py` reads DeepSeek's hub names and expects the
release's encodings: routed experts as packed FP4 (E2M1, two per byte, low nibble
first) with one E8M0 `.scale` byte per 32 inputs, and a tokenizer beside the weights
(docs/llamacpp.md). The weights are those of tools.oracle.tiny_hf's seeded model; the
routed experts are rounded to FP4 (so FP4 holds them exactly) and one MTP block
(`mtp.0.*`, top-k routed, ratio 0) is added with fresh seeded values. The default
schedule fits llama.cpp's limits: compression ratios 0, 4 and 128 only, an indexer
head of 128 (>= 64), one hash-routed layer of four.
"""

from __future__ import annotations

import argparse
import json
import zlib
from pathlib import Path

import numpy as np
import numpy.typing as npt
import torch
from safetensors.torch import save_file

from tools.oracle.naming import hf_to_official
from tools.oracle.schedules import SCHEDULES, TinySchedule
from tools.oracle.tiny_hf import _copy_tokenizer, build_model, is_bf16_tensor, official_config

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]

FP4_GROUP = 32
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)
E8M0_BIAS = 127


def fp4_encode(w: F32) -> tuple[U8, U8]:
    """(packed codes [rows, cols/2], E8M0 scales [rows, cols/32]) of w rounded to FP4.

    Each group's scale is the power of two that brings its largest magnitude to at
    most 6 (E2M1's largest), so no code clips; values round to the nearest E2M1 value.
    """
    rows, cols = w.shape
    groups = w.reshape(rows, cols // FP4_GROUP, FP4_GROUP).astype(np.float32)
    peak = np.maximum(np.abs(groups).max(axis=-1), np.float32(1e-30))
    exponent = np.ceil(np.log2(peak / 6.0)).astype(np.int32)
    scaled = groups / np.exp2(exponent)[..., None].astype(np.float32)
    codes = np.abs(np.abs(scaled)[..., None] - E2M1).argmin(axis=-1).astype(np.uint8)
    codes |= np.where(scaled < 0, 8, 0).astype(np.uint8)
    flat = codes.reshape(rows, cols)
    packed = (flat[:, 0::2] | (flat[:, 1::2] << 4)).astype(np.uint8)
    return packed, (exponent + E8M0_BIAS).astype(np.uint8)


def _mtp_block(hub: dict[str, npt.NDArray[np.generic]], layer: int, d: int, hc: int, seed: int
               ) -> dict[str, npt.NDArray[np.generic]]:  # fmt: skip
    """mtp.0.*: layer `layer`'s non-compressor tensors (fresh values) plus the MTP extras."""
    out: dict[str, npt.NDArray[np.generic]] = {}

    def fresh(name: str, like: npt.NDArray[np.generic]) -> F32:
        rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
        value = np.asarray(like, np.float32)
        return (rng.permutation(value.reshape(-1)).reshape(value.shape)).astype(np.float32)

    prefix = f"layers.{layer}."
    for name, value in hub.items():
        if name.startswith(prefix) and "compressor" not in name and "indexer" not in name:
            mtp_name = "mtp.0." + name[len(prefix) :]
            out[mtp_name] = fresh(mtp_name, value)
    rng = np.random.default_rng([seed, 1])
    extras: dict[str, tuple[int, ...]] = {
        "e_proj.weight": (d, d), "h_proj.weight": (d, d), "hc_head_fn": (hc, hc * d),
    }  # fmt: skip
    for extra, shape in extras.items():
        out["mtp.0." + extra] = (rng.standard_normal(shape) / np.sqrt(shape[-1])).astype(np.float32)
    for norm in ("enorm.weight", "hnorm.weight", "norm.weight"):
        out["mtp.0." + norm] = (1 + 0.1 * rng.standard_normal(d)).astype(np.float32)
    out["mtp.0.hc_head_base"] = (0.5 * rng.standard_normal(hc)).astype(np.float32)
    out["mtp.0.hc_head_scale"] = rng.uniform(0.5, 1.5, 1).astype(np.float32)
    return out


def _top_k_layer(schedule: TinySchedule) -> int:
    """A top-k routed layer whose tensors shape the MTP block (any non-hash layer)."""
    return schedule.num_hash_layers


def make_release(out: Path, schedule: TinySchedule, seed: int, mtp: bool = True) -> None:
    """Write DIR/model.safetensors, DIR/config.json and the tokenizer files."""
    model, state = build_model(schedule, seed)
    cfg = model.config
    hub = hf_to_official(state)
    bf16 = set(hf_to_official({k: v for k, v in state.items() if is_bf16_tensor(k)}))
    conf = official_config(schedule, cfg)
    conf["architectures"] = ["DeepseekV4ForCausalLM"]  # the release's; converters key on it
    conf["num_nextn_predict_layers"] = int(mtp)
    conf["compress_ratios"] = list(schedule.compress_ratios) + [0] * int(mtp)
    if mtp:
        hub |= _mtp_block(hub, _top_k_layer(schedule), cfg.hidden_size, cfg.hc_mult, seed)
    tensors: dict[str, torch.Tensor] = {}
    for name in sorted(hub):
        value = np.ascontiguousarray(hub[name])
        if ".ffn.experts." in name and name.endswith(".weight"):
            packed, scale = fp4_encode(value.astype(np.float32))
            tensors[name] = torch.from_numpy(packed.view(np.int8))
            scale_name = name[: -len("weight")] + "scale"
            tensors[scale_name] = torch.from_numpy(scale).view(torch.float8_e8m0fnu)
            continue
        t = torch.from_numpy(value)
        tensors[name] = t.to(torch.bfloat16) if name in bf16 else t
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(conf, indent=2, sort_keys=True) + "\n")
    _copy_tokenizer(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--schedule", choices=sorted(SCHEDULES), default="hca128")
    parser.add_argument("--seed", type=int, default=None, help="default: the schedule's")
    parser.add_argument("--no-mtp", action="store_true", help="no mtp.0.* block")
    args = parser.parse_args(argv)
    schedule = SCHEDULES[args.schedule]
    seed = schedule.seed if args.seed is None else args.seed
    make_release(args.out, schedule, seed, mtp=not args.no_mtp)
    print(f"wrote {args.out} ({schedule.name}, seed {seed})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
