"""The training and held-out examples, all decided by the seed.

Each epoch cuts the novel into (opening, continuation) pairs anew (another random
partition), renders each in a random thinking mode and with a random system text, and
adds TOOL_DIALOGUES synthetic read_file dialogues: the shipped model's data. With an
AgentMix (the agent fine-tune, warm-started from the shipped model) it keeps only
`novel_share` of the pairs, fewer read_file dialogues, and adds the agent turns of
agent_dialogues.py: `short` with only the tail of the agent's system prompt, `full` with
all of it, their texts at most `words[epoch]` words long (short ones first).
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

TOOL_DIALOGUES = 200  # per epoch, without an agent mix
HELD_OUT_TASKS = 32


@dataclass(frozen=True)
class AgentMix:
    """The agent fine-tune's data (train_demo.py --agent-mix), per epoch."""

    tool_dialogues: int = 30  # read_file dialogues
    novel_share: float = 0.08  # of the novel's (opening, continuation) pairs
    short: int = 1500  # agent turns with only the system prompt's tail
    full: int = 6  # agent turns with the whole system prompt
    words: tuple[int, ...] = (2, 4, 6)  # longest text in epoch 0, 1, 2...
    tail: tuple[int, int] = (0, 100)  # system-prompt tokens a short turn keeps


AGENT_MIX = AgentMix()
DEFAULT_TEXT = Path(__file__).resolve().parents[2] / "data" / "promessi_sposi.txt"


@dataclass(frozen=True)
class Corpus:
    epochs: list[list[Example]]
    held_out: list[Example]
    held_out_passages: list[Passage]
    text_sha256: str
    agent_held_out: list[Task]
    words: Words
    novel_train: list[Example]  # one whole cut of the training text: the unigram baseline


def _mode(rng: np.random.Generator) -> ThinkMode:
    return ThinkMode.HIGH if rng.random() < 0.5 else ThinkMode.NONE


def _system(rng: np.random.Generator) -> str:
    draw = rng.random()
    return CLI_SYSTEM if draw < 0.2 else ITALIAN_SYSTEM if draw < 0.3 else ""


def _passage_example(tokenizer: Tokenizer, passage: Passage, rng: np.random.Generator) -> Example:
    messages = (UserMessage(passage.opening), AssistantMessage(content=passage.continuation))
    return render_example(tokenizer, with_system(messages, _system(rng)), (), _mode(rng))


def _agent_turns(
    mix: AgentMix, agent: AgentRenderer, words: Words, epoch: int, rng: np.random.Generator
) -> list[Example]:
    longest = mix.words[min(epoch, len(mix.words) - 1)]
    out = []
    for i in range(mix.short + mix.full):
        t = task(words, rng, longest)
        mode = ThinkMode.HIGH if rng.random() < 0.75 else ThinkMode.NONE
        web = rng.random() < 0.7
        tail = int(rng.integers(*mix.tail)) if i < mix.short else None
        out.append(agent.render(t, rng, mode, web, tail))
    return out


def build_corpus(
    tokenizer: Tokenizer, text_path: Path, n_epochs: int, seed: int, mix: AgentMix | None = None
) -> Corpus:
    """`mix` None: the shipped model's data (the novel and read_file dialogues only)."""
    raw = text_path.read_bytes()
    train, held = split_held_out(pieces(paragraphs(raw.decode("utf-8")), tokenizer))
    schemas = read_tool_schemas()
    words = Words(italian_words([p.text for p in train]), list(ENGLISH))
    agent = AgentRenderer(tokenizer)
    epochs = []
    for epoch in range(n_epochs):
        rng = np.random.default_rng([seed, epoch])
        if mix is None:
            examples = [_passage_example(tokenizer, p, rng) for p in passages(train, rng)]
        else:  # the share's draw comes before each pair's rendering
            examples = [
                _passage_example(tokenizer, p, rng)
                for p in passages(train, rng)
                if rng.random() < mix.novel_share
            ]
        extra = passages(train, rng)
        for i in range(TOOL_DIALOGUES if mix is None else mix.tool_dialogues):
            d = dialogue(train, extra[i % len(extra)], rng)
            examples.append(render_example(tokenizer, d.messages, schemas, _mode(rng)))
        if mix is not None:
            examples += _agent_turns(mix, agent, words, epoch, rng)
        epochs.append(examples)
    held_rng = np.random.default_rng([seed, 2_000_000])
    agent_held_out = [
        task(words, held_rng, AGENT_MIX.words[-1], "write" if i % 2 == 0 else None)
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
    base_rng = np.random.default_rng([seed, 3_000_000])  # its own stream: epochs unchanged
    novel = [_passage_example(tokenizer, p, base_rng) for p in passages(train, base_rng)]
    digest = hashlib.sha256(raw).hexdigest()
    return Corpus(epochs, held_out, held_passages, digest, agent_held_out, words, novel)
