"""`ds4 cli` prompts: text or a token-id file to the ids the model sees
(docs/reference/cli-and-bench.md §1)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ds4.domain.chat import (
    BOS,
    MAX_PREFIX,
    PrefixTurn,
    ThinkMode,
    assistant_prefix,
    effective_think_mode,
    parse_prefix_file,
    render_closed_turns,
)
from ds4.domain.errors import Ds4Error
from ds4.ports.tokenizer import Tokenizer

DEFAULT_SYSTEM = "You are a helpful assistant"


def think_mode(args: argparse.Namespace) -> ThinkMode:
    requested = ThinkMode(args.think_mode) if args.think_mode else ThinkMode.HIGH
    return effective_think_mode(requested, args.ctx)


def transcript_head(system: str, mode: ThinkMode) -> str:
    """BOS, the Think-Max prefix when that mode is on, the system text."""
    return BOS + (MAX_PREFIX if mode is ThinkMode.MAX else "") + system


def prefix_turns(args: argparse.Namespace) -> tuple[PrefixTurn, ...]:
    """The --prefix-file turns (none without the flag)."""
    path = getattr(args, "prefix_file", None)
    if path is None:
        return ()
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise Ds4Error(f"cannot read prefix file {path}: {exc.strerror}") from None
    return parse_prefix_file(data, path)


def conversation_head(system: str, mode: ThinkMode, prefix: tuple[PrefixTurn, ...]) -> str:
    """The transcript before the live user turn: head, then the prefix turns."""
    return transcript_head(system, mode) + render_closed_turns(prefix, mode)


def user_turn(text: str, mode: ThinkMode) -> str:
    return "<｜User｜>" + text + assistant_prefix(mode)


def chat_prompt(
    text: str, system: str, mode: ThinkMode, prefix: tuple[PrefixTurn, ...] = ()
) -> str:
    """A prompt that starts with BOS is an already rendered transcript, used as is."""
    if text.startswith(BOS):
        if prefix:
            raise Ds4Error("--prefix-file needs a plain prompt, not a rendered transcript")
        return text
    return conversation_head(system, mode, prefix) + user_turn(text, mode)


def read_token_file(path: str, vocab_size: int) -> list[int]:
    """A JSON list of token ids; every id must exist in the vocabulary."""
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise Ds4Error(f"cannot read token file {path}: {exc.strerror}") from None
    try:
        ids = json.loads(raw)
    except ValueError:
        raise Ds4Error(f"{path}: not JSON (expected a list of token ids)") from None
    if not isinstance(ids, list) or not all(type(i) is int for i in ids):
        raise Ds4Error(f"{path}: expected a JSON list of integer token ids")
    for index, token in enumerate(ids):
        if not 0 <= token < vocab_size:
            raise Ds4Error(
                f"{path}: token id {token} at index {index} is out of range (vocab {vocab_size})"
            )
    if not ids:
        raise Ds4Error(f"{path}: the token list is empty")
    return ids


def prompt_tokens(args: argparse.Namespace, tokenizer: Tokenizer, text: str | None) -> list[int]:
    if args.prompt_tokens is not None:
        return read_token_file(args.prompt_tokens, tokenizer.vocab_size)
    assert text is not None
    return tokenizer.encode(chat_prompt(text, args.system, think_mode(args), prefix_turns(args)))


def prompt_thinks(args: argparse.Namespace, ids: list[int], tokenizer: Tokenizer) -> bool:
    """Whether generation starts inside reasoning: the prompt ends with <think>."""
    return bool(ids) and ids[-1] == tokenizer.special.think_open
