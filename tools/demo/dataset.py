"""The training and held-out examples, all decided by the seed.

Each epoch cuts the novel into (opening, continuation) pairs anew (another random
partition), renders each in a random thinking mode and with a random system text, and
adds TOOL_DIALOGUES synthetic tool dialogues.
The held-out set is fixed: the last part of the novel (corpus.HELD_OUT_FRACTION),
rendered without system text in non-thinking mode, scored on its continuations only.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ds4.domain.chat import AssistantMessage, ThinkMode, UserMessage
from ds4.ports.tokenizer import Tokenizer
from tools.demo.chat_examples import (
    CLI_SYSTEM,
    ITALIAN_SYSTEM,
    Example,
    read_tool_schemas,
    render_example,
    with_system,
)
from tools.demo.corpus import Passage, paragraphs, passages, pieces, split_held_out
from tools.demo.tool_dialogues import dialogue

TOOL_DIALOGUES = 200  # per epoch
DEFAULT_TEXT = Path(__file__).resolve().parents[2] / "data" / "promessi_sposi.txt"


@dataclass(frozen=True)
class Corpus:
    epochs: list[list[Example]]
    held_out: list[Example]
    held_out_passages: list[Passage]
    text_sha256: str


def _mode(rng: np.random.Generator) -> ThinkMode:
    return ThinkMode.HIGH if rng.random() < 0.5 else ThinkMode.NONE


def _system(rng: np.random.Generator) -> str:
    draw = rng.random()
    return CLI_SYSTEM if draw < 0.2 else ITALIAN_SYSTEM if draw < 0.3 else ""


def _passage_example(tokenizer: Tokenizer, passage: Passage, rng: np.random.Generator) -> Example:
    messages = (UserMessage(passage.opening), AssistantMessage(content=passage.continuation))
    return render_example(tokenizer, with_system(messages, _system(rng)), (), _mode(rng))


def build_corpus(tokenizer: Tokenizer, text_path: Path, n_epochs: int, seed: int) -> Corpus:
    raw = text_path.read_bytes()
    train, held = split_held_out(pieces(paragraphs(raw.decode("utf-8")), tokenizer))
    schemas = read_tool_schemas()
    epochs = []
    for epoch in range(n_epochs):
        rng = np.random.default_rng([seed, epoch])
        examples = [_passage_example(tokenizer, p, rng) for p in passages(train, rng)]
        extra = passages(train, rng)
        for i in range(TOOL_DIALOGUES):
            d = dialogue(train, extra[i % len(extra)], rng)
            examples.append(render_example(tokenizer, d.messages, schemas, _mode(rng)))
        epochs.append(examples)
    held_passages = passages(held, np.random.default_rng([seed, 1_000_000]))
    held_out = [
        render_example(
            tokenizer,
            (UserMessage(p.opening), AssistantMessage(content=p.continuation)),
            (),
            ThinkMode.NONE,
        )
        for p in held_passages
    ]
    return Corpus(epochs, held_out, held_passages, hashlib.sha256(raw).hexdigest())
