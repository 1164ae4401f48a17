"""`ds4 bench` on a tiny model: CSV columns and rows, snapshot sizes, plot, flag errors."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ds4.apps import bench_command
from ds4.apps.bench_command import CSV_HEADER, frontiers
from ds4.apps.bootstrap import load_engine
from ds4.apps.options import EngineOptions
from ds4.domain.errors import Ds4Error

ROW = re.compile(r"^\d+,\d+,\d+\.\d\d,\d+,\d+\.\d\d,\d+$")


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bench") / "q2.gguf"
    made = subprocess.run(
        [sys.executable, "-m", "ds4", "gguf", "tiny", "--out", str(out), "--quant", "q2",
         "--preset", "tiny-2layer", "--quiet"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    return out


@pytest.fixture(scope="module")
def prompt_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bench_prompt") / "prompt.txt"
    path.write_text("Quel ramo del lago di Como, che volge a mezzogiorno. " * 20, "utf-8")
    return path


def bench(*argv: str | Path) -> int:
    parser = argparse.ArgumentParser(prog="ds4")
    bench_command.register(parser.add_subparsers())
    args = parser.parse_args(["bench", *map(str, argv)])
    code: int = args.run(args)
    return code


def test_frontier_sequences() -> None:
    assert list(frontiers(2048, 8192, 2048, 1)) == [2048, 4096, 6144, 8192]
    assert list(frontiers(2048, 7000, 2048, 1)) == [2048, 4096, 6144, 7000]
    assert list(frontiers(1000, 5000, 0, 2)) == [1000, 2000, 4000, 5000]
    assert list(frontiers(1, 4, 0, 1.1)) == [1, 2, 3, 4]  # always at least one more
    assert list(frontiers(64, 64, 16, 1)) == [64]


def test_csv_rows_snapshot_sizes_and_plot(
    tiny_model: Path, prompt_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plot = tmp_path / "speed.png"
    code = bench("-m", tiny_model, "--prompt-file", prompt_file, "--ctx-start", "32",
                 "--ctx-max", "64", "--step-incr", "16", "--gen-tokens", "3", "--threads", "1",
                 "--plot", plot)  # fmt: skip
    assert code == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == CSV_HEADER
    rows = [line.split(",") for line in lines[1:]]
    assert all(ROW.match(line) for line in lines[1:])
    assert [int(r[0]) for r in rows] == [32, 48, 64]
    assert [int(r[1]) for r in rows] == [32, 16, 16]
    assert all(int(r[3]) == 3 and float(r[2]) > 0 and float(r[4]) > 0 for r in rows)
    # kvcache_bytes is the state at the frontier: the probe's tokens were restored away
    engine = load_engine(EngineOptions(str(tiny_model), backend="cpu"))
    ids = engine.tokenizer.encode(prompt_file.read_text("utf-8"))
    session = engine.runner.new_session(64 + 3 + 1)
    done = 0
    for r in rows:
        session.prefill(ids[done : int(r[0])])
        done = int(r[0])
        assert int(r[5]) == len(session.payload())
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_csv_option_writes_the_rows_to_a_file(
    tiny_model: Path, prompt_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "rows.csv"
    assert bench("-m", tiny_model, "--prompt-file", prompt_file, "--ctx-start", "40",
                 "--ctx-max", "40", "--gen-tokens", "2", "--csv", out) == 0  # fmt: skip
    header, row = out.read_text("utf-8").splitlines()
    assert header == CSV_HEADER and row.startswith("40,40,") and ",2," in row
    assert np.isfinite(float(row.split(",")[4]))


def test_flag_and_prompt_errors(tiny_model: Path, prompt_file: Path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench("-m", tiny_model)
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit):
        bench("-m", tiny_model, "--prompt-file", prompt_file, "--chat-prompt-file", prompt_file)
    with pytest.raises(SystemExit):
        bench("-m", tiny_model, "--prompt-file", prompt_file, "--ctx-start", "9",
              "--ctx-max", "8")  # fmt: skip
    with pytest.raises(Ds4Error, match=r"prompt has \d+ tokens, need at least --ctx-max=100000"):
        bench("-m", tiny_model, "--prompt-file", prompt_file, "--ctx-start", "8",
              "--ctx-max", "100000")  # fmt: skip


def test_plot_without_matplotlib_fails_before_the_model_loads(
    tiny_model: Path, prompt_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import raises ImportError

    def no_load(*_: object) -> None:
        raise AssertionError("the model was loaded before the --plot check")

    monkeypatch.setattr(bench_command, "load_engine", no_load)
    with pytest.raises(Ds4Error) as info:
        bench("-m", tiny_model, "--prompt-file", prompt_file, "--ctx-start", "8",
              "--ctx-max", "16", "--plot", tmp_path / "b.png")  # fmt: skip
    assert str(info.value) == f"--plot needs matplotlib: {sys.executable} -m pip install matplotlib"
    assert not (tmp_path / "b.png").exists()


def test_mtp_columns_acceptance_and_the_same_tokens(
    prompt_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--mtp on the demo model: each row adds the speculative rate, the share of drafts
    accepted and tokens per main pass; the run checks the tokens are the same."""
    root = Path(__file__).resolve().parents[3]
    code = bench("-m", root / "models" / "demo.gguf", "--prompt-file", prompt_file,
                 "--ctx-start", "48", "--ctx-max", "96", "--step-incr", "48",
                 "--gen-tokens", "16", "--threads", "2",
                 "--mtp", root / "models" / "demo-mtp.gguf", "--mtp-draft", "2")  # fmt: skip
    assert code == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert lines[0] == CSV_HEADER + bench_command.MTP_COLUMNS
    for line in lines[1:]:
        values = line.split(",")
        assert len(values) == 9 and float(values[6]) > 0
        assert 0.0 <= float(values[7]) <= 1.0 and 1.0 <= float(values[8]) <= 3.0
    assert "ds4 bench: mtp (draft 2): acceptance" in captured.err
    assert "same tokens" in captured.err
