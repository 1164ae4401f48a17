"""`ds4 cli` on the cpu backend says its memory plan at start (docs/ssd-streaming.md)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

DEMO = Path(__file__).resolve().parents[3] / "models" / "demo.gguf"


def test_cli_says_the_memory_plan() -> None:
    pytest.importorskip("ds4._native_cpu")
    run = subprocess.run(
        [sys.executable, "-m", "ds4", "cli", "--backend", "cpu", "-m", str(DEMO),
         "-p", "hi", "-n", "2", "--ctx", "4096"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    lines = [ln for ln in run.stderr.splitlines() if ln.startswith("ds4: memory plan: ")]
    assert len(lines) == 1, run.stderr
    assert "(ctx 4096 x 1 session)" in lines[0]
    assert " GiB available (" in lines[0]
