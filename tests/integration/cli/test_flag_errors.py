"""Issue 14 item 9: bad flag values are one usage line naming the flag, exit 2, before
anything loads; never a traceback, a hang or a silent fix-up. The probe's cases run
as real subprocesses; the range of every numeric flag is checked in-process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ds4.apps.cli import main

DS4 = [sys.executable, "-m", "ds4"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("flags")
    fifo = tmp / "model.fifo"
    os.mkfifo(fifo)
    script = tmp / "script.json"
    script.write_text('["ok"]', encoding="utf-8")
    prompt = tmp / "prompt.txt"
    prompt.write_text("hello", encoding="utf-8")
    (tmp / "a-dir").mkdir()
    return {"tmp": str(tmp), "fifo": str(fifo), "script": str(script), "prompt": str(prompt),
            "dir": str(tmp / "a-dir"), "missing": str(tmp / "no" / "such" / "x")}  # fmt: skip


PROBE_CASES = [
    (["server", "--port", "65536"], "argument --port: 65536 is not in 1..65535"),
    (["gguf", "tiny", "--out", "{dir}"], "argument --out: {dir} is a directory"),
    (["cli", "-p", "hi", "--seed", "-1"], "argument --seed: -1 is not in 1.."),
    (["cli", "-m", "{fifo}", "-p", "hi"], "argument -m/--model: {fifo} is not a regular file"),
    (["gguf", "inspect", "{fifo}"], "argument file: {fifo} is not a regular file (a FIFO)"),
    (["server", "--backend", "scripted", "--script", "{script}", "--script-token-delay", "inf"],
     "argument --script-token-delay: inf is not in 0..60"),
    (["server", "-c", "1000000000000"], "argument -c/--ctx: 1000000000000 is not in 2.."),
    (["server", "-m", ""], "argument -m/--model: an empty path names no file"),
    (["server", "--kv-disk-dir", ""], "argument --kv-disk-dir: an empty path names no file"),
    (["server", "--kv-disk-dir", "{missing}"], "does not exist (it is not created)"),
    (["server", "--prefill-chunk", "-8"], "argument --prefill-chunk: -8 is not in 0.."),
    (["cli", "-p", "hi", "--chunk", "-1"], "argument --chunk: -1 is not in 1.."),
    (["cli", "-p", "hi", "--logprobs-top-k", "500"], "argument --logprobs-top-k: 500 is not in"),
    (["cli", "-p", "hi", "--dump-logits", "{missing}"], "does not exist (it is not created)"),
    (["gguf", "tiny", "--out", "{missing}"], "does not exist (it is not created)"),
    (["bench", "--prompt-file", "{prompt}", "--gen-tokens", "0"],
     "--gen-tokens/--tokens/-n: 0 is not in"),
    (["gguf", "convert", "--hf", "{missing}", "--out", "x.gguf"], "--hf: {missing} does not"),
]  # fmt: skip


@pytest.mark.parametrize(("argv", "message"), PROBE_CASES, ids=lambda v: " ".join(v)[:60])
def test_probe_cases_are_one_line_usage_errors(
    files: dict[str, str], argv: list[str], message: str
) -> None:
    args = [a.format(**files) for a in argv]
    result = subprocess.run([*DS4, *args], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"ds4 {' '.join(argv[:2] if argv[0] == 'gguf' else argv[:1])}")
    assert message.format(**files) in result.stderr


RANGE_CASES = [
    "server --ctx 1", "server --tokens 0", "server --threads 0",
    "server --tool-memory-max-ids 0", "server --max-body-mb 0", "server --max-body-mb 2048",
    "server --max-connections 0", "server --header-timeout 0", "server --idle-timeout nan",
    "server --body-timeout=-inf", "server --kv-disk-space-mb -1", "server --kv-mem-space-mb -1",
    "server --checkpoint-budget-mb 16777217",
    "server --kv-cache-min-tokens 0", "server --kv-cache-cold-max-tokens -1",
    "server --kv-cache-continued-interval-tokens -1", "server --kv-cache-boundary-trim-tokens -1",
    "server --kv-cache-boundary-align-tokens -1", "server --port x",
    "cli --ctx 1", "cli --ctx 2000000", "cli --tokens=-1", "cli --temp 101", "cli --temp -1",
    "cli --top-p 1.5", "cli --top-k 2000", "cli --min-p -0.1", "cli --seed 0",
    "cli --seed 18446744073709551616", "cli --threads 0", "cli --logprobs-top-k 0",
    "bench --ctx-start 0", "bench --ctx-max 0", "bench --ctx-alloc 1", "bench --step-incr 0",
    "bench --step-mul 0.5", "bench --threads 0", "cli --mtp-draft 0", "bench --mtp-draft 17",
    "server --mtp-draft 0", "cli --power 0", "server --power 101",
    "gguf tiny --out x.gguf --seed -1", "gguf tiny --out x.gguf --q4-last-layers -1",
    "gguf convert --hf . --out x.gguf --threads 0",
]  # fmt: skip


@pytest.mark.parametrize("line", RANGE_CASES)
def test_every_numeric_flag_is_range_checked(line: str, capsys: pytest.CaptureFixture[str]) -> None:
    argv = line.split()
    flag = next(a for a in argv if a.startswith("--") and a not in ("--out", "--hf"))
    flag = flag.split("=")[0]
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    err = capsys.readouterr().err
    names = err.split(": ")[2].removeprefix("argument ").split("/")  # `-c/--ctx`
    assert err.count("\n") == 1 and flag in names and " is not " in err, err


def test_cross_flag_rules(files: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    cases = [
        (["server", "--kv-cache-min-tokens", "100", "--kv-cache-cold-max-tokens", "50"],
         "--kv-cache-cold-max-tokens 50 must be 0 or at least --kv-cache-min-tokens (100)"),
        (["server", "--script", files["script"]], "--script and --script-token-delay need"),
        (["server", "--backend", "scripted"], "--backend scripted needs --script FILE"),
        (["server", "--mtp", files["script"], "--sessions", "2"], "--mtp works with one live"),
        (["server", "--backend", "scripted", "--script", files["script"], "--mtp",
          files["script"]], "--mtp needs --backend cpu or reference"),
    ]  # fmt: skip
    for argv, message in cases:
        with pytest.raises(SystemExit) as caught:
            main(argv)
        assert caught.value.code == 2
        assert message in capsys.readouterr().err


def test_model_from_the_environment_must_be_a_regular_file(
    files: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DS4_MODEL", files["fifo"])
    assert main(["server", "--port", "1"]) == 2
    assert capsys.readouterr().err == f"ds4: error: DS4_MODEL: {files['fifo']} is not a " \
        "regular file (a FIFO)\n"  # fmt: skip
    assert main(["cli", "-p", "hi"]) == 2
    assert "is not a regular file (a FIFO)" in capsys.readouterr().err


def test_help_states_every_new_flag_and_its_default(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["server", "--help"])
    out = capsys.readouterr().out
    text = " ".join(out[out.index("request and connection limits:") :].split())
    for flag, default in [
        ("--max-body-mb", "64"), ("--max-connections", "64"), ("--header-timeout", "10.0"),
        ("--idle-timeout", "30.0"), ("--body-timeout", "120.0"),
    ]:  # fmt: skip
        assert flag in text
        after = text[text.index(flag + " ") :]
        assert f"(default: {default})" in after[: after.index("--", len(flag) + 2)]


def test_missing_parent_directories_are_not_created(files: dict[str, str]) -> None:
    assert not Path(files["missing"]).parent.exists()
