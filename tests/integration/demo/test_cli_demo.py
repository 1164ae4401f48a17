"""`ds4 cli -p TEXT` with no model flag runs the shipped demo model and stops by itself."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tools.demo.files import REPO


def test_cli_default_model_answers_and_stops(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "DS4_MODEL"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "ds4", "cli", "-p", "Renzo e Lucia", "--nothink", "--temp", "0",
         "-n", "300"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert time.monotonic() - start < 60
    assert len(result.stdout.split()) >= 3
