"""A parsed request to the prompt the worker will run (server.md §3.1, §2.6).

Runs on the request side, concurrently with the worker: exact DSML replay from tool
memory (§5.3), rendering, tokenizing, and the context-length pre-check, so a prompt
that cannot fit is refused before it waits in the queue.
"""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.api.errors import context_length_error
from ds4.domain.api.generation_request import Api, GenerationRequest
from ds4.domain.chat.messages import ThinkMode, effective_think_mode
from ds4.domain.chat.renderer import render_chat
from ds4.domain.tools.replay_memory import ReplayStats, ToolReplayMemory
from ds4.ports.tokenizer import Tokenizer

PROMPT_PARAM = {
    Api.CHAT: "messages",
    Api.COMPLETIONS: "prompt",
    Api.ANTHROPIC: "messages",
    Api.RESPONSES: "input",
}


@dataclass(frozen=True)
class PreparedJob:
    request: GenerationRequest
    think_mode: ThinkMode  # effective (Think Max needs a 384 Ki context)
    prompt_text: str
    prompt_tokens: tuple[int, ...]
    replay: ReplayStats


def prepare_job(
    request: GenerationRequest, tokenizer: Tokenizer, memory: ToolReplayMemory, ctx: int
) -> PreparedJob:
    """Render and tokenize; ApiError 400 (context_length_exceeded) when len >= ctx.

    The caller serializes access to `memory` (attach reorders its LRU)."""
    mode = effective_think_mode(request.think_mode, ctx)
    messages, stats = memory.attach(request.messages)
    text = render_chat(messages, request.schemas, mode)
    tokens = tuple(tokenizer.encode(text))
    if len(tokens) >= ctx:
        raise context_length_error(len(tokens), ctx, PROMPT_PARAM[request.api])
    return PreparedJob(request, mode, text, tokens, stats)
