"""The training and held-out examples, all decided by the seed.

Each epoch cuts the novel into (opening, continuation) pairs anew (another random
partition) and keeps NOVEL_SHARE of them (the model is warm-started from the shipped
one, which already writes the novel), renders each in a random thinking mode and with a
random system text, and adds TOOL_DIALOGUES read_file dialogues and the agent turns of
agent_dialogues.py: AGENT_SHORT with only the tail of the agent's system prompt, AGENT_FULL
with all of it, their texts at most AGENT_WORDS[epoch] words long (short ones first).
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
from tools.demo.agent_dialogues import (
    ENGLISH,
    AgentRenderer,
    Task,
    Words,
    italian_words,
    task,
)
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

TOOL_DIALOGUES = 30  # per epoch
NOVEL_SHARE = 0.08
AGENT_SHORT = 1500  # per epoch
AGENT_FULL = 6
AGENT_WORDS = (2, 4, 6)  # longest text per epoch
SHORT_TAIL = (0, 100)  # system-prompt tokens a short agent example keeps
HELD_OUT_TASKS = 32
DEFAULT_TEXT = Path(__file__).resolve().parents[2] / "data" / "promessi_sposi.txt"


@dataclass(frozen=True)
class Corpus:
    epochs: list[list[Example]]
    held_out: list[Example]
    held_out_passages: list[Passage]
    text_sha256: str
    agent_held_out: list[Task]
    words: Words


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
    words = Words(italian_words([p.text for p in train]), list(ENGLISH))
    agent = AgentRenderer(tokenizer)
    epochs = []
    for epoch in range(n_epochs):
        rng = np.random.default_rng([seed, epoch])
        examples = [
            _passage_example(tokenizer, p, rng)
            for p in passages(train, rng)
            if rng.random() < NOVEL_SHARE
        ]
        extra = passages(train, rng)
        for i in range(TOOL_DIALOGUES):
            d = dialogue(train, extra[i % len(extra)], rng)
            examples.append(render_example(tokenizer, d.messages, schemas, _mode(rng)))
        longest = AGENT_WORDS[min(epoch, len(AGENT_WORDS) - 1)]
        for i in range(AGENT_SHORT + AGENT_FULL):
            t = task(words, rng, longest)
            mode = ThinkMode.HIGH if rng.random() < 0.75 else ThinkMode.NONE
            web = rng.random() < 0.7
            tail = int(rng.integers(*SHORT_TAIL)) if i < AGENT_SHORT else None
            examples.append(agent.render(t, rng, mode, web, tail))
        epochs.append(examples)
    held_rng = np.random.default_rng([seed, 2_000_000])
    agent_held_out = [
        task(words, held_rng, AGENT_WORDS[-1], "write" if i % 2 == 0 else None)
        for i in range(HELD_OUT_TASKS)
    ]
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
    digest = hashlib.sha256(raw).hexdigest()
    return Corpus(epochs, held_out, held_passages, digest, agent_held_out, words)
