"""POST /v1/messages/count_tokens (Anthropic token counting).

The spec is silent on this route; Claude Code calls it (its /context view and
auto-compaction estimates), so it answers what the real API does: the prompt
length `{"input_tokens":N}` for the same body a /v1/messages request would carry
(max_tokens not needed). N is the length of the prompt the server would render and
tokenize for that request, tool replay aside (exact DSML replay can change the bytes
of earlier tool calls, rarely their count by more than a few tokens).
"""

from __future__ import annotations

from ds4.domain.chat import effective_think_mode, render_chat
from ds4.domain.serving.prompt_bound import refuse_certain_overflow
from ds4.ports.tokenizer import Tokenizer
from ds4.wire.anthropic_request import read_messages
from ds4.wire.sse import json_body


def count_tokens_body(
    body: bytes, tokenizer: Tokenizer, ctx: int, longest_token: int | None = None
) -> bytes:
    """The reply body; RequestError (Anthropic shape at the route) for a bad request. With
    `longest_token`, a prompt too long for any use of it (more tokens than the context
    for certain) is a context_length_exceeded error, not counted (ADR 0044)."""
    request = read_messages(body)
    mode = effective_think_mode(request.think_mode, ctx)
    text = render_chat(request.messages, request.schemas, mode)
    if longest_token is not None:
        refuse_certain_overflow(text, ctx, longest_token)
    return json_body({"input_tokens": len(tokenizer.encode(text))})
