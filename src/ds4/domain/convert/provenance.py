"""Provenance records written into every GGUF ds4 makes (shown by `ds4 gguf inspect`)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.records import MetaValue, meta_str, meta_u32

_RESERVED = frozenset({"tool", "source", "quant_preset", "imatrix"})
_KEY = re.compile(r"[a-z][a-z0-9_]*")


def provenance_metadata(
    tool_version: str, source: str, quant_preset: str, **extra: str | int
) -> dict[str, MetaValue]:
    """`ds4.convert.*` keys. No timestamps: the same inputs give the same bytes."""
    out = {
        "ds4.convert.tool": meta_str(f"ds4 {tool_version}"),
        "ds4.convert.source": meta_str(source),
        "ds4.convert.quant_preset": meta_str(quant_preset),
    }
    for key, value in extra.items():
        out[f"ds4.convert.{key}"] = meta_str(value) if isinstance(value, str) else meta_u32(value)
    return out


def meta_flags(items: Iterable[str]) -> dict[str, str]:
    """`--meta KEY=VALUE` flags as extra provenance strings (KEY: lower-case identifier,
    not one the converter writes itself, given once)."""
    out: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or _KEY.fullmatch(key) is None:
            raise Ds4Error(f"--meta {item!r}: expected KEY=VALUE with KEY like train_seed")
        if key in _RESERVED or key in out:
            raise Ds4Error(f"--meta {key}: key already set")
        out[key] = value
    return out
