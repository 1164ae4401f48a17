"""Log-probabilities (docs/reference/server.md "Log-probabilities") from `ds4 server` on
the demo model, read with the openai SDK on loopback: chat replies and streams agree,
completions' echo scores the prompt (the first token null), Responses return them on
request, and the values equal `ds4 cli --dump-logprobs` on the same token ids.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from tests.integration.server.live_server import LiveServer, live_server
from tools.demo.files import DEMO

NO_THINK = {"thinking": {"type": "disabled"}}
PROMPT = "Renzo, alla prima, rimase impicciato"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(tmp_path_factory.mktemp("lp"), [], model=str(DEMO), backend="cpu") as srv:
        yield srv


@pytest.fixture(scope="module")
def client(server: LiveServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base, api_key="unused", max_retries=0)


def _entries(content: Any) -> list[tuple[str, float, list[int], list[tuple[str, float]]]]:
    return [
        (e.token, e.logprob, e.bytes, [(t.token, t.logprob) for t in e.top_logprobs])
        for e in content
    ]


def test_chat_top_logprobs_stream_equals_reply(client: openai.OpenAI) -> None:
    body: dict[str, Any] = {
        "model": "deepseek-v4-flash",
        "messages": [{"role": "user", "content": "Chi era Renzo?"}],
        "max_tokens": 8,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": 5,
        "extra_body": NO_THINK,
    }
    reply = client.chat.completions.create(**body)
    choice = reply.choices[0]
    assert choice.logprobs is not None and choice.logprobs.content is not None
    entries = _entries(choice.logprobs.content)
    assert reply.usage is not None and len(entries) == reply.usage.completion_tokens
    for token, logprob, raw, top in entries:
        assert len(top) == 5 and logprob <= 0
        assert token == top[0][0] and logprob == top[0][1]  # greedy: the best one
        assert [v for _, v in top] == sorted((v for _, v in top), reverse=True)
        assert sum(math.exp(v) for _, v in top) <= 1 + 1e-9
        assert bytes(raw).decode("utf-8", "replace")
    text = b"".join(bytes(e[2]) for e in entries).decode()
    assert text == choice.message.content
    streamed: list[Any] = []
    for chunk in client.chat.completions.create(**body, stream=True):
        if chunk.choices and chunk.choices[0].logprobs is not None:
            streamed += chunk.choices[0].logprobs.content or []
    assert _entries(streamed) == entries


def test_completions_echo_scores_the_prompt_first_token_null(
    server: LiveServer, client: openai.OpenAI
) -> None:
    ids = httpx.post(server.url + "/tokenize", json={"prompt": PROMPT}).json()["tokens"]
    detok = httpx.post(server.url + "/detokenize", json={"tokens": ids}).json()["prompt"]
    assert detok == PROMPT
    reply = client.completions.create(
        model="deepseek-v4-flash", prompt=ids, max_tokens=1, temperature=0, logprobs=1, echo=True
    )
    choice = reply.choices[0]
    assert choice.text.startswith(PROMPT)
    assert choice.logprobs is not None
    lp: dict[str, Any] = choice.logprobs.model_dump()
    assert len(lp["token_logprobs"]) == len(ids) + 1  # the prompt, then the generated token
    assert lp["token_logprobs"][0] is None and lp["top_logprobs"][0] is None
    assert all(v is not None and v <= 0 for v in lp["token_logprobs"][1:])
    assert "".join(lp["tokens"]) == choice.text
    starts = [sum(len(t) for t in lp["tokens"][:i]) for i in range(len(lp["tokens"]))]
    assert lp["text_offset"] == starts
    # the generated token is the best one after the prompt
    assert lp["token_logprobs"][-1] == max(lp["top_logprobs"][-1].values())


def test_responses_include_output_text_logprobs(server: LiveServer) -> None:
    body = {
        "input": "Chi era Renzo?",
        "max_output_tokens": 6,
        "reasoning": {"effort": "none"},
        "temperature": 0,
        "include": ["message.output_text.logprobs"],
        "top_logprobs": 3,
    }
    reply = httpx.post(server.base + "/responses", json=body, timeout=120).json()
    part = reply["output"][0]["content"][0]
    assert part["type"] == "output_text"
    assert len(part["logprobs"]) == reply["usage"]["output_tokens"]
    assert all(len(e["top_logprobs"]) == 3 for e in part["logprobs"])
    assert "".join(e["token"] for e in part["logprobs"]) == part["text"]
    plain = httpx.post(
        server.base + "/responses", json={**body, "include": None, "top_logprobs": None}
    )
    assert "logprobs" not in plain.json()["output"][0]["content"][0]


def test_values_equal_the_cli_dump_logprobs(
    server: LiveServer, client: openai.OpenAI, tmp_path: Path
) -> None:
    """Same token ids, greedy, top 5: the server's numbers are the CLI's."""
    ids = httpx.post(server.url + "/tokenize", json={"prompt": PROMPT}).json()["tokens"]
    ids_file = tmp_path / "ids.json"
    ids_file.write_text(json.dumps(ids))
    dump = tmp_path / "lp.json"
    done = subprocess.run(
        [sys.executable, "-m", "ds4", "cli", "-m", str(DEMO), "--backend", "cpu",
         "--prompt-tokens", str(ids_file), "-n", "4", "--dump-logprobs", str(dump),
         "--logprobs-top-k", "5"],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    steps = json.loads(dump.read_text())["steps"]
    reply = client.completions.create(
        model="deepseek-v4-flash", prompt=ids, max_tokens=len(steps), temperature=0, logprobs=5
    )
    assert reply.choices[0].logprobs is not None
    lp: dict[str, Any] = reply.choices[0].logprobs.model_dump()
    assert len(lp["token_logprobs"]) == len(steps)
    for step, chosen, logprob, top in zip(
        steps, lp["tokens"], lp["token_logprobs"], lp["top_logprobs"], strict=True
    ):
        cli_top = [(bytes(t["token"]["bytes"]), t["logprob"]) for t in step["top_logprobs"]]
        assert chosen.encode() == bytes(step["selected"]["bytes"])
        assert logprob == pytest.approx(cli_top[0][1], rel=1e-7, abs=1e-7)
        assert [k.encode() for k in top] == [raw for raw, _ in cli_top]
        assert list(top.values()) == pytest.approx([v for _, v in cli_top], rel=1e-7, abs=1e-7)
