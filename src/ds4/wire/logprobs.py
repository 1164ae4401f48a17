"""Log-probabilities on the wire (docs/reference/server.md "Log-probabilities"): what
each API's request asks for, checked and bounded, and the shapes its replies carry.

The values are the raw logits' log-softmax at each position, before temperature and
every other sampler transform (domain/sampling.py token_logprob, the computation
`ds4 cli --dump-logprobs` writes). One entry per token chosen, reasoning and tool-call
tokens included, and the end-of-sequence token last when the model ended the turn.

- chat: `logprobs` (bool) and `top_logprobs` (0..20, only with `logprobs: true`);
  `choices[].logprobs.content[]` of {token, logprob, bytes, top_logprobs[]};
- Responses: `include: ["message.output_text.logprobs"]` and `top_logprobs` (0..20);
  the output_text part's `logprobs[]` in the same entry shape;
- completions: `logprobs` (0..5) and `echo` (the prompt as the model read it, with
  its tokens' log-probabilities, the first null); the legacy {tokens,
  token_logprobs, top_logprobs, text_offset} shape;
- Anthropic's Messages API has no log-probabilities (its parser reads no such member).
"""

from __future__ import annotations

import codecs
import math
from collections.abc import Sequence

from ds4.domain.errors import RequestError
from ds4.domain.sampling import TokenLogprob
from ds4.domain.serving.exchange import LogprobRequest

MAX_CHAT_TOP_LOGPROBS = 20  # chat and Responses, as OpenAI bounds them
MAX_COMPLETION_LOGPROBS = 5  # the legacy endpoint's bound
RESPONSES_LOGPROBS_INCLUDE = "message.output_text.logprobs"
FLOOR = -9999.0  # what OpenAI reports for a token of probability 0 (JSON has no -inf)


# ---- what a request asks for -----------------------------------------------


def _count(value: object, field: str, most: int) -> int:
    """An integer member in 0..most; a 400 naming `field` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= most:
        raise RequestError(f"{field} must be an integer from 0 to {most}", param=field)
    return value


def chat_logprobs(logprobs: object, top_logprobs: object) -> LogprobRequest | None:
    """Chat completions' `logprobs` / `top_logprobs` (null or absent: not asked)."""
    if logprobs is not None and not isinstance(logprobs, bool):
        raise RequestError("logprobs must be a boolean", param="logprobs")
    top = 0 if top_logprobs is None else _count(top_logprobs, "top_logprobs", MAX_CHAT_TOP_LOGPROBS)
    if not logprobs:
        if top:
            raise RequestError("top_logprobs needs logprobs: true", param="top_logprobs")
        return None
    return LogprobRequest(top=top)


def completion_logprobs(logprobs: object, echo: object) -> LogprobRequest | None:
    """Completions' `logprobs` (alternatives per token, 0..5) and `echo`."""
    if echo is not None and not isinstance(echo, bool):
        raise RequestError("echo must be a boolean", param="echo")
    if logprobs is None:
        return LogprobRequest(prompt=True, completion=False) if echo else None
    top = _count(logprobs, "logprobs", MAX_COMPLETION_LOGPROBS)
    return LogprobRequest(top=top, prompt=bool(echo))


def responses_logprobs(include: object, top_logprobs: object) -> LogprobRequest | None:
    """Responses' `include` list and `top_logprobs`; the other include values are
    items this server does not keep, and stay ignored as before."""
    if include is not None and (
        not isinstance(include, list) or not all(isinstance(v, str) for v in include)
    ):
        raise RequestError("include must be an array of strings", param="include")
    top = 0 if top_logprobs is None else _count(top_logprobs, "top_logprobs", MAX_CHAT_TOP_LOGPROBS)
    if include is not None and RESPONSES_LOGPROBS_INCLUDE in include:
        return LogprobRequest(top=top)
    return LogprobRequest(top=top) if top else None


# ---- the reply shapes -------------------------------------------------------


def token_text(raw: bytes) -> str:
    """A token's text; bytes that are not whole UTF-8 characters are written
    `bytes:\\xNN...`, as OpenAI writes them."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return "bytes:" + "".join(f"\\x{b:02x}" for b in raw)


def wire_logprob(value: float | None) -> float | None:
    if value is None:
        return None
    return value if math.isfinite(value) else FLOOR


def _alternative(entry: TokenLogprob) -> dict[str, object]:
    return {
        "token": token_text(entry.raw),
        "logprob": wire_logprob(entry.logprob),
        "bytes": list(entry.raw),
    }


def openai_entry(entry: TokenLogprob) -> dict[str, object]:
    """Chat's and Responses' entry: {token, logprob, bytes, top_logprobs}."""
    return {**_alternative(entry), "top_logprobs": [_alternative(t) for t in entry.top]}


def chat_logprobs_object(entries: Sequence[TokenLogprob]) -> dict[str, object]:
    return {"content": [openai_entry(e) for e in entries], "refusal": None}


def legacy_logprobs(
    entries: Sequence[TokenLogprob], start: int = 0
) -> tuple[dict[str, object], int]:
    """Completions' shape, and the offset after the last entry; text_offset counts
    characters of the choice's text from `start` (the characters before the first
    entry)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    offsets: list[int] = []
    at = start
    for entry in entries:
        offsets.append(at)
        at += len(decoder.decode(entry.raw))
    shape = {
        "tokens": [token_text(e.raw) for e in entries],
        "token_logprobs": [wire_logprob(e.logprob) for e in entries],
        "top_logprobs": [None if e.logprob is None else _legacy_top(e) for e in entries],
        "text_offset": offsets,
    }
    return shape, at


def _legacy_top(entry: TokenLogprob) -> dict[str, float | None]:
    return {token_text(t.raw): wire_logprob(t.logprob) for t in entry.top}


def echoed_text(prompt: Sequence[TokenLogprob]) -> str:
    """The prompt as the model read it, from its tokens' bytes."""
    return b"".join(e.raw for e in prompt).decode("utf-8", errors="replace")
