"""Stored Responses on the wire: `store`, `previous_response_id`, `conversation`, and the
bodies of GET and DELETE /v1/responses/{id} (docs/reference/server.md §2.7, §3.8;
docs/adr/0069-stored-responses.md). The store itself is domain/serving/response_store.py.

- `store` (a boolean; absent or null means true, as in OpenAI's API) keeps the response:
  its object as returned, the conversation's input items up to it, and its KV state.
- `previous_response_id` continues one: its conversation's items and its output items
  go in front of the new input, and the prompt that renders continues the state the
  stored turn ended in (live, or a checkpoint of it), so nothing stored is prefilled
  again. `instructions` and `tools` are not carried over (as in OpenAI's API): a request
  sends its own, and the same ones keep the stored state's prefix.
- `conversation` (OpenAI's conversation objects) is refused with a 400 naming it: this
  server keeps responses, not conversation objects.
An unknown, deleted or evicted id is a 404 in the OpenAI error shape.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

import msgspec

from ds4.domain.errors import ErrorKind, RequestError
from ds4.domain.generation.events import Finished
from ds4.domain.serving.response_store import ResponseStore, StoredResponse
from ds4.wire.replies import ReplyContext
from ds4.wire.requests import InvalidJsonError, ParsedRequest, StoredState

CONVERSATION_REFUSED = (
    "conversation is not supported: continue a stored response with "
    "previous_response_id, or replay the full input"
)


def not_found(response_id: str, param: str | None = None) -> RequestError:
    """OpenAI's words for an id it does not know (a 404)."""
    message = f"Response with id '{response_id}' not found."
    return RequestError(message, ErrorKind.NOT_FOUND, param=param)


def stored_state(
    store: object, previous_response_id: object, conversation: object, raw_input: object
) -> StoredState:
    """The request's stored-response fields, checked (`raw_input`: a string or a list)."""
    if conversation is not None:
        raise RequestError(CONVERSATION_REFUSED, param="conversation")
    if store is not None and not isinstance(store, bool):
        raise InvalidJsonError("store must be a boolean")
    previous = previous_response_id
    if previous is not None and not isinstance(previous, str):
        raise InvalidJsonError("previous_response_id must be a string")
    if isinstance(previous, str) and not previous.startswith("resp"):
        raise RequestError(
            f"previous_response_id {previous!r}: expected an ID that begins with 'resp'",
            param="previous_response_id",
        )
    items: tuple[object, ...]
    if isinstance(raw_input, str):
        items = ({"type": "message", "role": "user", "content": raw_input},)
    else:
        items = tuple(raw_input) if isinstance(raw_input, list) else ()
    return StoredState(store is not False, previous, items)


def as_input(item: object) -> object:
    """A stored output item as the input item that replays it: an incomplete item is
    replayed as it was left (the parser takes completed items only)."""
    if isinstance(item, dict) and item.get("status") not in (None, "completed"):
        return {key: value for key, value in item.items() if key != "status"}
    return item


def conversation_items(record: StoredResponse) -> tuple[object, ...]:
    """What a continuation of `record` puts in front of its input: the stored history,
    then the response's output items."""
    history = msgspec.json.decode(record.history)
    body = msgspec.json.decode(record.body)
    output = body.get("output") if isinstance(body, dict) else None
    return (*history, *(as_input(i) for i in (output if isinstance(output, list) else [])))


def resume_stored(store: ResponseStore, parsed: ParsedRequest) -> ParsedRequest:
    """The request with its stored conversation in front (a 404 for an unknown id), and
    with no KV state kept when the server keeps no responses."""
    state = parsed.stored
    if state is None:
        return parsed
    if state.previous_response_id is not None and state.resume is not None:
        record = store.get(state.previous_response_id)
        if record is None:
            raise not_found(state.previous_response_id, "previous_response_id")
        parsed = state.resume(conversation_items(record))
    if not store.enabled and parsed.generation.keep_state:
        return replace(parsed, generation=replace(parsed.generation, keep_state=False))
    return parsed


def kept(parsed: ParsedRequest, finished: Finished) -> bool:
    """Whether this reply is stored: asked for, and a turn that completed or ran out of
    its budget (one the server cut short is not a response to continue)."""
    state = parsed.stored
    return state is not None and state.store and finished.finish not in ("error", "cancelled")


def response_record(
    ctx: ReplyContext, parsed: ParsedRequest, finished: Finished, body: bytes
) -> StoredResponse:
    """The record of a reply (`body`: the response object the API returned)."""
    state = parsed.stored
    items: Sequence[object] = () if state is None else (*state.history, *state.items)
    usage = finished.usage
    return StoredResponse(
        id=ctx.reply_id,
        created_at=ctx.created,
        body=body,
        history=msgspec.json.encode(list(items)),
        kv_tokens=usage.prompt_tokens + len(finished.tokens),
    )


def deleted_body(response_id: str) -> bytes:
    return (
        msgspec.json.encode({"id": response_id, "object": "response.deleted", "deleted": True})
        + b"\n"
    )
