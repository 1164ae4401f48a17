"""Request fields this server cannot honour are refused, not silently dropped (issue 14
item 9; docs/adr/0044-server-exposure-and-limits.md).

- `n` (and completions' `best_of`) above 1: one model, one live state, one answer.
- `logprobs` / `top_logprobs`: no endpoint returns log probabilities.
- non-text content (images, audio, files, documents): the model reads text only.

Each refusal is a 400 naming the field. Fields that ask for nothing (`n: 1`,
`logprobs: false`, `top_logprobs: 0`, nulls) pass. The checks read the values the
parser decoded (json_body), so nothing is decoded twice.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ds4.domain.errors import RequestError

CHAT_NON_TEXT_PARTS = frozenset({"image_url", "input_audio", "file"})
ANTHROPIC_NON_TEXT_BLOCKS = frozenset({"image", "document"})
RESPONSES_NON_TEXT_PARTS = frozenset({"input_image", "input_file", "input_audio"})


def _refuse(param: str, message: str) -> RequestError:
    return RequestError(message, param=param)


def check_choices(fields: Mapping[str, object]) -> None:
    """`n` (and `best_of` on completions) must be absent, null or 1."""
    for field, value in fields.items():
        if value is not None and value != 1:
            raise _refuse(field, f"{field}={value!r} is not supported: one choice per request")


def check_logprobs(logprobs: object, top_logprobs: object, *, completions: bool = False) -> None:
    """Chat: `logprobs: true` or `top_logprobs` > 0; completions: any `logprobs`."""
    asked = logprobs is not None if completions else logprobs not in (None, False)
    if asked:
        raise _refuse("logprobs", "logprobs are not supported by this server")
    if top_logprobs not in (None, 0):
        raise _refuse("top_logprobs", "top_logprobs are not supported by this server")


def _parts(content: object) -> list[object]:
    return content if isinstance(content, list) else []


def _part_type(part: object) -> str | None:
    kind = part.get("type") if isinstance(part, dict) else None
    return kind if isinstance(kind, str) else None


def check_chat_content(contents: Sequence[object]) -> None:
    """messages[i].content[j] of type image_url, input_audio or file (`contents`: each
    message's decoded content, in order)."""
    for i, content in enumerate(contents):
        for j, part in enumerate(_parts(content)):
            kind = _part_type(part)
            if kind in CHAT_NON_TEXT_PARTS:
                raise _refuse(
                    "messages",
                    f"messages[{i}].content[{j}]: {kind} content is not supported "
                    "(this server reads text only)",
                )


def check_anthropic_content(contents: Sequence[object]) -> None:
    """messages.i.content.j (or inside a tool_result) of type image or document."""
    for i, content in enumerate(contents):
        for j, part in enumerate(_parts(content)):
            if not isinstance(part, dict):
                continue
            where = f"messages.{i}.content.{j}"
            nested = enumerate(_parts(part.get("content")))  # a tool_result's blocks
            inner = [(f"{where}.content.{k}", block) for k, block in nested]
            for path, block in [(where, part), *inner]:
                kind = _part_type(block)
                if kind in ANTHROPIC_NON_TEXT_BLOCKS:
                    raise _refuse(
                        "messages",
                        f"{path}: {kind} content is not supported (this server reads text only)",
                    )


def refuse_responses_part(kind: object) -> None:
    """A Responses input content part that is not text (the parser calls this on the
    part types it does not take)."""
    if isinstance(kind, str) and kind in RESPONSES_NON_TEXT_PARTS:
        raise _refuse("input", f"{kind} content is not supported (this server reads text only)")
