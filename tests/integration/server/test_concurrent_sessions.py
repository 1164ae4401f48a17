"""`ds4 server --sessions N` over HTTP: concurrent greedy streams give the tokens each
gives alone (scripted backend, and a real tiny model on the cpu backend, whose decode
steps run batched), cancelling one stream leaves the others intact, and a long stream
does not hold up a short request.

Nothing here waits on time: equal outputs hold whatever steps the streams shared."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.integration.engine_cpu.conftest import make_tiny
from tests.integration.server.live_server import LiveServer, live_server

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
WAIT = 120.0


def in_threads(*calls: Callable[[], None]) -> None:
    errors: list[BaseException] = []

    def guarded(call: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                call()
            except BaseException as error:  # reported below, not lost in a thread
                errors.append(error)

        return run

    threads = [threading.Thread(target=guarded(c)) for c in calls]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT)
        assert not t.is_alive()
    if errors:
        raise errors[0]


def streamed_text(url: str, body: dict[str, Any], *, stop_after: int | None = None) -> str:
    """The text of one streamed completion; `stop_after`: walk away after that many
    text chunks (the server sees a disconnect)."""
    pieces: list[str] = []
    with httpx.stream("POST", url, json={**body, "stream": True}, timeout=WAIT) as response:
        assert response.status_code == 200
        for line in response.iter_lines():
            if not line.startswith("data: {"):
                continue
            choice = json.loads(line[6:])["choices"][0]
            piece = choice.get("text") or (choice.get("delta") or {}).get("content") or ""
            if piece:
                pieces.append(piece)
                if stop_after is not None and len(pieces) >= stop_after:
                    break
    return "".join(pieces)


# ---- scripted backend ----------------------------------------------------------------

OUTPUTS = ["</think>" + " ".join(f"{w}{i}" for i in range(25)) for w in ("alpha", "beta", "gamma")]


def test_concurrent_scripted_streams_each_get_one_whole_output(tmp_path: Path) -> None:
    """The scripted double hands out its outputs in prefill order; three streams at
    once get the three outputs, each whole and unmixed."""
    with live_server(tmp_path, OUTPUTS, sessions=3, script_token_delay=0.002) as live:
        got: dict[int, str] = {}

        def ask(i: int) -> Callable[[], None]:
            def call() -> None:
                body = {"messages": [{"role": "user", "content": f"q{i}"}]}
                got[i] = streamed_text(live.url + CHAT, body)

            return call

        in_threads(*(ask(i) for i in range(3)))
    assert sorted(got.values()) == sorted(o.removeprefix("</think>") for o in OUTPUTS)


def test_a_long_stream_does_not_hold_up_a_short_request(tmp_path: Path) -> None:
    """The long output would take minutes: with one session the short request could
    only be answered after it. The long stream is then dropped (cancelled)."""
    endless = "</think>" + " word" * 20_000
    with live_server(
        tmp_path, [endless, "</think>short"], sessions=2, script_token_delay=0.01
    ) as live:
        body = {"messages": [{"role": "user", "content": "long"}], "stream": True}
        with httpx.stream("POST", live.url + CHAT, json=body, timeout=WAIT) as long_stream:
            for line in long_stream.iter_lines():
                if '"content"' in line:
                    break  # the long answer is streaming
            short = httpx.post(
                live.url + CHAT,
                json={"messages": [{"role": "user", "content": "short"}]},
                timeout=WAIT,
            )
        assert short.json()["choices"][0]["message"]["content"] == "short"


# ---- a real tiny model on the cpu backend --------------------------------------------

PROMPTS = ["The quick brown fox", "Once upon a time, in a", "def fibonacci(n):\n"]
# without thinking: a thinking turn samples at temperature 1 whatever the request says
GREEDY = {"max_tokens": 24, "temperature": 0, "think": False}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny(tmp_path_factory.mktemp("sessions") / "tiny.gguf", "q2", "--seed", "5")


def cpu_server(tmp: Path, model: Path, sessions: int) -> Any:
    return live_server(tmp, ["unused"], model=str(model), backend="cpu", threads=1,
                       ctx=512, sessions=sessions)  # fmt: skip


def alone(tmp: Path, model: Path) -> list[str]:
    """Each prompt on a one-session server, one after another, each from an empty state."""
    out = []
    for prompt in PROMPTS:
        with cpu_server(tmp, model, 1) as live:
            out.append(streamed_text(live.url + COMPLETIONS, {"prompt": prompt, **GREEDY}))
    return out


def together(live: LiveServer, stop_after: dict[int, int] | None = None) -> dict[int, str]:
    got: dict[int, str] = {}

    def ask(i: int) -> Callable[[], None]:
        def call() -> None:
            body = {"prompt": PROMPTS[i], **GREEDY}
            cut = (stop_after or {}).get(i)
            got[i] = streamed_text(live.url + COMPLETIONS, body, stop_after=cut)

        return call

    in_threads(*(ask(i) for i in range(len(PROMPTS))))
    return got


def test_concurrent_greedy_streams_on_a_real_model_equal_each_alone(
    tmp_path: Path, tiny: Path
) -> None:
    want = alone(tmp_path, tiny)
    assert all(want)
    with cpu_server(tmp_path, tiny, 3) as live:
        got = together(live)
        cancelled = together(live, stop_after={1: 3})  # stream 1 walks away early
        gate = live.built.gate
        assert gate is not None and gate.steps > 0
    assert [got[i] for i in range(3)] == want
    assert cancelled[0] == want[0] and cancelled[2] == want[2]
    assert want[1].startswith(cancelled[1])


def test_a_disconnect_during_prefill_stops_it_within_a_chunk_by_default(
    tmp_path: Path, tiny: Path
) -> None:
    """Default options: the client leaves as soon as the stream opens (after the first
    prefill chunk); the prefill stops at a chunk boundary, well before the end of the
    prompt, and the next request finds the state that far."""
    trace_path = tmp_path / "trace.txt"
    long_prompt = "word " * 9000  # about 9000 tokens: five chunks of 2048
    with (
        trace_path.open("w", encoding="utf-8") as trace,
        live_server(
            tmp_path, ["unused"], trace, model=str(tiny), backend="cpu", threads=1, ctx=16384
        ) as live,
    ):
        body = {"prompt": long_prompt, **GREEDY, "stream": True}
        with httpx.stream("POST", live.url + COMPLETIONS, json=body, timeout=WAIT) as response:
            assert response.status_code == 200  # the head goes out after the first chunk
        follow = httpx.post(live.url + COMPLETIONS, json={"prompt": "word", **GREEDY}, timeout=WAIT)
        assert follow.status_code == 200
    lines = trace_path.read_text(encoding="utf-8").splitlines()
    decisions = [line for line in lines if "--- cache decision ---" in line]
    prompt = int(decisions[0].split(" prompt=")[1].split()[0])
    left = int(decisions[1].split(" live=")[1].split()[0])  # what the cancelled job left
    assert sum("--- prefill done ---" in line for line in lines) == 1  # the follow-up's
    assert left % 2048 == 0 and 0 < left < prompt
