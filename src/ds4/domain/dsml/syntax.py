"""The markers of a generated turn: think tags, DSML tag spellings, and the escaping
each DSML wrapper needs (docs/reference/chat-and-dsml.md §3.1–3.2). Every scanner of generated text
takes its strings from here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
DSML_MARKER = "｜DSML｜"
# The whitespace DSML skips between elements (and strips before a tool block).
WHITESPACE = " \t\n\r"


@dataclass(frozen=True)
class Spelling:
    """The six tags of one DSML spelling; a block uses one spelling throughout."""

    name: str
    block_open: str
    block_close: str
    invoke_open: str
    invoke_close: str
    param_open: str
    param_close: str

    @property
    def tags(self) -> tuple[str, ...]:
        return (
            self.block_open,
            self.block_close,
            self.invoke_open,
            self.invoke_close,
            self.param_open,
            self.param_close,
        )


def _spelling(name: str, prefix: str) -> Spelling:
    return Spelling(
        name=name,
        block_open=f"<{prefix}tool_calls>",
        block_close=f"</{prefix}tool_calls>",
        invoke_open=f"<{prefix}invoke",
        invoke_close=f"</{prefix}invoke>",
        param_open=f"<{prefix}parameter",
        param_close=f"</{prefix}parameter>",
    )


FULL = _spelling("full", DSML_MARKER)
SHORT = _spelling("short", "DSML｜")  # the model sometimes drops the first bar
PLAIN = _spelling("plain", "")
# Priority order of the final parser: the first spelling found wins
# (docs/reference/chat-and-dsml.md §3.4).
SPELLINGS: tuple[Spelling, ...] = (FULL, SHORT, PLAIN)


def is_partial(rest: str, *tags: str) -> bool:
    """`rest` is a proper prefix of one of `tags` (empty counts): the tag may still come."""
    return any(len(rest) < len(tag) and tag.startswith(rest) for tag in tags)


def partial_tag_at(text: str, tags: tuple[str, ...], start: int = 0) -> int:
    """Where a trailing proper prefix of one of `tags` begins in text[start:] (len(text)
    when none). Tags start with '<' and hold no other '<', so only the last '<' can."""
    longest = max(len(tag) for tag in tags)
    lt = text.rfind("<", max(start, len(text) - longest + 1))
    if lt >= 0 and is_partial(text[lt:], *tags):
        return lt
    return len(text)


_ATTR_ESCAPES = (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"))
_ENTITIES = {"&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": '"', "&apos;": "'"}


def escape_attribute(value: str) -> str:
    for raw, entity in _ATTR_ESCAPES:
        value = value.replace(raw, entity)
    return value


def decode_entities(value: str) -> str:
    """Decode the five XML entities in one left-to-right pass; other `&` stay."""
    out: list[str] = []
    i = 0
    while True:
        j = value.find("&", i)
        if j < 0:
            out.append(value[i:])
            return "".join(out)
        out.append(value[i:j])
        for entity, char in _ENTITIES.items():
            if value.startswith(entity, j):
                out.append(char)
                i = j + len(entity)
                break
        else:
            out.append("&")
            i = j + 1


def _ladder_patterns(param_close: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    tail = re.escape(param_close[1:])
    return re.compile(f"(<|&(?:amp;)*lt;){tail}"), re.compile(f"&((?:amp;)*)lt;{tail}")


_FULL_LADDER = _ladder_patterns(FULL.param_close)


def escape_param_text(value: str, param_close: str = FULL.param_close) -> str:
    """String-parameter body: protect only the closing parameter tag.

    `</｜DSML｜parameter>` becomes `&lt;/｜DSML｜parameter>` as the spec says. A value
    that already holds that escaped form (or `&amp;lt;…`) gets one more `amp;`, so
    unescape_param_text is an exact inverse (the spec's one-step escape is not).
    """
    pattern = _ladder(param_close)[0]
    tail_len = len(param_close) - 1

    def bump(match: re.Match[str]) -> str:
        head = match.group(0)[:-tail_len]
        return ("&lt;" if head == "<" else "&amp;" + head[1:]) + match.group(0)[-tail_len:]

    return pattern.sub(bump, value)


def unescape_param_text(value: str, param_close: str = FULL.param_close) -> str:
    """Drop one escape level before each closing parameter tag."""
    pattern = _ladder(param_close)[1]
    tail = param_close[1:]

    def lower(match: re.Match[str]) -> str:
        amps = match.group(1)
        return ("<" if not amps else "&" + amps[4:] + "lt;") + tail

    return pattern.sub(lower, value)


def _ladder(param_close: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    return _FULL_LADDER if param_close == FULL.param_close else _ladder_patterns(param_close)
