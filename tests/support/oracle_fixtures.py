"""Build the HF-oracle tiny checkpoints (tools/oracle) once per test session."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def make_oracle_fixtures(out: Path, schedule: str) -> Path:
    """Run `python -m tools.oracle.make_fixtures` for one schedule; return its directory."""
    result = subprocess.run(
        [sys.executable, "-m", "tools.oracle.make_fixtures", "--out", str(out),
         "--schedule", schedule, "--threads", "1"],
        cwd=REPO, capture_output=True, text=True,
    )  # fmt: skip
    if result.returncode != 0:
        raise RuntimeError(f"oracle fixtures failed:\n{result.stderr[-3000:]}")
    return out / schedule
