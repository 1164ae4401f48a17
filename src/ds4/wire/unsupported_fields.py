"""Request fields this server cannot honour are refused, not silently dropped (issue 14
item 9; docs/adr/0044-server-exposure-and-limits.md).

- `n` (and completions' `best_of`) above 1: one model, one live state, one answer.
- `logprobs` / `top_logprobs`: no endpoint returns log probabilities.
- non-text content (images, audio, files, documents): the model reads text only.

Each refusal is a 400 naming the field. Fields that ask for nothing (`n: 1`,
`logprobs: false`, `top_logprobs: 0`, nulls) pass. The content probes decode only
each part's `type` (msgspec skips the rest), so they cost no copy of the text.
"""

from __future__ import annotations

import msgspec

from ds4.domain.errors import RequestError
from ds4.wire.json_body import JsonObject

CHAT_NON_TEXT_PARTS = frozenset({"image_url", "input_audio", "file"})
ANTHROPIC_NON_TEXT_BLOCKS = frozenset({"image", "document"})
RESPONSES_NON_TEXT_PARTS = frozenset({"input_image", "input_file", "input_audio"})


class _Part(msgspec.Struct):
    type: object = None
    content: msgspec.Raw = msgspec.Raw()  # an Anthropic tool_result's own blocks


class _Message(msgspec.Struct):
    content: msgspec.Raw = msgspec.Raw()


def _refuse(param: str, message: str) -> RequestError:
    return RequestError(message, param=param)


def check_choices(obj: JsonObject, *, completions: bool = False) -> None:
    """`n` (and `best_of` on completions) must be absent, null or 1."""
    for field in ("n", "best_of") if completions else ("n",):
        value = obj.get(field)
        if value is not None and value != 1:
            raise _refuse(field, f"{field}={value!r} is not supported: one choice per request")


def check_logprobs(obj: JsonObject, *, completions: bool = False) -> None:
    """Chat: `logprobs: true` or `top_logprobs` > 0; completions: any `logprobs`."""
    logprobs = obj.get("logprobs")
    asked = logprobs is not None if completions else logprobs not in (None, False)
    if asked:
        raise _refuse("logprobs", "logprobs are not supported by this server")
    top = obj.get("top_logprobs")
    if top not in (None, 0):
        raise _refuse("top_logprobs", "top_logprobs are not supported by this server")


def _starts_with(raw: msgspec.Raw, char: bytes) -> bool:
    return len(raw) > 0 and memoryview(raw)[:1] == char  # no copy of a long value


def _parts(raw: msgspec.Raw) -> list[msgspec.Raw]:
    if not _starts_with(raw, b"["):
        return []
    try:
        return msgspec.json.decode(raw, type=list[msgspec.Raw])
    except msgspec.DecodeError:
        return []  # the parser that reads the content reports it


def _part_type(raw: msgspec.Raw) -> _Part | None:
    if not _starts_with(raw, b"{"):
        return None
    try:
        return msgspec.json.decode(raw, type=_Part)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None


def _messages(obj: JsonObject) -> list[_Message]:
    raw = obj.raw("messages")
    if raw is None:
        return []
    try:
        return msgspec.json.decode(raw, type=list[_Message])
    except (msgspec.DecodeError, msgspec.ValidationError):
        return []  # the parser reports a malformed messages array


def check_chat_content(obj: JsonObject) -> None:
    """messages[i].content[j] of type image_url, input_audio or file."""
    for i, message in enumerate(_messages(obj)):
        for j, raw in enumerate(_parts(message.content)):
            part = _part_type(raw)
            if part is not None and part.type in CHAT_NON_TEXT_PARTS:
                raise _refuse(
                    "messages",
                    f"messages[{i}].content[{j}]: {part.type} content is not supported "
                    "(this server reads text only)",
                )


def check_anthropic_content(obj: JsonObject) -> None:
    """messages.i.content.j (or inside a tool_result) of type image or document."""
    for i, message in enumerate(_messages(obj)):
        for j, raw in enumerate(_parts(message.content)):
            part = _part_type(raw)
            if part is None:
                continue
            where = f"messages.{i}.content.{j}"
            nested = enumerate(_parts(part.content))  # a tool_result's blocks
            inner = [(f"{where}.content.{k}", _part_type(r)) for k, r in nested]
            for path, block in [(where, part), *inner]:
                if block is not None and block.type in ANTHROPIC_NON_TEXT_BLOCKS:
                    raise _refuse(
                        "messages",
                        f"{path}: {block.type} content is not supported (this server reads "
                        "text only)",
                    )


def refuse_responses_part(kind: object) -> None:
    """A Responses input content part that is not text (the parser calls this on the
    part types it does not take)."""
    if kind in RESPONSES_NON_TEXT_PARTS:
        raise _refuse("input", f"{kind} content is not supported (this server reads text only)")
