"""`ds4 bench --ssd-streaming`: the expert cache's columns after the usual six."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from ds4.apps import bench_command
from ds4.apps.bench_command import CSV_HEADER, SSD_HEADER

DEMO = Path(__file__).resolve().parents[3] / "models" / "demo.gguf"


def test_bench_prints_hit_rate_disk_bytes_throughput_and_stall(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Quel ramo del lago di Como, che volge a mezzogiorno. " * 20, "utf-8")
    parser = argparse.ArgumentParser(prog="ds4")
    bench_command.register(parser.add_subparsers())
    args = parser.parse_args(
        ["bench", "-m", str(DEMO), "--prompt-file", str(prompt), "--ctx-start", "32",
         "--ctx-max", "48", "--step-incr", "16", "--gen-tokens", "4", "--threads", "1",
         "--ssd-streaming", "--ssd-streaming-cache-experts", "2"]
    )  # fmt: skip
    assert args.run(args) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == f"{CSV_HEADER},{SSD_HEADER}"
    assert "ssd streaming: 2 expert slots" in captured.err
    for line in lines[1:]:
        hit_rate, disk_per_token, mbps, stall_ms = map(float, line.split(",")[6:])
        assert 0 <= hit_rate < 1  # two slots cannot hold a token's experts of every layer
        assert disk_per_token > 0 and mbps > 0 and stall_ms > 0
