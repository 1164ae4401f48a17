"""`ds4 gguf ...`: inspect, dump, make, convert and score GGUF model files."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

from ds4.apps import flag_types, gguf_convert, gguf_score, gguf_tiny, wiring
from ds4.apps.gguf_report import build_report, render_text
from ds4.apps.help_format import DefaultsHelpFormatter
from ds4.apps.release_shapes import PRESET_NAMES, preset_shape
from ds4.domain.convert.hf_config import hparams_from_config
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.quant_formats import DEQUANTIZABLE
from ds4.domain.model.hparams import DeepSeekV4HParams, check_architecture
from ds4.domain.model.presets import preset_differences
from ds4.domain.model.validation import validate_model_file

EXIT_INVALID = 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    gguf = sub.add_parser(
        "gguf",
        help="inspect, dump and make DeepSeek V4 GGUF model files",
        description="Tools for DeepSeek V4 GGUF model files.",
    )
    tools = gguf.add_subparsers(dest="gguf_command", metavar="TOOL", required=True)
    fmt = DefaultsHelpFormatter

    inspect = tools.add_parser(
        "inspect",
        formatter_class=fmt,
        help="show metadata, hyperparameters, tensors and the validation verdict",
        description="Show a GGUF's architecture, hyperparameters, tokenizer summary, tensors "
        "grouped by layer and the validation verdict. Exit status: 0 valid, 1 invalid model, "
        "2 unreadable file.",
    )
    inspect.add_argument(
        "file", type=flag_types.model_file, help="the GGUF file (main model or MTP)"
    )
    inspect.add_argument(
        "--json", action="store_true", help="print one JSON object instead of text"
    )
    inspect.add_argument(
        "--preset",
        choices=PRESET_NAMES,
        default=None,
        help="also require the shape of this named preset: flash (ds4's Flash shape) or "
        "pro (DeepSeek V4 PRO, from its release's config.json shipped with ds4) "
        "(default: any valid shape passes)",
    )
    inspect.add_argument(
        "--preset-config",
        type=flag_types.input_file,
        metavar="CONFIG_JSON",
        help="also require the shape a release's config.json describes, read by the "
        "converter's config reader (e.g. DeepSeek V4 PRO's; default: none)",
    )
    inspect.set_defaults(run=run_inspect)

    dump = tools.add_parser(
        "dump",
        formatter_class=fmt,
        help="write one tensor, dequantized to float32, as a .npy file",
        description="Write one tensor as a .npy file in numpy orientation (reversed GGUF "
        "dims). Float and quantized types become float32; I32 tensors stay int32.",
    )
    dump.add_argument("file", type=flag_types.model_file, help="the GGUF file")
    dump.add_argument("tensor", help="tensor name, e.g. blk.0.attn_q_a.weight")
    dump.add_argument(
        "--out",
        type=flag_types.output_file,
        required=True,
        help="output .npy path (written atomically; its directory must exist)",
    )
    dump.add_argument(
        "--dequant",
        choices=["native", "numpy"],
        default="native",
        help="dequantizer implementation (both are bit-identical)",
    )
    dump.set_defaults(run=run_dump)

    gguf_tiny.register(tools)
    gguf_convert.register(tools)
    gguf_score.register(tools)


def config_shape(path: str) -> tuple[str, DeepSeekV4HParams]:
    """(label, hyperparameters) of a config.json; Ds4Error naming the problem."""
    try:
        config = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise Ds4Error(f"--preset-config {path}: cannot read: {exc}") from None
    except json.JSONDecodeError as exc:
        raise Ds4Error(f"--preset-config {path}: not JSON ({exc.msg}, line {exc.lineno})") from None
    if not isinstance(config, dict):
        raise Ds4Error(f"--preset-config {path}: not a JSON object")
    try:
        hp = hparams_from_config(config)
    except Ds4Error as exc:
        raise Ds4Error(f"--preset-config {path}: {exc}") from None
    problems = check_architecture(hp)
    if problems:
        raise Ds4Error(f"--preset-config {path}: " + "; ".join(str(p) for p in problems))
    return f"config {Path(path).name}", hp


def required_shape(args: argparse.Namespace) -> tuple[str, DeepSeekV4HParams] | None:
    """The shape --preset or --preset-config asks the file to have (at most one)."""
    if args.preset is not None and args.preset_config is not None:
        raise Ds4Error("--preset and --preset-config each name a shape to require: give one")
    if args.preset_config is not None:
        return config_shape(args.preset_config)
    if args.preset is not None:
        return f"preset {args.preset}", preset_shape(args.preset)
    return None


def run_inspect(args: argparse.Namespace) -> int:
    shape = required_shape(args)
    model = wiring.open_model_file(args.file)
    try:
        report = validate_model_file(model, require_shape=shape)
        hp = report.hparams
        if args.preset and shape and hp and not preset_differences(hp, shape[1]):
            report = dataclasses.replace(report, preset=args.preset)  # e.g. "pro"
        data = build_report(model, report)
    finally:
        model.close()
    if args.json:
        json.dump(data, sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
    else:
        print(render_text(data))
    return 0 if report.ok else EXIT_INVALID


def run_dump(args: argparse.Namespace) -> int:
    model = wiring.open_model_file(args.file)
    try:
        info = model.tensors.get(args.tensor)
        if info is None:
            raise Ds4Error(f"{args.file}: no tensor named {args.tensor!r}")
        raw = model.raw(args.tensor)
        values: np.ndarray[tuple[int, ...], np.dtype[np.float32 | np.int32]]
        if info.ggml_type is GGMLType.I32:
            values = raw.view("<i4").astype(np.int32)
        elif info.ggml_type in DEQUANTIZABLE:
            values = wiring.dequantizer(args.dequant).dequantize(raw, info.ggml_type)
        else:
            raise Ds4Error(f"{args.tensor}: dumping {info.ggml_type.name} is not supported")
        values = values.reshape(info.numpy_shape)
        with wiring.atomic_write(Path(args.out)) as handle:
            np.save(handle, values, allow_pickle=False)
    finally:
        model.close()
    print(f"{args.tensor}: {values.dtype} {list(values.shape)} -> {args.out}")
    return 0
