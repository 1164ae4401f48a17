"""What `ds4 gguf inspect` shows: one JSON-ready dict built from a model file, and its text form."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from ds4.domain.gguf.ggml_types import type_name
from ds4.domain.gguf.records import ArrayValue, MetaValue, TensorInfo
from ds4.domain.model.validation import REQUIRED_SPECIAL_TOKENS, ValidationReport
from ds4.ports.model_file import ModelFile

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
