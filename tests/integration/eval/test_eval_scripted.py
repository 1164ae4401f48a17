"""`ds4 eval` end to end on the scripted backend: every answer kind graded, the trace and
its regrade, the JSON report, reply budgets, --retry-incomplete, a skipped case and an
interrupted run."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
from tests.integration.eval.eval_files import (
    CASES,
    DS4,
    OUTPUTS,
    ds4_eval,
    scripted,
    write_cases,
    write_script,
)

from ds4.domain.eval.traces import parse_trace

BUDGET = ["-n", "200", "--hard-limit-reply-budget", "20", "--soft-limit-reply-budget", "40"]


def trace_of(path: Path) -> list[dict[str, str]]:
    cases = parse_trace(path.read_bytes()).cases
    return [dict(c.fields, output=c.text("MODEL_OUTPUT") or "") for c in cases]


def test_every_answer_kind_trace_json_and_regrade(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl")
    script = write_script(tmp_path / "script.json", OUTPUTS)
    trace, report = tmp_path / "run.trace", tmp_path / "run.json"
    args = scripted(script, cases, *BUDGET, "--trace", str(trace), "--json", str(report))
    result = ds4_eval(*args)
    assert result.returncode == 1, result.stderr  # one case fails
    assert "context auto-sized to" in result.stderr
    out = result.stdout
    assert "PASSED got B expected B" in out and "FAIL got 3 expected 2" in out
    assert "ds4-eval: 4/5 passed, 1 failed, runtime 00h:00m" in out
    assert "  2 PASSED" in out and "42       42       T/int" in out
    data = json.loads(report.read_text())
    assert [(c["id"], c["state"], c["answer_given"], c["correct"]) for c in data["cases"]] == [
        ("mc", "PASSED", "B", True), ("int", "PASSED", "42", True),
        ("lines", "PASSED", "4", True), ("seq", "PASSED", "A,C,B", True),
        ("wrong", "FAILED", "3", False),
    ]  # fmt: skip
    records = trace_of(trace)
    assert [r["status"] for r in records] == ["PASSED"] * 4 + ["FAILED"]
    assert records[0]["output"] == OUTPUTS[0]
    assert records[2]["answer_kind"] == "line_set"
    assert all(r["think_close"] == "natural" for r in records)
    # regrading the trace gives the live grades
    regrade = ds4_eval("--regrade-trace", str(trace), "--cases", cases)
    assert regrade.returncode == 0, regrade.stdout + regrade.stderr
    assert regrade.stdout.strip().endswith(
        "passed=4 failed=1 changed=0 not_graded=0 unknown=0 parse_errors=0"
    )
    # without the case file the trace's cases are unknown
    unknown = ds4_eval("--regrade-trace", str(trace))
    assert unknown.returncode == 1 and "unknown=5" in unknown.stdout


def test_reply_budgets_close_the_reasoning(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "c.jsonl", [CASES[2], CASES[5]])
    reasoning = "y" + " y" * 11  # 12 tokens
    # the first never closes; the second writes </think> itself, in the soft window
    script = write_script(tmp_path / "s.json", ["x " * 300, reasoning + "</think>Answer: 2"])
    trace = tmp_path / "t.trace"
    result = ds4_eval(
        *scripted(script, cases, "-n", "60", "--hard-limit-reply-budget", "10",
                  "--soft-limit-reply-budget", "50", "--trace", str(trace))
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    hard, soft = trace_of(trace)
    assert (hard["think_close"], hard["think_close_token_index"]) == ("hard_forced", "51")
    assert hard["think_close_remaining_budget"] == "10"
    assert hard["generated_tokens"] == "60"
    assert "</think>" in hard["output"]
    assert (soft["think_close"], soft["think_close_rank"]) == ("soft_forced", "1")
    assert soft["think_close_token_index"] == "13" and soft["status"] == "PASSED"


def test_retry_incomplete_runs_again_with_twice_the_budget(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "c.jsonl", [CASES[2]])
    outputs = ["no answer yet " * 40, "done</think>Answer: 42"]
    flags = ["-n", "30", "--hard-limit-reply-budget", "5", "--soft-limit-reply-budget", "5"]
    plain = ds4_eval(*scripted(write_script(tmp_path / "a.json", outputs), cases, *flags))
    assert plain.returncode == 1 and "FAIL got" in plain.stdout
    trace = tmp_path / "t.trace"
    retried = ds4_eval(
        *scripted(write_script(tmp_path / "b.json", outputs), cases, *flags, "--retry-incomplete",
                  "--trace", str(trace))
    )  # fmt: skip
    assert retried.returncode == 0, retried.stdout + retried.stderr
    assert "(retry, limit 60 tokens)" in retried.stdout
    assert "generation budget=60" in retried.stderr  # the context holds the doubled budget
    (record,) = trace_of(trace)
    assert (record["status"], record["attempts"]) == ("PASSED", "2")


def test_a_prompt_that_does_not_fit_is_skipped(tmp_path: Path) -> None:
    long_case = dict(CASES[2], id="long", question="word " * 400)
    cases = write_cases(tmp_path / "c.jsonl", [long_case, CASES[2]])
    script = write_script(tmp_path / "s.json", ["</think>Answer: 42"])
    trace = tmp_path / "t.trace"
    result = ds4_eval(
        *scripted(script, cases, "--ctx", "120", "-n", "30", "--hard-limit-reply-budget", "5",
                  "--soft-limit-reply-budget", "5", "--trace", str(trace))
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SKIPPED (prompt does not fit context)" in result.stdout
    assert "case 1: skipped: prompt does not fit context" in result.stdout
    skipped, ran = trace_of(trace)
    assert (skipped["status"], skipped["error"]) == ("SKIPPED", "prompt does not fit context")
    assert ran["status"] == "PASSED"


def test_ctrl_c_stops_the_case_and_prints_the_report(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "c.jsonl", [CASES[2], CASES[5]])
    script = write_script(tmp_path / "s.json", ["slow " * 500])
    trace = tmp_path / "t.trace"
    proc = subprocess.Popen(
        [*DS4, "eval", *scripted(script, cases, "--script-token-delay", "0.02", "--trace",
                                 str(trace))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    assert proc.stdout is not None
    seen = ""
    deadline = time.monotonic() + 60
    while "slow slow" not in seen:  # generation is under way
        assert time.monotonic() < deadline, seen
        seen += proc.stdout.read(1)
    proc.send_signal(signal.SIGINT)
    rest, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "STOPPED" in rest and "Traceback" not in err
    assert "  1 STOPPED" in rest and "  2 PENDING" in rest
    records = trace_of(trace)
    assert [r["status"] for r in records] == ["STOPPED"]
    assert trace.read_text().endswith("total: 2\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["-n", "100", "--hard-limit-reply-budget", "100"],
         "--hard-limit-reply-budget (100) must be smaller than --tokens (100)"),
        (["--soft-limit-reply-budget", "10", "--hard-limit-reply-budget", "20"],
         "--soft-limit-reply-budget (10) must be >= --hard-limit-reply-budget (20)"),
        (["-n", "2000000"], "--tokens (2000000) exceeds the 1000000 token context cap"),
        (["--backend", "scripted"], "--backend scripted needs --script FILE"),
        (["--api-key", "k"], "--api-key needs --endpoint"),
        (["--case-sequence", "1,1"], "case 1 is listed twice"),
        (["--temp", "-1"], "argument --temp: -1 is not in 0..100"),
    ],
)  # fmt: skip
def test_flag_errors_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from ds4.apps.cli import main

    with pytest.raises(SystemExit) as caught:
        main(["eval", *argv])
    assert caught.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err


def test_model_free_modes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from ds4.apps.cli import main

    assert main(["eval", "--self-test-extractors"]) == 0
    assert capsys.readouterr().out == "ds4-eval: answer extractor self-tests passed\n"
    cases = write_cases(tmp_path / "c.jsonl")
    assert main(["eval", "--list-cases", "--cases", cases, "--suite", "hard"]) == 0
    assert capsys.readouterr().out == "  1 T/wrong  INTEGER  [core,hard]  One plus one?\n"
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source": "T", "id": "1", "question": "q", "answer": "x"}\n{oops\n')
    assert main(["eval", "--validate-cases", "--cases", str(bad)]) == 1
    out = capsys.readouterr().out
    assert f"{bad}:1: answer 'x' is not a non-negative decimal integer" in out
    assert f"{bad}:2: not JSON" in out
    assert main(["eval", "--list-cases", "--cases", str(bad)]) == 2
    assert f"{bad}:1: answer 'x'" in capsys.readouterr().err
    assert main(["eval", "--validate-cases"]) == 0  # the shipped sample suite
    assert capsys.readouterr().out.strip().endswith("cases in 1 files are valid")
