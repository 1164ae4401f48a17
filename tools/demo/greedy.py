"""Greedy continuations on our engine, for the pinned goldens."""

from __future__ import annotations

import numpy as np

from ds4.domain.chat import ThinkMode, UserMessage, render_chat
from ds4.ports.compute import ModelRunner
from ds4.ports.tokenizer import Tokenizer


def chat_ids(tokenizer: Tokenizer, opening: str) -> list[int]:
    """The prompt the server renders for one user message, non-thinking mode."""
    return tokenizer.encode(render_chat((UserMessage(opening),), (), ThinkMode.NONE))


def greedy(runner: ModelRunner, prompt: list[int], steps: int, stop: int) -> list[int]:
    """Arg-max continuation (ties to the lower id), at most `steps` tokens, ends at `stop`."""
    session = runner.new_session(len(prompt) + steps)
    logits = session.prefill(prompt)
    out: list[int] = []
    while len(out) < steps:
        out.append(int(np.argmax(logits)))
        if out[-1] == stop:
            break
        logits = session.eval(out[-1])
    return out
