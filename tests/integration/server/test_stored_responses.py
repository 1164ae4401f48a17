"""Stored Responses with the real openai SDK against `ds4 server` on the demo model
(docs/adr/0069-stored-responses.md): `store` then `previous_response_id` continues on
the stored KV state (its cached tokens are the whole stored state) and answers what a
full replay of the conversation answers; retrieve, delete, 404s; `--sessions 2`
continuing two responses at once; a restart with --kv-disk-dir continues from disk.

Greedy and without thinking (`reasoning.effort: none`, temperature 0), so every
answer is fixed and the comparisons are exact.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import openai
import pytest
from tests.integration.server.live_server import LiveServer, live_server
from tests.integration.server.server_process import server_process
from tools.demo.files import DEMO

from ds4.domain.kvcache.policy import KvCacheOptions

KV = KvCacheOptions(min_tokens=8, boundary_align_tokens=16, continued_interval_tokens=0)
GREEDY: dict[str, Any] = {
    "model": "deepseek-v4-flash",
    "reasoning": {"effort": "none"},
    "temperature": 0,
    "max_output_tokens": 24,
}
FIRST = "Quel ramo del lago di Como"
SECOND = "E poi?"


def client(server: LiveServer) -> Any:  # SDK overloads are too narrow for dict params
    return openai.OpenAI(base_url=server.base, api_key="unused", max_retries=0, timeout=120)


def serve(tmp: Path, **overrides: Any) -> Any:
    tmp.mkdir(parents=True, exist_ok=True)
    return live_server(tmp, [], model=str(DEMO), backend="cpu", kv_cache=KV, **overrides)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with serve(tmp_path_factory.mktemp("stored")) as srv:
        yield srv


def replayed(first: Any, second: str) -> list[dict[str, Any]]:
    """The conversation as a client replays it without the server's help."""
    outputs = [item.model_dump(exclude_none=True) for item in first.output]
    return [{"role": "user", "content": FIRST}, *outputs, {"role": "user", "content": second}]


def test_previous_response_id_continues_the_stored_state(
    server: LiveServer, tmp_path: Path
) -> None:
    oai = client(server)
    first = oai.responses.create(input=FIRST, **GREEDY)
    assert first.output_text
    stored = first.usage.input_tokens + first.usage.output_tokens
    oai.responses.create(input="Un altro discorso, tutto diverso.", **GREEDY)  # moves on
    second = oai.responses.create(previous_response_id=first.id, input=SECOND, **GREEDY)
    assert second.usage.input_tokens_details.cached_tokens == stored
    assert second.usage.input_tokens > stored
    with serve(tmp_path, kv_mem_bytes=0) as fresh:  # a full replay on a cold server
        replay = client(fresh).responses.create(input=replayed(first, SECOND), **GREEDY)
    assert replay.usage.input_tokens_details.cached_tokens == 0
    assert replay.output_text == second.output_text
    assert replay.usage.input_tokens == second.usage.input_tokens


def test_retrieve_delete_and_404s(server: LiveServer) -> None:
    oai = client(server)
    made = oai.responses.create(input=FIRST, **GREEDY)
    got = oai.responses.retrieve(made.id)
    assert got.model_dump() == made.model_dump()
    oai.responses.delete(made.id)
    calls: list[Callable[[], object]] = [
        lambda: oai.responses.retrieve(made.id),
        lambda: oai.responses.delete(made.id),
        lambda: oai.responses.create(previous_response_id=made.id, input=SECOND, **GREEDY),
    ]
    for call in calls:
        with pytest.raises(openai.NotFoundError) as caught:
            call()
        assert caught.value.status_code == 404
        body: Any = caught.value.body
        assert body["message"] == f"Response with id '{made.id}' not found."


def test_store_false_keeps_nothing_and_conversation_is_refused(server: LiveServer) -> None:
    oai = client(server)
    made = oai.responses.create(input=FIRST, store=False, **GREEDY)
    with pytest.raises(openai.NotFoundError):
        oai.responses.retrieve(made.id)
    with pytest.raises(openai.BadRequestError) as caught:
        oai.responses.create(input=FIRST, conversation="conv_123", **GREEDY)
    body: Any = caught.value.body
    assert body["param"] == "conversation"
    assert "conversation is not supported" in body["message"]


def test_a_chain_of_three_keeps_every_turn(server: LiveServer) -> None:
    oai = client(server)
    first = oai.responses.create(input="La sera del sette novembre", **GREEDY)
    second = oai.responses.create(previous_response_id=first.id, input=SECOND, **GREEDY)
    third = oai.responses.create(previous_response_id=second.id, input="Chi?", **GREEDY)
    stored = second.usage.input_tokens + second.usage.output_tokens
    assert third.usage.input_tokens_details.cached_tokens == stored


def test_two_sessions_continue_two_responses_at_once(tmp_path: Path) -> None:
    """Two stored responses continued at once, and the first a second time beside
    them: each keeps its own stored state whole (the second continuation of the same
    response restores the kept copy) and answers what it answers on one session."""
    openings = (FIRST, "Renzo e Lucia")
    with serve(tmp_path / "one") as srv:
        oai = client(srv)
        expected = []
        for opening in openings:
            made = oai.responses.create(input=opening, **GREEDY)
            again = oai.responses.create(previous_response_id=made.id, input=SECOND, **GREEDY)
            expected.append((made.output_text, again.output_text))
    with serve(tmp_path / "two", sessions=2) as srv:
        oai = client(srv)
        made = [oai.responses.create(input=opening, **GREEDY) for opening in openings]
        assert [m.output_text for m in made] == [e[0] for e in expected]
        results: dict[int, Any] = {}

        def go(index: int, previous: Any) -> None:
            results[index] = oai.responses.create(
                previous_response_id=previous.id, input=SECOND, **GREEDY
            )

        order = (0, 1, 0)
        threads = [threading.Thread(target=go, args=(i, made[k])) for i, k in enumerate(order)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
    cached: dict[int, list[int]] = {0: [], 1: []}
    for index, k in enumerate(order):
        reply, origin = results[index], made[k]
        stored = origin.usage.input_tokens + origin.usage.output_tokens
        cached[k].append(reply.usage.input_tokens_details.cached_tokens - stored)
        assert reply.output_text == expected[k][1]
    # the first continuation of each reuses exactly the stored state; a second one of
    # the same response that ran after it may reuse that one's prompt as well
    assert cached[1] == [0]
    assert min(cached[0]) == 0 and max(cached[0]) >= 0


def test_a_restart_with_kv_disk_dir_continues_from_disk(tmp_path: Path) -> None:
    kv_dir = tmp_path / "kv"
    with serve(tmp_path, kv_disk_dir=str(kv_dir)) as srv:
        first = client(srv).responses.create(input=FIRST, **GREEDY)
    assert (kv_dir / "responses" / f"{first.id}.response").is_file()
    with serve(tmp_path, kv_disk_dir=str(kv_dir), kv_mem_bytes=0) as srv:
        oai = client(srv)
        assert oai.responses.retrieve(first.id).output_text == first.output_text
        second = oai.responses.create(previous_response_id=first.id, input=SECOND, **GREEDY)
    stored = first.usage.input_tokens + first.usage.output_tokens
    assert second.usage.input_tokens_details.cached_tokens == stored
    with serve(tmp_path / "cold", kv_mem_bytes=0) as fresh:
        replay = client(fresh).responses.create(input=replayed(first, SECOND), **GREEDY)
    assert replay.output_text == second.output_text


def test_a_streamed_response_is_stored_and_continued_streaming(server: LiveServer) -> None:
    oai = client(server)
    events = list(oai.responses.create(input="Don Abbondio tornava", stream=True, **GREEDY))
    first = events[-1].response
    assert events[-1].type == "response.completed"
    assert oai.responses.retrieve(first.id).output_text == first.output_text
    events = list(
        oai.responses.create(previous_response_id=first.id, input=SECOND, stream=True, **GREEDY)
    )
    second = events[-1].response
    stored = first.usage.input_tokens + first.usage.output_tokens
    assert second.usage.input_tokens_details.cached_tokens == stored
    plain = oai.responses.create(previous_response_id=first.id, input=SECOND, **GREEDY)
    assert plain.output_text == second.output_text


def test_ds4_server_restarted_on_its_kv_disk_dir_continues_a_stored_response(
    tmp_path: Path,
) -> None:
    """The command as a user runs it, stopped with SIGTERM and started again."""
    args = [
        "-m", str(DEMO), "--backend", "cpu", "--ctx", "4096",
        "--kv-disk-dir", str(tmp_path / "kv"), "--kv-cache-min-tokens", "8",
    ]  # fmt: skip
    with server_process(args, timeout=120) as srv:
        oai = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0)
        first = oai.responses.create(input="Fra Cristoforo", **GREEDY)
        code, stderr = srv.stop()
    assert code in (0, -signal.SIGTERM), stderr  # uvicorn re-raises the signal it caught
    assert "Traceback" not in stderr
    with server_process([*args, "--kv-mem-space-mb", "0"], timeout=120) as srv:
        oai = openai.OpenAI(base_url=srv.url + "/v1", api_key="unused", max_retries=0)
        assert oai.responses.retrieve(first.id).model_dump() == first.model_dump()
        second = oai.responses.create(previous_response_id=first.id, input=SECOND, **GREEDY)
        oai.responses.delete(first.id)
    stored = first.usage.input_tokens + first.usage.output_tokens
    assert second.usage.input_tokens_details.cached_tokens == stored
    assert not (tmp_path / "kv" / "responses" / f"{first.id}.response").exists()


@pytest.mark.parametrize("kv_in", ["memory", "disk"])
def test_a_thinking_response_continues_its_state_with_the_reasoning(
    tmp_path: Path, kv_in: str
) -> None:
    """With thinking on, the stored state holds reasoning the replayed items do not
    show: it is kept under the visible transcript, so the continuation still reuses it
    whole after the live state moved on, from memory or (restarted) from disk."""
    thinking = {**GREEDY, "reasoning": {"effort": "high"}, "max_output_tokens": 400}
    kv = {"kv_disk_dir": str(tmp_path / "kv")}
    with serve(tmp_path, **kv) as srv:
        oai = client(srv)
        first = oai.responses.create(input=FIRST, **thinking)
        assert first.status == "completed"
        assert first.usage.output_tokens_details.reasoning_tokens > 0
        oai.responses.create(input="Un altro discorso, tutto diverso.", **thinking)
        if kv_in == "memory":
            second = oai.responses.create(previous_response_id=first.id, input=SECOND, **thinking)
    if kv_in == "disk":
        with serve(tmp_path, kv_mem_bytes=0, **kv) as srv:
            second = client(srv).responses.create(
                previous_response_id=first.id, input=SECOND, **thinking
            )
    stored = first.usage.input_tokens + first.usage.output_tokens
    assert second.usage.input_tokens_details.cached_tokens == stored
