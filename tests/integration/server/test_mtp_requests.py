"""`ds4 server --mtp` on the demo model: a greedy request gets the same answer with
drafts and with the per-request opt-out (X-DS4-MTP: off), the opt-out drafts nothing,
and a bad header value is a 400."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from tests.integration.server.live_server import LiveServer, live_server
from tools.demo.files import DEMO

from ds4.domain.speculative import MtpDrafter

DEMO_MTP = DEMO.with_name("demo-mtp.gguf")
BODY = {
    "model": "deepseek-chat",  # no thinking: the request's temperature 0 holds
    "messages": [{"role": "user", "content": "Continua: Quel ramo del lago di Como"}],
    "temperature": 0,
    "max_tokens": 60,
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    tmp: Path = tmp_path_factory.mktemp("mtp")
    with live_server(tmp, [], model=str(DEMO), backend="cpu", mtp=str(DEMO_MTP)) as srv:
        yield srv


def drafter(server: LiveServer) -> MtpDrafter:
    (worker,) = server.built.workers
    d = worker.session.drafter
    assert isinstance(d, MtpDrafter)
    return d


def ask(server: LiveServer, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(server.base + "/chat/completions", json=BODY, headers=headers, timeout=120)


def content(reply: httpx.Response) -> Any:
    assert reply.status_code == 200, reply.text
    return reply.json()["choices"][0]["message"]["content"]


def test_the_opt_out_gives_the_same_answer_without_drafts(server: LiveServer) -> None:
    stats = drafter(server).stats
    before = stats.proposed
    with_drafts = content(ask(server, {}))
    assert stats.proposed > before and with_drafts
    before = stats.proposed
    without = content(ask(server, {"X-DS4-MTP": "off"}))
    assert stats.proposed == before
    assert without == with_drafts


def test_a_bad_opt_out_value_is_a_400(server: LiveServer) -> None:
    reply = ask(server, {"X-DS4-MTP": "maybe"})
    assert reply.status_code == 400
    assert "X-DS4-MTP: 'maybe' is not on or off" in reply.text
