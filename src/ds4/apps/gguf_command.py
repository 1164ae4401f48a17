"""`ds4 gguf ...`: inspect, dump, make, convert and score GGUF model files."""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
from collections.abc import Mapping
from dataclasses import asdict
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from ds4.apps import (
    flag_types,
    gguf_convert,
    gguf_score,
    gguf_split,
    gguf_tiny,
    gguf_tiny_vision,
    wiring,
)
from ds4.apps.flag_types import DefaultsHelpFormatter
from ds4.domain.convert.hf_config import hparams_from_config
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.ggml_types import GGMLType, type_name
from ds4.domain.gguf.quant_formats import DEQUANTIZABLE
from ds4.domain.gguf.records import ArrayValue, MetaValue, TensorInfo
from ds4.domain.model.hparams import DeepSeekV4HParams, check_architecture
from ds4.domain.model.presets import FLASH, preset_differences
from ds4.domain.model.validation import (
    REQUIRED_SPECIAL_TOKENS,
    ValidationReport,
    validate_model_file,
)
from ds4.domain.vision.catalog import validate_vision
from ds4.domain.vision.hparams import ARCH as VISION_ARCH
from ds4.ports.model_file import ModelFile

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
    gguf_tiny_vision.register(tools)
    gguf_convert.register(tools)
    gguf_score.register(tools)
    gguf_split.register(tools)


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
    if _meta_str(model.metadata, "general.architecture") == VISION_ARCH and shape is None:
        try:
            return _inspect_vision(model, as_json=args.json)
        finally:
            model.close()
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
    if not report.ok and shape is not None:
        # Asked whether the file has a shape (--preset, --preset-config), inspect
        # refuses on stderr too, so a caller that keeps only stderr sees why it exits
        # 1; a plain inspect's verdict is its stdout report alone.
        errors = report.errors
        print(
            f"ds4 gguf inspect: {args.file} is not a valid model against {shape[0]}: "
            f"{len(errors)} error{'s' if len(errors) != 1 else ''}, first: {errors[0]}",
            file=sys.stderr,
        )
    return 0 if report.ok else EXIT_INVALID


def _inspect_vision(model: ModelFile, *, as_json: bool) -> int:
    """An mmproj file (docs/vision.md §1): its keys and directory against the deepseek4v
    catalog, every problem listed."""
    report = validate_vision(model.metadata, model.tensors)
    rows = [_tensor_row(t) for t in sorted(model.tensors.values(), key=lambda t: t.offset)]
    data: dict[str, Any] = {
        "file": model.path,
        "file_bytes": model.file_size,
        "kind": "vision encoder",
        "projector": _meta_str(model.metadata, "clip.projector_type"),
        "name": _meta_str(model.metadata, "general.name"),
        "hparams": asdict(report.hparams) if report.hparams else None,
        "tensor_count": len(model.tensors),
        "tensors": rows,
        "valid": report.ok,
        "problems": [asdict(p) for p in report.problems],
    }
    if as_json:
        json.dump(data, sys.stdout, ensure_ascii=False, indent=1)
        sys.stdout.write("\n")
        return 0 if report.ok else EXIT_INVALID
    lines = [
        f"file:         {model.path} ({_size(model.file_size)})",
        f"kind:         vision encoder (projector {data['projector']})   name: "
        f"{data['name'] or '-'}",
    ]
    if report.hparams is not None:
        items = [f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}"
                 for k, v in asdict(report.hparams).items()]  # fmt: skip
        lines.append("hyperparameters:")
        lines += ["  " + "  ".join(items[i : i + 6]) for i in range(0, len(items), 6)]
    lines.append(f"tensors:      {len(model.tensors)}")
    lines += _tensor_lines(rows)
    verdict = "OK" if report.ok else f"INVALID ({len(report.problems)} errors)"
    lines.append(f"validation:   {verdict}")
    lines += [f"  error: {p}" for p in report.problems]
    print("\n".join(lines))
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


# ---- gguf report ---------------------------------------------------------------------
# What `ds4 gguf inspect` shows: one JSON-ready dict built from a model file, and its
# text form.


_LAYER_RE = re.compile(r"^(?:blk|mtp)\.(\d+)\.")
_PROVENANCE_PREFIXES = ("general.", "ds4.", "quantize.")
_LONG_ARRAY = 16  # longer metadata arrays are summarized, not printed


def _tensor_row(info: TensorInfo) -> dict[str, Any]:
    return {
        "name": info.name,
        "type": type_name(info.ggml_type),
        "dims": list(info.dims),
        "bytes": info.nbytes,
    }


def _tokenizer_summary(metadata: Mapping[str, MetaValue]) -> dict[str, Any]:
    tokens = metadata.get("tokenizer.ggml.tokens")
    merges = metadata.get("tokenizer.ggml.merges")
    token_list = (tokens.items() if tokens else None) or []
    index = {tok: i for i, tok in enumerate(token_list) if tok in REQUIRED_SPECIAL_TOKENS}
    summary: dict[str, Any] = {
        "vocab_size": len(token_list),
        "merges": len((merges.items() if merges else None) or []),
        "special_token_ids": {tok: index.get(tok) for tok in REQUIRED_SPECIAL_TOKENS},
    }
    for key in ("model", "pre", "bos_token_id", "eos_token_id"):
        entry = metadata.get(f"tokenizer.ggml.{key}")
        if entry is not None:
            summary[key] = _shown(entry)
    return summary


def _shown(entry: MetaValue) -> object:
    """A JSON-ready value; long arrays are summarized, not printed."""
    items = entry.items()
    if items is not None and len(items) > _LONG_ARRAY:
        return f"<{entry.describe_type()} of {len(items)}>"
    return _plain(entry.value)


def _plain(value: object) -> object:
    """Arrays read from a file are compact sequences, not lists."""
    return [_plain(v) for v in value] if isinstance(value, list | ArrayValue) else value


def _provenance(metadata: Mapping[str, MetaValue]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, entry in metadata.items():
        if not key.startswith(_PROVENANCE_PREFIXES) or key == "general.alignment":
            continue
        out[key] = _shown(entry)
    return out


def build_report(model: ModelFile, validation: ValidationReport) -> dict[str, Any]:
    hp = validation.hparams
    top: list[dict[str, Any]] = []
    layers: dict[int, list[dict[str, Any]]] = {}
    for info in sorted(model.tensors.values(), key=lambda t: t.offset):
        match = _LAYER_RE.match(info.name)
        if match:
            layers.setdefault(int(match.group(1)), []).append(_tensor_row(info))
        else:
            top.append(_tensor_row(info))
    layer_rows = []
    for layer in sorted(layers):
        row: dict[str, Any] = {"layer": layer, "tensors": layers[layer]}
        row["bytes"] = sum(t["bytes"] for t in layers[layer])
        if hp is not None and validation.kind == "model" and layer < hp.n_layer:
            row["compress_ratio"] = hp.compress_ratios[layer]
            row["indexer"] = hp.has_indexer(layer)
            row["routing"] = "hash" if hp.is_hash_layer(layer) else "top-k"
        layer_rows.append(row)
    hparams = asdict(hp) if hp is not None else None
    return {
        "file": model.path,
        "file_bytes": model.file_size,
        "gguf_version": model.version,
        "alignment": model.alignment,
        "kind": validation.kind,
        "architecture": _meta_str(model.metadata, "general.architecture"),
        "name": _meta_str(model.metadata, "general.name"),
        "preset": validation.preset,
        "hparams": hparams,
        "provenance": _provenance(model.metadata),
        "tokenizer": _tokenizer_summary(model.metadata),
        "tensor_count": len(model.tensors),
        "tensor_bytes": sum(t.nbytes for t in model.tensors.values()),
        "top_level": top,
        "layers": layer_rows,
        "valid": validation.ok,
        "problems": [asdict(p) for p in validation.problems],
    }


def _meta_str(metadata: Mapping[str, MetaValue], key: str) -> str | None:
    entry = metadata.get(key)
    return entry.value if entry is not None and isinstance(entry.value, str) else None


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _tensor_lines(rows: list[dict[str, Any]]) -> list[str]:
    return [
        f"    {t['name']:<44} {t['type']:<8} {t['dims']!s:<22} {_size(t['bytes']):>12}"
        for t in rows
    ]


def render_text(report: dict[str, Any]) -> str:
    lines = [
        f"file:         {report['file']} ({_size(report['file_bytes'])})",
        f"format:       GGUF v{report['gguf_version']}, alignment {report['alignment']}, "
        f"{report['tensor_count']} tensors ({_size(report['tensor_bytes'])})",
        f"architecture: {report['architecture']}   kind: {report['kind']}   "
        f"name: {report['name'] or '-'}",
        f"preset:       {report['preset'] or 'custom shape'}",
    ]
    if report["hparams"]:
        hp = {k: v for k, v in report["hparams"].items() if not isinstance(v, list | tuple)}
        lines.append("hyperparameters:")
        items = [f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in hp.items()]
        lines += ["  " + "  ".join(items[i : i + 6]) for i in range(0, len(items), 6)]
        ratios = report["hparams"]["compress_ratios"]
        counts = {r: ratios.count(r) for r in sorted(set(ratios))}
        mix = ", ".join(f"{n} x ratio {r}" for r, n in counts.items())
        lines.append(f"  layer schedule: {mix} (per layer below)")
    if report["provenance"]:
        lines.append("provenance:")
        lines += [f"  {k} = {v}" for k, v in report["provenance"].items()]
    tok = report["tokenizer"]
    specials = ", ".join(f"{k}={v}" for k, v in tok["special_token_ids"].items())
    lines += [
        f"tokenizer:    {tok['vocab_size']} tokens, {tok['merges']} merges",
        f"  special ids: {specials}",
        "tensors:",
        "  top level:",
        *_tensor_lines(report["top_level"]),
    ]
    for row in report["layers"]:
        kind = ""
        if "compress_ratio" in row:
            kind = (
                f" ratio {row['compress_ratio']}, {'indexer, ' if row['indexer'] else ''}"
                f"{row['routing']} routing,"
            )
        lines.append(f"  layer {row['layer']}:{kind} {len(row['tensors'])} tensors, "
                     f"{_size(row['bytes'])}")  # fmt: skip
        lines += _tensor_lines(row["tensors"])
    problems = report["problems"]
    errors = [p for p in problems if p["severity"] == "error"]
    lines.append(f"validation:   {'OK' if report['valid'] else f'INVALID ({len(errors)} errors)'}")
    lines += [f"  {p['severity']}: {p['subject']}: {p['message']}" for p in problems]
    return "\n".join(lines)


# ---- release shapes ------------------------------------------------------------------
# The named shapes `--preset` accepts (docs/model-presets.md).


RELEASE_CONFIGS = {"pro": "deepseek-v4-pro.config.json"}
PRESET_NAMES = ("flash", "pro")


def release_config(name: str) -> dict[str, object]:
    """The shipped config.json of a named release (a Ds4Error if it is damaged)."""
    try:
        text = (
            resources.files("ds4")
            .joinpath("presets", RELEASE_CONFIGS[name])
            .read_text(encoding="utf-8")
        )
        config = json.loads(text)
    except (OSError, json.JSONDecodeError) as exc:
        raise Ds4Error(f"preset {name}: the shipped config.json is unreadable: {exc}") from None
    if not isinstance(config, dict):
        raise Ds4Error(f"preset {name}: the shipped config.json is not a JSON object")
    return config


def preset_shape(name: str) -> DeepSeekV4HParams:
    """Hyperparameters of a named preset; KeyError for an unknown name."""
    if name == "flash":
        return FLASH
    hp = hparams_from_config(release_config(name))
    problems = check_architecture(hp)
    if problems:
        raise Ds4Error(f"preset {name}: " + "; ".join(str(p) for p in problems))
    return hp
