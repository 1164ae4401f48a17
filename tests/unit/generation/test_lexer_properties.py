"""Property tests: the lexer's stream does not depend on how the text was split, and it
agrees with finish_turn, the authoritative parse of the whole text.

Agreement is exact when the parse needed no recovery and found the block the lexer
streamed. Otherwise what was streamed is a prefix of what the final parse says (the
front ends send the rest from Finished): text before a malformed block, the calls
of a truncated one, and reasoning of which finish_turn recovered a trailing call.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.unit.dsml.strategies import as_tool_calls, nasty_text, tool_calls

from ds4.domain.dsml.parser import Recovery, TurnResult, find_block_start, finish_turn
from ds4.domain.dsml.stream import ThinkCall
from ds4.domain.dsml.syntax import SPELLINGS, THINK_CLOSE, Spelling, ToolCall, render_tool_calls
from ds4.domain.generation.events import (
    ReasoningDelta,
    TextDelta,
    ToolCallArguments,
    ToolCallFinished,
    ToolCallStarted,
)
from ds4.domain.generation.lexer import LexEvent, TurnLexer

D = "｜DSML｜"
STOPS = ("STOP", "ab", "\n\nX", "</")
NEAR = (
    "<",
    "</",
    "</thi",
    "<think>",
    THINK_CLOSE,
    "<｜DSML｜",
    "<｜DSML｜tool_call",
    f"<{D}tool_calls>",
    f"</{D}tool_calls>",
    f"</{D}parameter",
    f"</{D}parameter>",
    f"&lt;/{D}parameter>",
    f"</{D}invoke>",
    "<tool_calls>",
    "</parameter>",
    "<DSML｜tool_calls>",
    "STO",
    "STOP",
    "a",
    "b",
    '"',
    "\\",
    "&amp;",
    "\n",
    "\n\n",
    " ",
    "\t",
    "é",
    "🙂",
)
noise = st.lists(st.one_of(st.sampled_from(NEAR), st.text(max_size=3)), max_size=5).map("".join)
space = st.sampled_from(["", "\n", " ", "\n\n", "\t\n"])
name = st.sampled_from(["f", "get_weather", "a&amp;b", "x y", "f", ""])


@st.composite
def parameter(draw: st.DrawFn, s: Spelling, *, leaf: bool = False) -> str:
    key = draw(name)
    kind = draw(
        st.sampled_from(["string", "json", "bare"] if leaf else ["string", "json", "bare", "loose"])
    )
    if kind == "string":
        return f'{s.param_open} name="{key}" string="true">{draw(noise)}{s.param_close}'
    if kind == "json":
        body = draw(st.sampled_from(['[1, "x"]', ' {"a": "<b>"} ', "", "nope", '"\\"q"', "3"]))
        return f'{s.param_open} name="{key}" string="false">{body}{s.param_close}'
    if kind == "bare":
        return f'{s.param_open} name="{key}">{draw(noise)}{s.param_close}'
    leaves = draw(st.lists(parameter(s, leaf=True), min_size=1, max_size=2))
    close = draw(st.sampled_from([s.param_close, ""]))
    return f'{s.param_open} name="{key}">{draw(space)}' + draw(space).join(leaves) + close


@st.composite
def block(draw: st.DrawFn) -> str:
    s = draw(st.sampled_from(SPELLINGS))
    invokes = []
    for _ in range(draw(st.sampled_from([1, 1, 2, 0]))):
        params = draw(st.lists(parameter(s), max_size=2))
        body = draw(space) + draw(space).join(params) + draw(space)
        close = draw(st.sampled_from([s.invoke_close, s.invoke_close, ""]))
        invokes.append(f'{s.invoke_open} name="{draw(name)}">{body}{close}{draw(space)}')
    lead = draw(st.sampled_from(["\n\n", "", " \n"]))
    return lead + s.block_open + draw(space) + "".join(invokes) + s.block_close


@st.composite
def output(draw: st.DrawFn) -> str:
    """Reasoning, maybe </think>, text, maybe a block, trailing noise; sometimes cut."""
    parts = [draw(noise)]
    if draw(st.integers(0, 3)) == 0:
        parts += [draw(st.sampled_from(["", "\n", "plan\n"])), draw(block())]
    parts += [draw(st.sampled_from([THINK_CLOSE, THINK_CLOSE, ""])), draw(noise)]
    if draw(st.integers(0, 3)) > 0:
        parts.append(draw(block()))
    parts.append(draw(noise))
    text = "".join(parts)
    if draw(st.integers(0, 3)) == 0:
        text = text[: draw(st.integers(0, len(text)))]
    return text


@dataclass
class Streamed:
    """What a front end saw, and what the decode loop acted on."""

    events: list[LexEvent] = field(default_factory=list)
    text: str = ""  # the text the loop fed before it stopped
    lexer: TurnLexer | None = None

    def coalesced(self) -> list[object]:
        """Adjacent deltas of one kind merged: the part that must not depend on splits."""
        out: list[object] = []
        for event in self.events:
            if (
                isinstance(event, ReasoningDelta | TextDelta)
                and out
                and type(out[-1]) is type(event)
            ):
                out[-1] = type(event)(out[-1].text + event.text)
            else:
                out.append(event)
        return out

    def of(self, kind: type[ReasoningDelta] | type[TextDelta]) -> str:
        return "".join(e.text for e in self.events if isinstance(e, kind))


def stream(pieces: Iterable[str], *, thinking: bool, tools: bool, stops: Sequence[str]) -> Streamed:
    """Feed pieces as the decode loop does: stop after a stop string or a closed block."""
    lexer = TurnLexer(thinking=thinking, tools_active=tools, stops=stops)
    out = Streamed(lexer=lexer)
    fed = []
    for piece in pieces:
        fed.append(piece)
        out.events += lexer.feed(piece)
        if lexer.stop is not None or lexer.block_closed:
            break
    out.events += lexer.finish()
    out.text = "".join(fed)
    if lexer.stop is not None:
        out.text = out.text[: lexer.stop.at]
    return out


def splits(text: str, cuts: Sequence[int]) -> Iterable[list[str]]:
    yield [text]
    yield list(text)
    for i in range(1, len(text)):
        yield [text[:i], text[i:]]
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    yield [text[a:b] for a, b in itertools.pairwise(bounds)]


def parsed_block_at(text: str, thinking: bool) -> int | None:
    """Where the tag of the block finish_turn parses starts (as the lexer reports it)."""
    start = 0
    if thinking:
        close = text.find(THINK_CLOSE)
        if close < 0:
            return None
        start = close + len(THINK_CLOSE)
    found = find_block_start(text, start)
    return None if found is None else found.tag_end - len(found.spelling.block_open)


def check_agreement(seen: Streamed, turn: TurnResult, *, thinking: bool) -> None:
    lexer = seen.lexer
    assert lexer is not None
    reasoning, text = seen.of(ReasoningDelta), seen.of(TextDelta)
    started = [e for e in seen.events if isinstance(e, ToolCallStarted)]
    finished = [e.call for e in seen.events if isinstance(e, ToolCallFinished)]
    fragments: dict[int, str] = {}
    for event in seen.events:
        if isinstance(event, ToolCallArguments):
            fragments[event.index] = fragments.get(event.index, "") + event.fragment
    # Per call: Started, then its fragments, then Finished; indices count up from 0.
    assert [e.index for e in started] == list(range(len(started)))
    assert len(finished) <= len(started)
    for index, call in enumerate(finished):
        assert fragments[index] == call.arguments and started[index].name == call.name

    same_block = lexer.block_at == parsed_block_at(seen.text, thinking)
    exact = turn.recovery is Recovery.NONE and (not turn.calls or same_block)
    if exact:
        assert reasoning == (turn.reasoning or "")
        assert text == turn.content
        assert tuple(finished) == turn.calls
        assert [e.name for e in started] == [c.name for c in turn.calls]
        return
    assert turn.content.startswith(text)
    if turn.recovery is Recovery.REPAIRED and lexer.in_reasoning:
        assert reasoning.startswith(turn.reasoning or "")  # a call recovered from its end
    else:
        assert reasoning == (turn.reasoning or "")
    if same_block and turn.calls:  # repaired; a block returned as text has no calls
        calls: tuple[ToolCall, ...] = turn.calls
        assert tuple(finished) == calls[: len(finished)]
        for index, event in enumerate(started):
            assert index < len(calls) and calls[index].name == event.name
            assert calls[index].arguments.startswith(fragments[index])


@st.composite
def output_and_stops(draw: st.DrawFn) -> tuple[str, list[str]]:
    """Stop strings: fixed ones, or pieces of the output itself (so they do match)."""
    text = draw(output())
    piece = st.integers(0, len(text)).flatmap(
        lambda at: st.integers(1, 4).map(lambda n: text[at : at + n])
    )
    stops = draw(st.lists(st.one_of(st.sampled_from(STOPS), piece), max_size=2))
    if draw(st.booleans()):
        stops = []
    return text, stops


@settings(max_examples=250, deadline=None)
@given(
    case=output_and_stops(),
    thinking=st.booleans(),
    tools=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6),
)
def test_streamed_events_do_not_depend_on_splits_and_agree_with_finish_turn(
    case: tuple[str, list[str]], thinking: bool, tools: bool, cuts: list[int]
) -> None:
    text, stops = case
    whole: tuple[object, ...] | None = None
    for pieces in splits(text, cuts):
        seen = stream(pieces, thinking=thinking, tools=tools, stops=stops)
        lexer = seen.lexer
        assert lexer is not None
        summary = (
            seen.coalesced(),
            lexer.stop,
            lexer.block_at,
            lexer.block_closed,
            lexer.think_call is ThinkCall.COMPLETE,
        )
        if whole is None:
            whole = summary
        assert summary == whole
        turn = finish_turn(seen.text, tools_active=tools, thinking=thinking, finish="stop")
        check_agreement(seen, turn, thinking=thinking)


@settings(max_examples=150, deadline=None)
@given(
    text=output(),
    thinking=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=6),
)
def test_sampling_state_does_not_depend_on_splits(
    text: str, thinking: bool, cuts: list[int]
) -> None:
    """The state after the whole text is the same however it arrived (what steers the
    next token: greedy, block closed, forced </think>)."""

    def state(pieces: Iterable[str]) -> tuple[object, ...]:
        lexer = TurnLexer(thinking=thinking, tools_active=True)
        for piece in pieces:
            lexer.feed(piece)
        return (
            lexer.structure,
            lexer.block_at,
            lexer.block_closed,
            lexer.in_reasoning,
            lexer.think_call,
        )

    states = {state(pieces) for pieces in splits(text, cuts)}
    assert len(states) == 1


@settings(max_examples=40, deadline=None)
@given(
    calls=tool_calls,
    prose=nasty_text,
    reasoning=nasty_text,
    cuts=st.lists(st.integers(min_value=0, max_value=20_000), max_size=12),
)
def test_rendered_calls_stream_exactly_as_they_parse(
    calls: list[tuple[str, dict[str, object]]], prose: str, reasoning: str, cuts: list[int]
) -> None:
    """Values that fight the syntax (escaped close tags, entities, quotes, long runs)."""
    for spelling in SPELLINGS:  # visible prose never opens a block of its own
        prose = prose.replace(spelling.block_open, "")
    text = reasoning.replace(THINK_CLOSE, "") + THINK_CLOSE + prose
    text += render_tool_calls(as_tool_calls(calls))
    bounds = sorted({0, len(text), *(c % (len(text) + 1) for c in cuts)})
    for pieces in ([text], list(text), [text[a:b] for a, b in itertools.pairwise(bounds)]):
        seen = stream(pieces, thinking=True, tools=True, stops=())
        turn = finish_turn(seen.text, tools_active=True, thinking=True, finish="stop")
        assert turn.recovery is Recovery.NONE and len(turn.calls) == len(calls)
        check_agreement(seen, turn, thinking=True)
        assert (
            seen.of(TextDelta) == turn.content
            and tuple(e.call for e in seen.events if isinstance(e, ToolCallFinished)) == turn.calls
        )


@settings(max_examples=60, deadline=None)
@given(calls=tool_calls)
def test_streamed_block_closes_exactly_where_the_parser_ends_it(
    calls: list[tuple[str, dict[str, object]]],
) -> None:
    text = render_tool_calls(as_tool_calls(calls))
    lexer = TurnLexer(tools_active=True, thinking=False)
    lexer.feed(text[:-1])
    assert (lexer.block_at is not None, lexer.block_closed) == (True, False)
    lexer.feed(text[-1:])
    assert lexer.block_closed
    parsed = finish_turn(text, tools_active=True, thinking=False, finish="stop")
    assert len(parsed.calls) == len(calls)
