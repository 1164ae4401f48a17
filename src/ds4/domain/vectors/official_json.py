"""`official/<id>.official.json`: one case's recorded request, usage and steps
(docs/test-vectors.md "Files"). The steps' token bytes are authoritative; the text
fields are for reading."""

from __future__ import annotations

import json
from dataclasses import dataclass

from ds4.domain.vectors.fields import Fields, load_json
from ds4.domain.vectors.manifest import ManifestEntry
from ds4.domain.vectors.records import (
    MAX_STEPS,
    MAX_TOKEN_BYTES,
    Alternative,
    VectorStep,
    VectorToken,
)

OFFICIAL_SCHEMA = "ds4-official-logprobs-v1"
MAX_PROMPT_TOKENS = 1 << 20


@dataclass(frozen=True)
class OfficialRecord:
    steps: tuple[VectorStep, ...]
    prompt_tokens: int | None  # usage.prompt_tokens, when the record has it


def parse_official(
    raw: bytes, where: str, entry: ManifestEntry, prompt: str, top_logprobs: int
) -> OfficialRecord:
    """The record of `entry`, checked against its manifest entry and prompt file."""
    top = Fields(load_json(raw, where), where)
    schema = top.text("schema")
    if schema != OFFICIAL_SCHEMA:
        raise top.fail("schema", f"{schema!r} is not {OFFICIAL_SCHEMA!r}")
    if (record_id := top.text("id")) != entry.id:
        raise top.fail("id", f"{record_id!r}, but the manifest lists this file for {entry.id!r}")
    if (kind := top.text("kind")) != entry.kind:
        raise top.fail("kind", f"{kind!r}, but the manifest says {entry.kind!r}")
    recorded = top.text("prompt")
    if recorded != prompt:
        at = next(
            (i for i, (a, b) in enumerate(zip(recorded, prompt, strict=False)) if a != b),
            min(len(recorded), len(prompt)),
        )
        raise top.fail("prompt", f"differs from {entry.prompt_file} at character {at}")
    _check_request(top.obj("request"))
    steps = tuple(
        _step(item, index, top_logprobs)
        for index, item in enumerate(top.objects("steps", max_items=MAX_STEPS))
    )
    if len(steps) != entry.steps:
        raise top.fail("steps", f"has {len(steps)} steps, the manifest says {entry.steps}")
    _check_content(top.obj("message"), steps)
    return OfficialRecord(steps, _prompt_tokens(top))


def _check_request(request: Fields) -> None:
    """The comparison rule holds for greedy requests with thinking disabled only."""
    if request.number("temperature") != 0:
        raise request.fail("temperature", "is not 0: only greedy vectors can be compared")
    thinking = request.obj("thinking").text("type")
    if thinking != "disabled":
        raise request.fail(
            "thinking", f"type {thinking!r}: the vectors are rendered with thinking disabled"
        )


def _step(item: Fields, index: int, top_logprobs: int) -> VectorStep:
    if (number := item.integer("step", 0, 1 << 20)) != index:
        raise item.fail("step", f"{number}, expected {index}")
    token = _token(item.obj("token"))
    if not token.raw:
        raise item.fail("token", "has no bytes")
    alternatives = tuple(
        Alternative(_token(alt.obj("token")), _logprob(alt))
        for alt in item.objects("top_logprobs", max_items=top_logprobs)
    )
    return VectorStep(index, token, _logprob(item), alternatives)


def _token(token: Fields) -> VectorToken:
    return VectorToken(
        token.byte_values("bytes", max_bytes=MAX_TOKEN_BYTES), token.text("text", non_empty=False)
    )


def _logprob(item: Fields) -> float:
    value = item.number("logprob")
    if value > 0:
        raise item.fail("logprob", f"{value} is positive (a log-probability is <= 0)")
    return value


def _check_content(message: Fields, steps: tuple[VectorStep, ...]) -> None:
    """The reply text must be the steps' bytes (checked when they are whole UTF-8)."""
    content = message.text("content", non_empty=False)
    try:
        joined = b"".join(s.token.raw for s in steps).decode("utf-8")
    except UnicodeDecodeError:
        return
    if joined != content:
        raise message.fail("content", f"{content[:40]!r} is not the steps' tokens {joined[:40]!r}")


def _prompt_tokens(top: Fields) -> int | None:
    if not top.has("usage"):
        return None
    usage = top.obj("usage")
    return (
        usage.integer("prompt_tokens", 1, MAX_PROMPT_TOKENS) if usage.has("prompt_tokens") else None
    )


@dataclass(frozen=True)
class RecordHeader:
    """What a locally written record says about where it came from."""

    source: str
    model: str
    endpoint: str
    created_at: str  # ISO-8601, Z


def render_official(
    header: RecordHeader,
    entry: ManifestEntry,
    prompt: str,
    prompt_tokens: int,
    top_logprobs: int,
    steps: tuple[VectorStep, ...],
) -> bytes:
    """A record in the official layout, for vectors made from a local model."""

    def token(t: VectorToken) -> dict[str, object]:
        return {"text": t.text, "bytes": list(t.raw)}

    content = b"".join(s.token.raw for s in steps).decode("utf-8", errors="replace")
    body = {
        "schema": OFFICIAL_SCHEMA,
        "source": header.source,
        "model": header.model,
        "endpoint": header.endpoint,
        "created_at": header.created_at,
        "id": entry.id,
        "kind": entry.kind,
        "prompt": prompt,
        "request": {
            "model": header.model,
            "temperature": 0,
            "max_tokens": len(steps),
            "logprobs": True,
            "top_logprobs": top_logprobs,
            "thinking": {"type": "disabled"},
            "messages": [{"role": "user", "content": prompt}],
        },
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(steps),
            "total_tokens": prompt_tokens + len(steps),
        },
        "finish_reason": "length",
        "message": {"role": "assistant", "content": content},
        "logits_available": False,
        "steps": [
            {
                "step": s.index,
                "token": token(s.token),
                "logprob": s.logprob,
                "top_logprobs": [
                    {"token": token(a.token), "logprob": a.logprob} for a in s.alternatives
                ],
            }
            for s in steps
        ],
    }
    return (json.dumps(body, indent=2, ensure_ascii=False) + "\n").encode()
