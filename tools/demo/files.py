"""Where the demo model's files live (docs/demo-model.md)."""

from __future__ import annotations

import hashlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "models" / "demo.gguf"
DEMO_MTP = REPO / "models" / "demo-mtp.gguf"
GOLDENS = REPO / "tests" / "integration" / "demo" / "goldens.json"
NOVEL = REPO / "data" / "promessi_sposi.txt"


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
