"""`ds4 cli`, `ds4 bench` and `ds4 server` with `--distributed local:2`, as a user runs
them: the CLI's greedy continuation equals the single-process one; the bench reports
each range's share and, with --dist-trace, one parseable line per hop whose bytes are
the documented formula's; killing a server worker's process mid-stream ends that stream
in the API's own error shape, and the next request answers with the same text as
before the failure."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest
from tests.integration.server.server_process import free_port, server_process
from tools.demo.files import DEMO

from ds4.adapters.compute.ray.runner import ray_available
from ds4.domain.dist_transport import parse_trace_line

pytestmark = pytest.mark.skipif(
    not ray_available(), reason="Ray is not installed (pip install 'ds4[distributed]')"
)

DS4 = [sys.executable, "-m", "ds4"]
PROMPT = "Quel ramo del lago di Como"


def cli(*extra: str) -> subprocess.CompletedProcess[str]:
    args = ["cli", "-m", str(DEMO), "-p", PROMPT, "-n", "24", "--temp", "0", "--nothink",
            "--numerics", "exact", "-t", "2", *extra]  # fmt: skip
    return subprocess.run([*DS4, *args], capture_output=True, text=True, timeout=300, check=False)


def test_cli_distributed_continuation_equals_the_single_process_one() -> None:
    alone = cli()
    split = cli("--distributed", "local:2", "--layer-split", "0-1,2-3")
    assert alone.returncode == 0, alone.stderr[-2000:]
    assert split.returncode == 0, split.stderr[-2000:]
    assert split.stdout == alone.stdout and alone.stdout.strip()
    placed = re.findall(r"ds4: distributed layers (\d-\d): pid \d+", split.stderr)
    assert placed == ["0-1", "2-3"]


def test_bench_reports_each_range_and_traces_every_hop(tmp_path: Path) -> None:
    prompt = tmp_path / "prompt.txt"
    prompt.write_text(PROMPT * 8, encoding="utf-8")
    done = subprocess.run(
        [*DS4, "bench", "-m", str(DEMO), "--prompt-file", str(prompt), "--ctx-start", "16",
         "--ctx-max", "32", "--step-incr", "16", "-n", "3", "-t", "2",
         "--distributed", "local:2", "--dist-activation-bits", "8", "--dist-trace",
         "--dist-prefill-piece", "8"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert (
        done.stdout.splitlines()[0].startswith("ctx_tokens,") and len(done.stdout.splitlines()) == 3
    )
    per_token = 4 * (128 + 4)  # the demo model at 8 bits: n_hc * (n_embd + 4)
    assert f"at 8 bits: {per_token} B per token" in done.stderr
    trace = [parse_trace_line(line) for line in done.stderr.splitlines()
             if line.startswith("ds4 dist-trace:")]  # fmt: skip
    assert {r["to"] for r in trace} == {"layers:0-1", "layers:2-3", "coordinator"}
    assert all(int(r["bytes_in"]) == int(r["tokens"]) * per_token for r in trace)
    # two frontiers: 16 prefill tokens each (two pieces of 8), 3 decoded tokens each
    decode = [r for r in trace if r["op"] == "decode" and r["hop"] == "0"]
    prefill = [r for r in trace if r["op"] == "prefill" and r["hop"] == "0"]
    assert len(decode) == 6 and len(prefill) == 4
    summary = re.findall(r"ds4 bench: distributed to=(\S+) op=(\w+) passes=(\d+) tokens=(\d+) "
                         r"eval_ms_per_pass=([\d.]+)", done.stderr)  # fmt: skip
    assert [(to, op, int(n)) for to, op, n, _, _ in summary] == [
        ("layers:0-1", "decode", 6), ("layers:0-1", "prefill", 4),
        ("layers:2-3", "decode", 6), ("layers:2-3", "prefill", 4),
        ("coordinator", "decode", 6), ("coordinator", "prefill", 2),
    ]  # fmt: skip
    assert all(float(ms) > 0 for to, _, _, _, ms in summary if to != "coordinator")


@pytest.mark.slow
def test_agent_and_eval_answer_as_one_process_does(tmp_path: Path) -> None:
    """The shared engine flags reach `ds4 agent` and `ds4 eval`: greedy, the split
    model's answer is the single process's (the agent has no --numerics and runs ds4's;
    its greedy answer on the demo model is the same split or not)."""
    agent = ["agent", "-m", str(DEMO), "--non-interactive", "-p", "hello", "-n", "16",
             "-c", "4096", "-t", "2", "--nothink", "--no-web", "--temp", "0"]  # fmt: skip
    evals = ["eval", "-m", str(DEMO), "--questions", "1", "-n", "64", "--numerics", "exact",
             "--hard-limit-reply-budget", "16", "--soft-limit-reply-budget", "32", "--plain",
             "-t", "2", "--nothink", "--json", ""]  # fmt: skip
    env = {**os.environ, "DS4_AGENT_HOME": str(tmp_path / "agent")}
    for argv in (agent, evals):
        outs = []
        for split in ([], ["--distributed", "local:2", "--layer-split", "0-1,2-3"]):
            report = tmp_path / f"{argv[0]}{len(split)}.json"
            args = [str(report) if a == "" else a for a in argv] + split
            done = subprocess.run(
                [*DS4, *args], capture_output=True, text=True, timeout=300, check=False,
                env=env, stdin=subprocess.DEVNULL,
            )  # fmt: skip
            assert done.returncode in (0, 1), done.stderr[-2000:]  # eval: 1 = a failed case
            assert ("distributed layers 0-1" in done.stderr) == bool(split)
            outs.append(done.stdout if argv is agent else _answers(report))
        assert outs[0] == outs[1] and outs[0]


def _answers(report: Path) -> list[object]:
    cases = json.loads(report.read_text(encoding="utf-8"))["cases"]
    return [(c["id"], c["state"], c["answer_given"]) for c in cases]


@pytest.mark.slow
def test_cli_joins_a_running_cluster_by_ray_client_address() -> None:
    """`ray start --head` as on a head node (here on loopback), then `--distributed
    ray://HOST:PORT`: the ranges run on the cluster's workers, same continuation."""
    client_port = free_port()
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths live there
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3] / "src")}
    ray_bin = str(Path(sys.executable).with_name("ray"))
    head = subprocess.Popen(
        [ray_bin, "start", "--head", "--block", "--port", str(free_port()),
         "--ray-client-server-port", str(client_port), "--num-cpus", "2",
         "--object-store-memory", str(100 << 20), "--include-dashboard", "false",
         "--disable-usage-stats", "--temp-dir", temp],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                socket.create_connection(("127.0.0.1", client_port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and head.poll() is None, "no Ray head"
                time.sleep(0.5)
        split = cli("--distributed", f"ray://127.0.0.1:{client_port}", "--layer-split", "0-1,2-3")
        assert split.returncode == 0, split.stderr[-2000:]
        assert split.stdout == cli().stdout
        assert re.findall(r"distributed layers (\d-\d)", split.stderr) == ["0-1", "2-3"]
    finally:
        head.terminate()
        head.wait(timeout=60)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--layer-split", "0-1,2-3"], "--layer-split need --distributed"),
        (["--distributed", "local:0"], "N in 1..64"),
        (["--distributed", "10.0.0.1:6379"], "expected ray://HOST:PORT or local:N"),
        (["--distributed", "local:2", "--layer-split", "0-1;2-3"], "expected A-B"),
        (["--distributed", "local:2", "--backend", "reference"], "not --backend reference"),
    ],
)
def test_bad_distributed_flags_are_one_line_usage_errors(argv: list[str], message: str) -> None:
    done = subprocess.run(
        [*DS4, "server", "-m", str(DEMO), *argv], capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip
    assert done.returncode == 2
    assert message in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) <= 2  # usage line + the error


def anthropic_body(stream: bool, max_tokens: int) -> dict[str, object]:
    return {
        "model": "ds4",
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": stream,
        "messages": [{"role": "user", "content": PROMPT}],
        "thinking": {"type": "disabled"},  # greedy: thinking turns sample at temperature 1
    }


@pytest.mark.slow
def test_a_worker_killed_mid_stream_fails_the_stream_and_the_server_recovers() -> None:
    args = ["-m", str(DEMO), "--distributed", "local:2", "-t", "2", "--ctx", "1024"]
    with server_process(args, timeout=240) as server:
        assert server.proc.stderr is not None
        pids: list[int] = []
        while len(pids) < 2:
            line = server.proc.stderr.readline()
            assert line, "the server ended before placing its workers"
            found = re.search(r"distributed layers \d-\d: pid (\d+)", line)
            if found:
                pids.append(int(found.group(1)))
        url = server.url + "/v1/messages"
        before = httpx.post(url, json=anthropic_body(False, 24), timeout=120)
        assert before.status_code == 200
        text = before.json()["content"][0]["text"]
        scrape = httpx.get(server.url + "/metrics", timeout=60).text
        for to in ("0-1", "2-3", "coordinator"):  # every hop of the request's passes
            count = re.search(
                rf'ds4_dist_eval_seconds_count{{op="decode",to="{to}"}} (\d+)', scrape
            )
            assert count is not None and int(count.group(1)) >= 1, scrape[-3000:]

        events = []
        with httpx.stream("POST", url, json=anthropic_body(True, 400), timeout=120) as reply:
            assert reply.status_code == 200
            for line in reply.iter_lines():
                events.append(line)
                if line.startswith("event: content_block_delta") and pids:
                    os.kill(pids.pop(), signal.SIGKILL)  # the last range's worker
        assert "event: error" in events
        error = events[events.index("event: error") + 1]
        assert '"api_error"' in error and "generation failed" in error
        assert "event: message_stop" not in events

        after = httpx.post(url, json=anthropic_body(False, 24), timeout=240)
        assert after.status_code == 200
        assert after.json()["content"][0]["text"] == text  # recovered, no wrong token

        # a worker lost between requests fails the next one before it generates: a 503
        # in the endpoint's shape (retryable), and the one after that recovers
        chat = server.url + "/v1/chat/completions"
        body = {"model": "ds4", "max_tokens": 24, "temperature": 0,
                "messages": [{"role": "user", "content": PROMPT + "?"}],
                "thinking": {"type": "disabled"}}  # fmt: skip
        baseline = httpx.post(chat, json=body, timeout=120).json()["choices"][0]["message"]
        os.kill(pids.pop(), signal.SIGKILL)  # the first range's worker, idle
        failed = httpx.post(chat, json=body, timeout=120)
        assert failed.status_code == 503
        error = failed.json()["error"]
        assert error["type"] == "server_error" and "layers 0-1 was lost" in error["message"]
        again = httpx.post(chat, json=body, timeout=240)
        assert again.status_code == 200
        assert again.json()["choices"][0]["message"] == baseline
