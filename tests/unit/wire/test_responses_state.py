"""Responses `store`, `previous_response_id` and `conversation` on the wire
(wire/responses_state.py): the checks, and a continuation parsed with the stored
conversation in front."""

from __future__ import annotations

import msgspec
import pytest

from ds4.domain.chat import AssistantMessage, UserMessage
from ds4.domain.errors import ErrorKind, RequestError
from ds4.domain.serving.response_store import ResponseStore, StoredResponse
from ds4.wire.responses_request import parse_responses
from ds4.wire.responses_state import conversation_items, resume_stored

RID = "resp_" + "a" * 24


def body(**fields: object) -> bytes:
    return msgspec.json.encode({"model": "deepseek-v4-flash", **fields})


def stored(output_status: str = "completed") -> StoredResponse:
    response = {
        "id": RID,
        "object": "response",
        "output": [
            {"id": "rs_1", "type": "reasoning", "status": output_status, "summary": []},
            {
                "id": "msg_1",
                "type": "message",
                "status": output_status,
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Ciao!", "annotations": []}],
            },
        ],
    }
    history = [{"type": "message", "role": "user", "content": "Saluta"}]
    return StoredResponse(RID, 1, msgspec.json.encode(response), msgspec.json.encode(history), 10)


def test_store_defaults_to_true_and_false_keeps_no_state() -> None:
    assert parse_responses(body(input="hi")).generation.keep_state
    parsed = parse_responses(body(input="hi", store=False))
    assert not parsed.generation.keep_state
    assert parsed.stored is not None and not parsed.stored.store


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"store": "yes"}, "store must be a boolean"),
        ({"previous_response_id": 5}, "previous_response_id must be a string"),
        ({"previous_response_id": "abc"}, "begins with 'resp'"),
        ({"conversation": "conv_1"}, "conversation is not supported"),
        ({"conversation": {"id": "conv_1"}}, "conversation is not supported"),
    ],
)
def test_bad_stored_fields_are_400s_naming_them(fields: dict[str, object], message: str) -> None:
    with pytest.raises(RequestError, match=message) as caught:
        parse_responses(body(input="hi", **fields))
    assert caught.value.kind is ErrorKind.INVALID_REQUEST


def test_a_continuation_puts_the_stored_conversation_in_front() -> None:
    store = ResponseStore()
    store.put(stored())
    parsed = parse_responses(body(input="E tu?", previous_response_id=RID))
    resumed = resume_stored(store, parsed)
    messages = resumed.generation.messages
    assert messages == (
        UserMessage("Saluta"),
        AssistantMessage("Ciao!", None),
        UserMessage("E tu?"),
    )
    assert resumed.stored is not None
    assert len(resumed.stored.history) == 3  # the stored input and its two output items
    assert resumed.stored.items == ({"type": "message", "role": "user", "content": "E tu?"},)


def test_an_incomplete_stored_output_is_replayed_as_it_was_left() -> None:
    items = conversation_items(stored("incomplete"))
    assert all("status" not in item for item in items if isinstance(item, dict))


def test_an_unknown_previous_response_is_a_404_naming_the_field() -> None:
    parsed = parse_responses(body(input="E tu?", previous_response_id=RID))
    with pytest.raises(RequestError) as caught:
        resume_stored(ResponseStore(), parsed)
    assert caught.value.kind is ErrorKind.NOT_FOUND
    assert caught.value.param == "previous_response_id"
    assert caught.value.message == f"Response with id '{RID}' not found."


def test_a_continuation_of_only_tool_output_is_answerable_with_its_history() -> None:
    """The new input alone (a tool output) would have no call; with the stored one it does."""
    response = {
        "id": RID,
        "output": [{"type": "function_call", "name": "ls", "call_id": "call_1", "arguments": "{}"}],
    }
    record = StoredResponse(RID, 1, msgspec.json.encode(response), b'[{"content":"list"}]', 5)
    store = ResponseStore()
    store.put(record)
    output = [{"type": "function_call_output", "call_id": "call_1", "output": "a b"}]
    parsed = resume_stored(store, parse_responses(body(input=output, previous_response_id=RID)))
    assert len(parsed.generation.messages) == 3


def test_with_storing_off_no_state_is_kept() -> None:
    parsed = resume_stored(ResponseStore(max_count=0), parse_responses(body(input="hi")))
    assert not parsed.generation.keep_state
