"""N streaming clients at once against `ds4 server --sessions 1` and `--sessions N`,
side by side in one run: aggregate generated tokens/s and time to first token.

Both servers run as subprocesses on the same model (cpu backend) and stay up for the
whole run; runs alternate (1, N, 1, N, ...) so a busy machine slows both alike, and
medians are printed. Each client is the OpenAI SDK streaming a chat completion
(greedy, no thinking) with a prompt of its own that no earlier run used, so no
run continues another's live state.
Run: .venv/bin/python bench/serving_concurrency_bench.py [--model M.gguf]
         [--sessions 4] [--tokens 48] [--runs 3] [--threads 2]
(without --model a tiny 6-layer model is generated into a temporary directory)
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from openai import OpenAI

SRC = Path(__file__).resolve().parents[1] / "src"
TOPICS = ["rivers", "volcanoes", "glaciers", "deserts", "forests", "coral reefs", "caves",
          "islands", "tundra", "wetlands", "canyons", "savannas"]  # fmt: skip


@dataclass(frozen=True)
class Run:
    tokens: int
    seconds: float
    first_token: list[float]

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(model: str, sessions: int, threads: int, stack: ExitStack) -> str:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    cmd = [sys.executable, "-m", "ds4", "server", "-m", model, "--backend", "cpu",
           "--port", str(port), "-c", "2048", "-t", str(threads),
           "--sessions", str(sessions)]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL)
    stack.callback(proc.wait, 30)
    stack.callback(proc.terminate)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                return url
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the --sessions {sessions} server did not start") from None
            time.sleep(0.2)


def stream_one(url: str, prompt: str, tokens: int) -> tuple[int, float, float]:
    """(completion tokens, start, first-token time) of one streamed chat completion."""
    client = OpenAI(base_url=url + "/v1", api_key="none")
    start = time.perf_counter()
    first = 0.0
    used = 0
    stream = client.chat.completions.create(
        model="deepseek-v4-flash",
        messages=[{"role": "user", "content": prompt}],
        max_tokens=tokens,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"think": False},
    )
    for chunk in stream:
        if not first and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter() - start
        if chunk.usage is not None:
            used = chunk.usage.completion_tokens
    return used, start, first


def one_run(url: str, clients: int, tokens: int, run: int) -> Run:
    results: list[tuple[int, float, float]] = []
    lock = threading.Lock()

    def client(i: int) -> None:
        topic = TOPICS[i % len(TOPICS)]
        prompt = f"Run {run}, client {i}: write a long essay about {topic}."
        result = stream_one(url, prompt, tokens)
        with lock:
            results.append(result)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    begin = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - begin
    return Run(sum(r[0] for r in results), seconds, [r[2] for r in results])


def tiny_model(directory: str) -> str:
    out = str(Path(directory) / "tiny.gguf")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    subprocess.run([sys.executable, "-m", "ds4", "gguf", "tiny", "--out", out, "--preset",
                    "tiny", "--quant", "q2", "--quiet"], env=env, check=True)  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", help="GGUF model (default: a generated tiny 6-layer model)")
    ap.add_argument("--sessions", type=int, default=4, help="N: sessions and clients")
    ap.add_argument("--tokens", type=int, default=48, help="max_tokens per client")
    ap.add_argument("--runs", type=int, default=3, help="runs per server")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="cpu threads")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, ExitStack() as stack:
        model = args.model or tiny_model(tmp)
        counts = (1, args.sessions)
        urls = {n: start_server(model, n, args.threads, stack) for n in counts}
        for n in counts:  # warm: kernels, scratch, first tokenization
            one_run(urls[n], 1, 4, run=-1 - n)
        runs: dict[int, list[Run]] = {n: [] for n in counts}
        for r in range(args.runs):
            for n in counts:
                runs[n].append(one_run(urls[n], args.sessions, args.tokens, run=2 * r + n))
        print(f"{args.sessions} clients x {args.tokens} tokens, {args.runs} runs each, "
              f"model {Path(model).name}, {args.threads} threads")  # fmt: skip
        print(f"{'--sessions':>10} {'tokens/s':>9} {'first token s (median)':>23}")
        for n in counts:
            rate = statistics.median(run.rate for run in runs[n])
            first = statistics.median(t for run in runs[n] for t in run.first_token)
            print(f"{n:>10} {rate:>9.1f} {first:>23.2f}")
        ratio = statistics.median(r.rate for r in runs[args.sessions]) / statistics.median(
            r.rate for r in runs[1]
        )
        print(f"ratio --sessions {args.sessions} / --sessions 1: {ratio:.2f}")


if __name__ == "__main__":
    main()
