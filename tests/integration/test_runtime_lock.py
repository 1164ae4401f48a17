"""`make serve` installs requirements-runtime.lock: it must be the current runtime subset
of requirements.lock (same pins and hashes) and hold no test or oracle package."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_runtime_lock_is_current() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tools.runtime_lock", "--check"],
        cwd=REPO, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_runtime_lock_holds_no_test_tools() -> None:
    text = (REPO / "requirements-runtime.lock").read_text(encoding="utf-8")
    names = {line.split("==")[0] for line in text.splitlines() if line[:1].isalnum()}
    assert {
        "numpy",
        "litestar",
        "uvicorn",
        "msgspec",
        "cffi",
        "xxhash",
        "prometheus-client",
    } <= names
    assert not names & {"pytest", "hypothesis", "mypy", "ruff", "torch", "transformers"}
