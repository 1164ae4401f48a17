"""bench/serving_bench.py end to end on the scripted backend: both servers start, both
loads run through the OpenAI SDK, and the report has its percentiles and the ratio."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench" / "serving_bench.py"


@pytest.mark.slow
def test_scripted_side_by_side_reports_percentiles_and_the_ratio() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--backends", "scripted", "--sessions", "2",
         "--clients", "2", "--requests", "4", "--rate", "8", "--max-tokens", "8"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = re.findall(r"^\s+(\d) (closed C=2|poisson 8/s)\s+4\s+0 (.*)$", done.stdout, re.M)
    assert sorted((n, load) for n, load, _ in rows) == [
        ("1", "closed C=2"), ("1", "poisson 8/s"), ("2", "closed C=2"), ("2", "poisson 8/s"),
    ]  # fmt: skip
    for *_, numbers in rows:  # TTFT, ITL, TPOT, E2E as p50/p90/p99, then t/s
        assert len(re.findall(r"[\d.]+/[\d.]+/[\d.]+", numbers)) == 4
    ratios = re.findall(r"--sessions 2 / --sessions 1, (\S+ \S+): (\d+\.\d\d)", done.stdout)
    assert [load for load, _ in ratios] == ["closed C=2", "poisson 8/s"]


def test_bad_numbers_are_usage_errors() -> None:
    for flags in (["--sessions", "0"], ["--rate", "-1"], ["--backends", "gpu"]):
        done = subprocess.run(
            [sys.executable, str(BENCH), *flags], capture_output=True, text=True, check=False
        )
        assert done.returncode == 2 and "error:" in done.stderr, flags
