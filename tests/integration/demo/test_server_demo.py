"""`ds4 server` on the shipped demo model: the banner's request, and a read_file round trip.

The server runs in-process on the cpu backend (tests/integration/server/live_server.py).
The tool requests offer exactly the tool the model was trained with
(tools/demo/tool_dialogues.py), in the default thinking mode with a fixed seed, so the
outcome is fixed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.integration.server.live_server import LiveServer, live_server
from tools.demo.files import DEMO
from tools.demo.tool_dialogues import READ_FILE_TOOL

from ds4.apps.server_command import client_snippet

FILE_TEXT = "Renzo, alla prima, rimase impicciato; poi disse che i guai vengono spesso."


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp: Path = tmp_path_factory.mktemp("demo")
    # The (empty) script file live_server writes is ignored by the cpu backend.
    with live_server(tmp, [], model=str(DEMO), backend="cpu") as srv:
        yield srv


def chat(server: LiveServer, body: dict[str, Any]) -> dict[str, Any]:
    reply = httpx.post(server.base + "/chat/completions", json=body, timeout=120)
    assert reply.status_code == 200, reply.text
    data: dict[str, Any] = reply.json()
    return data


def banner_body(url: str) -> dict[str, Any]:
    """The JSON of the banner's curl line, exactly as printed."""
    match = re.search(r"-d '(\{.*?\})'\n", client_snippet(url, None))
    assert match is not None
    body: dict[str, Any] = json.loads(match.group(1))
    return body


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_banner_request_answers_in_italian_and_stops(server: LiveServer, seed: int) -> None:
    """The body as printed; a seed only fixes which sample the test gets (thinking mode,
    the default, samples at temperature 1 whatever the request says:
    docs/reference/server.md §3.3)."""
    body = banner_body(server.url)
    assert isinstance(body.get("max_tokens"), int)
    start = time.monotonic()
    choice = chat(server, {**body, "seed": seed})["choices"][0]
    assert time.monotonic() - start < 60
    assert choice["finish_reason"] == "stop"
    text = choice["message"]["content"]
    assert len(text.split()) >= 3
    assert re.search(r"\b(il|la|che|di|e|non|un|si)\b", text), text


@pytest.mark.parametrize("think", [True, False])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_without_max_tokens_the_demo_stops_by_itself(
    server: LiveServer, seed: int, think: bool
) -> None:
    """A request with no limit runs until the model stops or the context is full (ADR
    0049): the demo model ends its answers itself, so it answers in a moment."""
    body = {k: v for k, v in banner_body(server.url).items() if k != "max_tokens"}
    reply = chat(server, {**body, "seed": seed, "think": think})
    assert reply["choices"][0]["finish_reason"] == "stop"
    assert reply["usage"]["completion_tokens"] < 400  # of the 32K context


def test_banner_python_line_runs_on_the_standard_library_alone(server: LiveServer) -> None:
    """The python3 line as printed, run without site-packages (-S): no openai package,
    none installed by `make serve`, is needed."""
    match = re.search(r'python3 -c "(.*)"\n', client_snippet(server.url, None))
    assert match is not None
    done = subprocess.run(
        [sys.executable, "-S", "-c", match.group(1)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert done.stdout.endswith("\n")  # the answer's content (a sample: may be short)


def test_read_file_round_trip(server: LiveServer) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Leggi il file note/renzo.txt."}]
    first = chat(
        server,
        {"messages": messages, "tools": [READ_FILE_TOOL], "seed": 7, "max_tokens": 200},
    )["choices"][0]
    assert first["finish_reason"] == "tool_calls"
    calls = first["message"]["tool_calls"]
    assert [c["function"]["name"] for c in calls] == ["read_file"]
    arguments = json.loads(calls[0]["function"]["arguments"])
    assert set(arguments) == {"path"}
    # A well-formed path, not necessarily the one asked for: the model does not copy
    # from its context (docs/demo-model.md).
    assert isinstance(arguments["path"], str) and arguments["path"].strip()

    messages += [
        first["message"],
        {"role": "tool", "tool_call_id": calls[0]["id"], "content": FILE_TEXT},
    ]
    second = chat(
        server,
        {"messages": messages, "tools": [READ_FILE_TOOL], "seed": 7, "max_tokens": 200},
    )["choices"][0]
    assert second["finish_reason"] == "stop"
    assert second["message"]["content"].startswith("Il file ")
    assert not second["message"].get("tool_calls")
