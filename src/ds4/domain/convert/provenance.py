"""Provenance records written into every GGUF ds4 makes (shown by `ds4 gguf inspect`)."""

from __future__ import annotations

from ds4.domain.gguf.records import MetaValue, meta_str, meta_u32


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
