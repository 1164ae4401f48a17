"""Chat examples -> token ids and per-token loss weights, with the package's own renderer
and tokenizer, so training sees byte for byte what the server and `ds4 cli` render
(docs/reference/chat-and-dsml.md §2-3).

Assistant turns get weight 1 (in thinking mode that starts at `</think>`: the model must
close an empty reasoning block itself, because the server's default request renders
`<think>` and leaves the rest to the model). Text inside user turns (openings, requests,
tool results) gets USER_WEIGHT: it is the same novel, and predicting it is cheap extra
signal. System text and the fixed template tokens get 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.domain.chat import (
    AssistantMessage,
    Message,
    SystemMessage,
    ThinkMode,
    ToolResultMessage,
    ToolSchema,
    render_chat,
    tool_schema,
)
from ds4.ports.tokenizer import Tokenizer
from tools.demo.tool_dialogues import READ_FILE_TOOL

USER_WEIGHT = 0.5
CLI_SYSTEM = "You are a helpful assistant"  # `ds4 cli`'s default -sys (apps/cli_generate.py)
ITALIAN_SYSTEM = "Continua il testo dell'utente con lo stile dei Promessi sposi."


@dataclass(frozen=True)
class Example:
    ids: npt.NDArray[np.int32]
    weights: npt.NDArray[np.float32]  # weight of predicting ids[i] from ids[:i]
    answer: npt.NDArray[np.bool_]  # ids[i] is part of an assistant turn


def read_tool_schemas() -> tuple[ToolSchema, ...]:
    function = READ_FILE_TOOL["function"]
    return (tool_schema(function),)


def render_example(
    tokenizer: Tokenizer,
    messages: Sequence[Message],
    schemas: Sequence[ToolSchema],
    mode: ThinkMode,
) -> Example:
    """Ids of the whole conversation; every assistant turn is weighted 1."""
    full = tokenizer.encode(render_chat(messages, schemas, mode))
    weights = np.zeros(len(full), np.float32)
    answer = np.zeros(len(full), np.bool_)
    special = tokenizer.special
    for i, message in enumerate(messages):
        if not isinstance(message, AssistantMessage):
            continue
        before = tokenizer.encode(render_chat(messages[:i], schemas, mode))
        through = tokenizer.encode(render_chat(messages[: i + 1], schemas, mode))
        if full[: len(through)] != through or through[: len(before)] != before:
            raise AssertionError("rendered prefixes are not token prefixes of the dialogue")
        weights[len(before) : len(through)] = 1.0
        answer[len(before) : len(through)] = True
    inside_user = False
    for i, token in enumerate(full):
        if token == special.user:
            inside_user = True
        elif token in (special.assistant, special.eos):
            inside_user = False
        elif inside_user and not answer[i]:
            weights[i] = USER_WEIGHT
    weights[0] = 0.0  # BOS is never predicted
    return Example(np.asarray(full, np.int32), weights, answer)


def with_system(messages: Sequence[Message], system: str) -> tuple[Message, ...]:
    return (SystemMessage(system), *messages) if system else tuple(messages)


def has_tool_turns(messages: Sequence[Message]) -> bool:
    return any(isinstance(m, ToolResultMessage) for m in messages)
