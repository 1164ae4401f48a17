"""`ds4 eval --endpoint` against our own `ds4 server --backend scripted` on loopback: the
same cases and prompts over HTTP, graded the same way, side by side with the
in-process engine through --compare."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.integration.eval.eval_files import (
    OUTPUTS,
    ds4_eval,
    scripted,
    write_cases,
    write_script,
)
from tests.integration.server.server_process import server_process

from ds4.domain.eval.traces import parse_trace

BUDGET = ["-n", "200", "--hard-limit-reply-budget", "20", "--soft-limit-reply-budget", "40"]


def test_endpoint_run_matches_the_engine_run(tmp_path: Path) -> None:
    cases = write_cases(tmp_path / "cases.jsonl")
    script = write_script(tmp_path / "script.json", OUTPUTS)
    local, remote = tmp_path / "local.trace", tmp_path / "remote.trace"
    engine = ds4_eval(*scripted(script, cases, *BUDGET, "--trace", str(local)))
    assert engine.returncode == 1, engine.stderr
    with server_process(
        ["--backend", "scripted", "--script", script, "--api-key", "s3cret"]
    ) as srv:
        refused = ds4_eval("--endpoint", srv.url, "--cases", cases, "--plain", *BUDGET)
        assert refused.returncode == 1
        assert "ERROR (HTTP 401 from " in refused.stdout
        served = ds4_eval(
            "--endpoint", srv.url + "/v1", "--api-key", "s3cret", "--cases", cases, "--plain",
            *BUDGET, "--trace", str(remote),
        )  # fmt: skip
    assert served.returncode == 1, served.stdout + served.stderr
    assert "ds4-eval: 4/5 passed, 1 failed" in served.stdout
    records = parse_trace(remote.read_bytes())
    assert records.header["backend"] == "endpoint"
    first = records.cases[0]
    assert first.text("MODEL_OUTPUT") == OUTPUTS[0]  # reasoning, </think>, the answer
    assert first.fields["think_close"] == "natural"
    assert int(first.fields["prompt_tokens"]) > 0  # the server's usage
    engine_first = parse_trace(local.read_bytes()).cases[0]
    assert first.fields["prompt_tokens"] == engine_first.fields["prompt_tokens"]
    assert first.fields["generated_tokens"] == engine_first.fields["generated_tokens"]
    compare = ds4_eval("--compare", str(local), str(remote))
    assert compare.returncode == 0
    assert compare.stdout.strip().splitlines()[-1] == (
        "ds4-eval compare: both passed=4 only A passed=0 only B passed=0 both failed=1 "
        "not comparable=0"
    )


def test_a_dead_endpoint_fails_before_the_first_case(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    done = ds4_eval("--endpoint", url, "--cases", write_cases(tmp_path / "c.jsonl"), "--plain")
    assert done.returncode == 1
    assert done.stdout == ""  # no report of PENDING cases
    assert done.stderr.startswith(f"ds4: error: --endpoint {url}/v1/chat/completions: ")
    assert "no server answers" in done.stderr and done.stderr.count("\n") == 1
