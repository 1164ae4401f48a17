"""The endpoint answerer against an in-process httpx transport: the request it sends,
how the stream becomes the engine's raw output, usage, errors and cancellation."""

from __future__ import annotations

import json

import httpx
import pytest
from tests.unit.eval.fakes import RecordingView

from ds4.adapters.eval.answerers import EndpointAnswerer, EndpointUnreachableError, chat_url
from ds4.domain.chat import ThinkMode
from ds4.domain.eval.cases import AnswerKind, EvalCase
from ds4.domain.eval.prompts import SYSTEM_PROMPT, case_prompt
from ds4.domain.sampling import SamplingParams
from ds4.ports.case_answerer import Answer, AnswerLimits

CASE = EvalCase("S", "1", "2+2?", "4", AnswerKind.INTEGER)


def sse(*chunks: dict[str, object]) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + (
        b"data: [DONE]\n\n"
    )


def delta(finish: str | None = None, **fields: str) -> dict[str, object]:
    return {"choices": [{"index": 0, "delta": fields, "finish_reason": finish}]}


USAGE: dict[str, object] = {
    "choices": [],
    "usage": {
        "prompt_tokens": 57, "completion_tokens": 9,
        "completion_tokens_details": {"reasoning_tokens": 4},
    },
}  # fmt: skip


def ask(
    body: bytes, status: int = 200, mode: ThinkMode = ThinkMode.HIGH, cancel_after: int = -1
) -> tuple[Answer, list[dict[str, object]], RecordingView]:
    sent: list[dict[str, object]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(json.loads(request.content))
        assert request.headers["authorization"] == "Bearer k"
        assert str(request.url) == "http://h:1/v1/chat/completions"
        return httpx.Response(status, content=body)

    client = httpx.Client(
        transport=httpx.MockTransport(handler), headers={"Authorization": "Bearer k"}
    )
    answerer = EndpointAnswerer("http://h:1", model="m", client=client)
    view = RecordingView()
    polls = [0]

    def cancel() -> bool:
        polls[0] += 1
        return polls[0] > cancel_after >= 0

    limits = AnswerLimits(300, SamplingParams(temperature=0.0, seed=9))
    return answerer.answer(case_prompt(CASE, mode), limits, view, cancel), sent, view


def test_chat_url() -> None:
    assert chat_url("http://h:1") == chat_url("http://h:1/v1/") == "http://h:1/v1/chat/completions"
    assert chat_url("https://x/api/v1/chat/completions") == "https://x/api/v1/chat/completions"


def test_request_and_the_rebuilt_output() -> None:
    body = sse(
        delta(reasoning_content="think"), delta(reasoning_content="ing"),
        delta(content="Answer: "), delta("stop", content="4"), USAGE,
    )  # fmt: skip
    answer, sent, _ = ask(body)
    request = sent[0]
    assert request["messages"] == [
        {"role": "system", "content": SYSTEM_PROMPT},
        {"role": "user", "content": case_prompt(CASE, ThinkMode.HIGH).user},
    ]
    assert request["stream"] is True and request["max_tokens"] == 300
    assert request["thinking"] == {"type": "enabled"} and request["seed"] == 9
    assert request["stream_options"] == {"include_usage": True}
    assert answer.output == "thinking</think>Answer: 4"
    assert (answer.prompt_tokens, answer.generated_tokens, answer.finish) == (57, 9, "stop")
    assert answer.think_close is not None
    assert (answer.think_close.kind, answer.think_close.token_index) == ("natural", 5)


def test_no_thinking_and_a_cut_answer() -> None:
    answer, sent, _ = ask(sse(delta("length", content="Answer")), mode=ThinkMode.NONE)
    assert sent[0]["thinking"] == {"type": "disabled"}
    assert (answer.output, answer.finish, answer.think_close) == ("Answer", "length", None)
    assert answer.generated_tokens == 1  # no usage: the chunks counted


def test_reasoning_cut_by_the_limit_has_no_close() -> None:
    answer, *_ = ask(sse(delta("length", reasoning_content="still thinking")))
    assert answer.output == "still thinking" and answer.think_close is None


def test_http_errors_carry_the_server_message() -> None:
    body = json.dumps({"error": {"message": "invalid api key"}}).encode()
    answer, *_ = ask(body, status=401)
    assert answer.finish == "error"
    assert answer.error == "HTTP 401 from http://h:1/v1/chat/completions: invalid api key"


def test_cancel_stops_reading() -> None:
    body = sse(*[delta(content="x") for _ in range(10)])
    answer, *_ = ask(body, cancel_after=3)
    assert answer.finish == "cancelled" and answer.output == "xxx"


def test_transport_errors_are_answers_not_exceptions() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("refused", request=request)

    client = httpx.Client(transport=httpx.MockTransport(refuse))
    answerer = EndpointAnswerer("http://h:1", model="m", client=client)
    limits = AnswerLimits(10, SamplingParams())
    answer = answerer.answer(
        case_prompt(CASE, ThinkMode.HIGH), limits, RecordingView(), lambda: False
    )
    assert answer.finish == "error" and "refused" in (answer.error or "")


@pytest.mark.parametrize("line", [b": keepalive\n\n", b"data: not json\n\n", b"event: x\n\n"])
def test_other_lines_are_skipped(line: bytes) -> None:
    answer, *_ = ask(line + sse(delta("stop", content="Answer: 4")))
    assert answer.output == "Answer: 4"


def test_check_reachable_accepts_any_http_reply_and_refuses_a_dead_endpoint() -> None:
    def method_not_allowed(request: httpx.Request) -> httpx.Response:
        assert request.method == "GET"
        return httpx.Response(405)

    alive = httpx.Client(transport=httpx.MockTransport(method_not_allowed))
    EndpointAnswerer("http://h:1", model="m", client=alive).check_reachable()

    def refused(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("[Errno 111] Connection refused", request=request)

    dead = httpx.Client(transport=httpx.MockTransport(refused))
    with pytest.raises(EndpointUnreachableError) as info:
        EndpointAnswerer("http://h:1", model="m", client=dead).check_reachable()
    assert str(info.value) == (
        "--endpoint http://h:1/v1/chat/completions: no server answers "
        "([Errno 111] Connection refused)"
    )
    assert info.value.exit_code == 1
