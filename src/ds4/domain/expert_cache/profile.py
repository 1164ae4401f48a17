"""The expert profile (`--expert-profile FILE`): per (layer, expert) use counts a run
wrote, read back to preload the hottest experts. JSON, so it can be inspected:
{"format": "ds4-expert-profile", "version": 1, "n_layer": L, "n_expert": E,
 "counts": [[...E counts...] x L]}."""

from __future__ import annotations

import json
from collections.abc import Sequence

FORMAT = "ds4-expert-profile"
VERSION = 1


def profile_text(n_layer: int, n_expert: int, counts: Sequence[int]) -> str:
    if len(counts) != n_layer * n_expert:
        raise ValueError("counts must have n_layer * n_expert values")
    rows = [list(counts[i * n_expert : (i + 1) * n_expert]) for i in range(n_layer)]
    doc = {"format": FORMAT, "version": VERSION, "n_layer": n_layer, "n_expert": n_expert}
    return json.dumps({**doc, "counts": rows}) + "\n"


def parse_profile(text: str, n_layer: int, n_expert: int) -> list[int]:
    """Flat counts (layer-major); ValueError naming what does not fit this model."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} file")
    if doc.get("version") != VERSION:
        raise ValueError(f"version {doc.get('version')!r}, this build reads {VERSION}")
    if doc.get("n_layer") != n_layer or doc.get("n_expert") != n_expert:
        raise ValueError(
            f"written for {doc.get('n_layer')} layers x {doc.get('n_expert')} experts, "
            f"this model has {n_layer} x {n_expert}"
        )
    rows = doc.get("counts")
    if not isinstance(rows, list) or len(rows) != n_layer:
        raise ValueError(f"counts must be {n_layer} lists")
    flat: list[int] = []
    for il, row in enumerate(rows):
        if not isinstance(row, list) or len(row) != n_expert:
            raise ValueError(f"counts[{il}] must have {n_expert} values")
        for v in row:
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise ValueError(f"counts[{il}] holds {v!r}, not a count >= 0")
            flat.append(v)
    return flat


def merged(a: Sequence[int], b: Sequence[int]) -> list[int]:
    return [x + y for x, y in zip(a, b, strict=True)]


def hottest(counts: Sequence[int], n_expert: int, limit: int) -> list[tuple[int, int]]:
    """Up to `limit` (layer, expert) pairs with the highest counts (ties: lower layer,
    then lower expert first); never-used experts are not picked."""
    order = sorted((i for i, c in enumerate(counts) if c > 0), key=lambda i: (-counts[i], i))
    return [(i // n_expert, i % n_expert) for i in order[:limit]]
