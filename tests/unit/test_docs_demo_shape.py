"""The docs describe the demo model with the numbers of its shape (tools/demo/shape.py):
every "N layers of width W" said of the demo model matches DEMO."""

from __future__ import annotations

import re
from pathlib import Path

from tools.demo.shape import DEMO

ROOT = Path(__file__).resolve().parents[2]
# "demo model (`models/demo.gguf`, 4 layers of width 128)", across at most one line break
SHAPE_CLAIM = re.compile(r"demo\W[^;:]{0,60}?(\d+) layers of width (\d+)", re.IGNORECASE)


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_the_docs_give_the_demo_models_real_width_and_depth() -> None:
    claims = [
        (path.relative_to(ROOT), int(m[1]), int(m[2]))
        for path in documents()
        for m in SHAPE_CLAIM.finditer(path.read_text(encoding="utf-8"))
    ]
    assert claims, "no doc states the demo model's shape any more: drop this test"
    layers = len(DEMO.compress_ratios)
    wrong = [c for c in claims if (c[1], c[2]) != (layers, DEMO.hidden_size)]
    assert not wrong, f"the demo model is {layers} layers of width {DEMO.hidden_size}: {wrong}"
