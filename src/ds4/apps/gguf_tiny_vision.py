"""`ds4 gguf tiny-vision`: a random tiny deepseek4v vision encoder in llama.cpp's mmproj
layout (docs/vision.md §5), numpy only."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from ds4 import __version__
from ds4.apps import flag_types, wiring
from ds4.apps.flag_types import DefaultsHelpFormatter
from ds4.apps.gguf_tiny import add_out_and_seed
from ds4.domain.convert.plan import Chunk, PlannedTensor, provenance_metadata
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.records import MetaValue, meta_str, meta_u32
from ds4.domain.model.hparams import out_of_range
from ds4.domain.vision.catalog import VisionTensorSpec, vision_tensors
from ds4.domain.vision.hparams import INT_BOUNDS, vision_metadata
from ds4.domain.vision.presets import (
    DEFAULT_TINY_VISION,
    TINY_VISION_SHAPES,
    init_vision_tensor,
)

QUANTS = ("f32", "f16")


def register(tools: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tiny = tools.add_parser(
        "tiny-vision",
        formatter_class=DefaultsHelpFormatter,
        help="write a random tiny deepseek4v vision encoder (llama.cpp's mmproj layout)",
        description="Write a random tiny DeepSeek V4 Flash Vision encoder GGUF in llama.cpp's "
        "mmproj (deepseek4v) layout, for tests and demos. Deterministic: the same flags give "
        "the same bytes.",
    )
    add_out_and_seed(tiny)
    tiny.add_argument(
        "--preset",
        choices=sorted(TINY_VISION_SHAPES),
        default=DEFAULT_TINY_VISION,
        help="encoder shape",
    )
    out = INT_BOUNDS["n_embd_out"]
    tiny.add_argument(
        "--text-embd",
        type=flag_types.int_in(int(out.low), int(out.high)),
        default=None,
        help="the language model's width the aligner projects to "
        "(default: the preset's, the tiny main model's 256)",
    )
    tiny.add_argument(
        "--quant", choices=QUANTS, default="f32", help="matrix type (vectors stay F32)"
    )
    tiny.add_argument(
        "--no-vit-bias",
        action="store_true",
        help="leave out the optional ViT biases (patch, qkv, out, ffn)",
    )
    tiny.set_defaults(run=run_tiny_vision)


def tiny_vision_specs(
    args: argparse.Namespace,
) -> tuple[list[VisionTensorSpec], dict[str, MetaValue]]:
    hp = TINY_VISION_SHAPES[args.preset]
    if args.text_embd is not None:
        hp = dataclasses.replace(hp, n_embd_out=args.text_embd)
    assert out_of_range(hp.n_embd_out, INT_BOUNDS["n_embd_out"]) is None
    specs = [
        s
        for s in vision_tensors(hp)
        if not (args.no_vit_bias and s.optional and s.name.endswith(".bias"))
    ]
    metadata: dict[str, MetaValue] = {
        **vision_metadata(hp),
        "general.name": meta_str(f"deepseek4v {args.preset} (random, seed {args.seed})"),
        "general.file_type": meta_u32(0 if args.quant == "f32" else 1),  # llama_ftype
        **provenance_metadata(
            __version__, "random", args.quant, shape=args.preset, seed=str(args.seed)
        ),
    }
    return specs, metadata


def _type(spec: VisionTensorSpec, quant: str) -> GGMLType:
    if quant == "f16" and len(spec.dims) > 1:
        return GGMLType.F16
    return GGMLType.F32


def run_tiny_vision(args: argparse.Namespace) -> int:
    specs, metadata = tiny_vision_specs(args)
    by_name = {s.name: s for s in specs}
    plans = [PlannedTensor(s.name, s.dims, _type(s, args.quant)) for s in specs]
    path = wiring.write_model(
        Path(args.out),
        metadata,
        plans,
        lambda p: [Chunk(init_vision_tensor(by_name[p.name], args.seed))],
        wiring.quantizer(),
    )
    print(f"wrote {path} ({path.stat().st_size / 2**10:.0f} KiB, {len(plans)} tensors)")
    return 0
