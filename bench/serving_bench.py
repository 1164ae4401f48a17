"""Serving latency and throughput from real SDK streaming clients: `ds4 server --sessions 1`
and `--sessions N` side by side in one run, under a closed loop and Poisson arrivals.

Clients are `openai.AsyncOpenAI` chat-completion streams (greedy, no thinking, a prompt of
their own that no earlier request used, so nothing continues another's state):
- closed loop: C clients, each sending its next request when the previous one ends;
- Poisson: requests arrive at rate R per second (exponential gaps, seeded), each its own
  client, however many are still running.
Per request: TTFT (send to the first streamed token), ITL (the gaps between streamed
tokens), TPOT ((last token - first token) / (tokens - 1)), end-to-end latency; per run:
aggregate output tokens/s (every request's tokens over the run's wall time). Printed as
p50/p90/p99, and the N-vs-1 ratio of aggregate tokens/s for each load.

The servers are subprocesses on loopback ports, both up for the whole run, their runs
alternating (1, N, 1, N, ...) so a busy machine slows both alike. Backends: `scripted`
(no model: the server's own cost per token — HTTP, SSE, sampling, the lexer) and `demo`
(the cpu backend on models/demo.gguf). `--url` measures one running server instead.
Run: .venv/bin/python bench/serving_bench.py [--backends scripted,demo] [--sessions 4]
       [--clients 4] [--requests 16] [--rate 4] [--max-tokens 64] [--threads 2]
     .venv/bin/python bench/serving_bench.py --url http://127.0.0.1:8000 [...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from openai import AsyncOpenAI

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "models" / "demo.gguf"
OPENINGS = [
    "Quel ramo del lago di Como", "Renzo e Lucia", "Don Abbondio", "La monaca di Monza",
    "L'innominato", "Fra Cristoforo", "Il cardinale Federigo", "La peste di Milano",
]  # fmt: skip
SCRIPTED_REPLY = "</think>" + "The quick brown fox jumps over the lazy dog. " * 40


@dataclass
class Request:
    """One streamed request: when it was sent, when each token chunk came, its usage."""

    sent: float
    chunks: list[float] = field(default_factory=list)
    ended: float = 0.0
    tokens: int = 0
    error: str | None = None

    @property
    def ttft(self) -> float | None:
        return self.chunks[0] - self.sent if self.chunks else None

    @property
    def tpot(self) -> float | None:
        if len(self.chunks) < 2 or self.tokens < 2:
            return None
        return (self.chunks[-1] - self.chunks[0]) / (self.tokens - 1)

    @property
    def gaps(self) -> list[float]:
        return [b - a for a, b in zip(self.chunks, self.chunks[1:], strict=False)]


@dataclass
class Run:
    load: str
    sessions: int
    requests: list[Request]
    seconds: float

    @property
    def tokens(self) -> int:
        return sum(r.tokens for r in self.requests)

    @property
    def rate(self) -> float:
        return self.tokens / self.seconds


# ---- clients -------------------------------------------------------------------------


async def stream_one(client: AsyncOpenAI, prompt: str, max_tokens: int) -> Request:
    request = Request(time.perf_counter())
    try:
        stream = await client.chat.completions.create(
            model="deepseek-v4-flash",
            messages=[{"role": "user", "content": prompt}],
            max_tokens=max_tokens,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"think": False},
        )
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                request.chunks.append(time.perf_counter())
            if chunk.usage is not None:
                request.tokens = chunk.usage.completion_tokens
    except Exception as error:  # counted and shown, never a crashed run
        request.error = f"{type(error).__name__}: {error}"
    request.ended = time.perf_counter()
    return request


def prompt_for(run: int, index: int) -> str:
    return f"{OPENINGS[index % len(OPENINGS)]} ({run}.{index})"


async def closed_loop(url: str, clients: int, total: int, max_tokens: int, run: int) -> Run:
    client = AsyncOpenAI(base_url=url + "/v1", api_key="none", timeout=600, max_retries=0)
    todo = iter(range(total))
    done: list[Request] = []

    async def one_client() -> None:
        for index in todo:  # shared iterator: the next free client takes the next request
            done.append(await stream_one(client, prompt_for(run, index), max_tokens))

    begin = time.perf_counter()
    await asyncio.gather(*(one_client() for _ in range(clients)))
    seconds = time.perf_counter() - begin
    await client.close()
    return Run(f"closed C={clients}", 0, done, seconds)


async def poisson(url: str, rate: float, total: int, max_tokens: int, run: int) -> Run:
    client = AsyncOpenAI(base_url=url + "/v1", api_key="none", timeout=600, max_retries=0)
    arrivals = random.Random(run)
    begin = time.perf_counter()
    tasks = []
    at = 0.0
    for index in range(total):
        at += arrivals.expovariate(rate)
        delay = begin + at - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(stream_one(client, prompt_for(run, index), max_tokens)))
    done = list(await asyncio.gather(*tasks))
    seconds = time.perf_counter() - begin
    await client.close()
    return Run(f"poisson {rate:g}/s", 0, done, seconds)


# ---- servers -------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_args(backend: str, threads: int, script: Path) -> list[str]:
    if backend == "scripted":
        return ["--backend", "scripted", "--script", str(script)]
    return ["-m", str(DEMO), "--backend", "cpu", "-t", str(threads)]


@contextmanager
def running_server(args: Sequence[str], sessions: int, log: Path) -> Iterator[str]:
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    cmd = [sys.executable, "-m", "ds4", "server", *args, "--port", str(port), "-c", "4096",
           "--sessions", str(sessions)]  # fmt: skip
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, env=env, stderr=err, stdout=subprocess.DEVNULL)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while True:
                try:
                    with urllib.request.urlopen(url + "/health", timeout=2):
                        break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"server did not start; see {log}") from None
                    time.sleep(0.2)
            yield url
        finally:
            proc.terminate()
            proc.wait(30)


# ---- report --------------------------------------------------------------------------


def pct(values: Sequence[float], scale: float, digits: int = 0) -> str:
    """p50/p90/p99 (nearest rank) of `values` times `scale`."""
    if not values:
        return "-"
    ordered = sorted(values)

    def at(q: float) -> str:
        return f"{ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * scale:.{digits}f}"

    return f"{at(0.5)}/{at(0.9)}/{at(0.99)}"


def report(title: str, runs: list[Run], sessions: int) -> None:
    print(f"\n{title}")
    print(f"{'sessions':>8} {'load':<14} {'req':>4} {'err':>3} {'TTFT ms':>16} "
          f"{'ITL ms':>15} {'TPOT ms':>15} {'E2E ms':>17} {'out t/s':>8}")  # fmt: skip
    print(f"{'':>8} {'':<14} {'':>4} {'':>3} {'p50/p90/p99':>16} {'p50/p90/p99':>15} "
          f"{'p50/p90/p99':>15} {'p50/p90/p99':>17} {'median':>8}")  # fmt: skip
    loads = list(dict.fromkeys(r.load for r in runs))
    for load in loads:
        for n in sorted({r.sessions for r in runs}):
            mine = [r for r in runs if r.load == load and r.sessions == n]
            reqs = [q for r in mine for q in r.requests]
            ok = [q for q in reqs if q.error is None]
            ttft = [t for q in ok if (t := q.ttft) is not None]
            tpot = [t for q in ok if (t := q.tpot) is not None]
            itl = [g for q in ok for g in q.gaps]
            e2e = [q.ended - q.sent for q in ok]
            rate = statistics.median(r.rate for r in mine)
            label = str(n) if n else "-"  # a server started elsewhere (--url)
            print(f"{label:>8} {load:<14} {len(reqs):>4} {len(reqs) - len(ok):>3} "
                  f"{pct(ttft, 1e3):>16} {pct(itl, 1e3, 1):>15} {pct(tpot, 1e3, 1):>15} "
                  f"{pct(e2e, 1e3):>17} {rate:>8.1f}")  # fmt: skip
    if sessions > 1:
        for load in loads:
            one = statistics.median(r.rate for r in runs if r.load == load and r.sessions == 1)
            many = statistics.median(
                r.rate for r in runs if r.load == load and r.sessions == sessions
            )
            print(f"aggregate t/s --sessions {sessions} / --sessions 1, {load}: {many / one:.2f}")
    errors = [q.error for r in runs for q in r.requests if q.error]
    if errors:
        print(f"first error: {errors[0]}")


async def measure(url: str, sessions: int, args: argparse.Namespace, run: int) -> list[Run]:
    runs = [await closed_loop(url, args.clients, args.requests, args.max_tokens, run)]
    if args.rate > 0:
        runs.append(await poisson(url, args.rate, args.requests, args.max_tokens, run + 1))
    for r in runs:
        r.sessions = sessions
    return runs


def side_by_side(backend: str, args: argparse.Namespace, tmp: Path) -> list[Run]:
    script = tmp / "script.json"
    script.write_text(json.dumps([SCRIPTED_REPLY]), encoding="utf-8")
    counts = (1, args.sessions) if args.sessions > 1 else (1,)
    runs: list[Run] = []
    with ExitStack() as stack:
        urls = {}
        for n in counts:
            log = tmp / f"{backend}-{n}.log"
            args_n = server_args(backend, args.threads, script)
            urls[n] = stack.enter_context(running_server(args_n, n, log))
        for n in counts:  # warm: kernels, scratch buffers, the first tokenization
            asyncio.run(closed_loop(urls[n], 1, 1, 4, run=-1 - n))
        for repeat in range(args.repeats):
            for n in counts:  # the same prompts and arrival times for 1 and N
                runs += asyncio.run(measure(urls[n], n, args, run=10 * repeat))
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--backends", default="scripted,demo",
                    help="comma-separated: scripted, demo (default: both)")  # fmt: skip
    ap.add_argument("--url", help="measure this running server instead (no side by side)")
    ap.add_argument("--sessions", type=int, default=4, help="N of --sessions N (default 4)")
    ap.add_argument("--clients", type=int, default=4, help="closed-loop clients (default 4)")
    ap.add_argument("--requests", type=int, default=16, help="requests per run (default 16)")
    ap.add_argument("--rate", type=float, default=4.0,
                    help="Poisson arrivals per second; 0 skips that load (default 4)")  # fmt: skip
    ap.add_argument("--max-tokens", type=int, default=64, help="max_tokens per request")
    ap.add_argument("--repeats", type=int, default=1, help="runs per server and load")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="cpu threads")
    args = ap.parse_args()
    for name, value in (("--sessions", args.sessions), ("--clients", args.clients),
                        ("--requests", args.requests), ("--max-tokens", args.max_tokens),
                        ("--repeats", args.repeats), ("--threads", args.threads)):  # fmt: skip
        if value < 1:
            ap.error(f"{name} must be at least 1")
    if args.rate < 0:
        ap.error("--rate must be 0 or more")
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    if not args.url and (not backends or set(backends) - {"scripted", "demo"}):
        ap.error("--backends takes scripted and/or demo")
    load = os.getloadavg()[0]
    print(f"serving_bench: {os.cpu_count()} cores, load average {load:.2f} at start; "
          f"{args.requests} requests per run, max_tokens {args.max_tokens}, "
          f"{args.repeats} run(s) per server and load")  # fmt: skip
    if args.url:
        report(f"{args.url}", asyncio.run(measure(args.url, 0, args, run=1)), 0)
        return
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends:
            title = ("scripted backend (no model: the server's own cost per token)"
                     if backend == "scripted" else
                     f"demo model ({DEMO.name}, cpu backend, {args.threads} threads)")  # fmt: skip
            report(title, side_by_side(backend, args, Path(tmp)), args.sessions)
    print(f"\nload average {os.getloadavg()[0]:.2f} at the end")


if __name__ == "__main__":
    main()
