"""Property tests: DSML render -> parse round trip, split-invariant streaming."""

from __future__ import annotations

import itertools
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from ds4.domain.dsml.calls import ToolCall
from ds4.domain.dsml.render import render_tool_calls
from ds4.domain.dsml.stream_decoder import DsmlStreamDecoder
from ds4.domain.dsml.syntax import SPELLINGS
from ds4.domain.dsml.turn import finish_turn

D = "｜DSML｜"
NASTY = [
    f"</{D}parameter>",
    f"&lt;/{D}parameter>",
    f"&amp;lt;/{D}parameter>",
    f"</{D}invoke>",
    f"</{D}tool_calls>",
    f"<{D}tool_calls>",
    "</parameter>",
    "</tool_result>",
    "<think>",
    "</think>",
    "<｜end▁of▁sentence｜>",
    "&amp;",
    "&",
    "<",
    '"',
    "\x00",
    "🙂",
    "\n\n",
    "2>&1",
]
nasty_text = st.lists(st.one_of(st.sampled_from(NASTY), st.text(max_size=8)), max_size=6).map(
    "".join
)
json_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    nasty_text,
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(nasty_text, inner, max_size=3)
    ),
    max_leaves=8,
)
arguments = st.dictionaries(
    nasty_text, st.one_of(json_value, nasty_text.filter(bool).map(lambda s: s * 300)), max_size=4
)
tool_name = nasty_text.filter(bool)


@settings(max_examples=80, deadline=None)
@given(calls=st.lists(st.tuples(tool_name, arguments), min_size=1, max_size=3), prose=nasty_text)
def test_render_then_parse_returns_the_same_calls(
    calls: list[tuple[str, dict[str, object]]], prose: str
) -> None:
    rendered = render_tool_calls(
        [ToolCall(name, json.dumps(args, ensure_ascii=False)) for name, args in calls]
    )
    for spelling in SPELLINGS:  # visible prose never opens a block of its own
        prose = prose.replace(spelling.block_open, "")
    text = "reasoning</think>" + prose + rendered
    result = finish_turn(text, tools_active=True, thinking=True, finish="stop")
    assert result.finish == "tool_calls"
    assert [(c.name, json.loads(c.arguments)) for c in result.calls] == calls
    assert result.raw_dsml is not None and text.endswith(result.raw_dsml)


fragments = st.lists(
    st.one_of(
        st.sampled_from(
            [
                f"<{D}tool_calls>",
                f'<{D}invoke name="f">',
                f'<{D}parameter name="a" string="true">',
                f'<{D}parameter name="b" string="false">',
                f"</{D}parameter>",
                f"</{D}invoke>",
                f"</{D}tool_calls>",
                "<DSML｜tool_calls>",
                "<think>",
                "</think>",
                '"',
                "\\",
                "<",
                "</",
                "\n",
                "é",
                "🙂",
            ]
        ),
        st.text(max_size=4),
    ),
    max_size=25,
).map("".join)


def _snapshot(decoder: DsmlStreamDecoder) -> tuple[object, ...]:
    return (
        decoder.state,
        decoder.block_started,
        decoder.block_closed,
        decoder.inside_think,
        decoder.think_tool,
    )


@settings(max_examples=200, deadline=None)
@given(
    text=fragments, cuts=st.lists(st.integers(min_value=0, max_value=400)), thinking=st.booleans()
)
def test_streaming_state_does_not_depend_on_how_the_bytes_were_split(
    text: str, cuts: list[int], thinking: bool
) -> None:
    data = text.encode()
    whole = DsmlStreamDecoder(tools_active=True, thinking=thinking)
    whole.feed(data)
    pieces = DsmlStreamDecoder(tools_active=True, thinking=thinking)
    bounds = sorted({0, len(data), *(c % (len(data) + 1) for c in cuts)})
    for start, end in itertools.pairwise(bounds):
        pieces.feed(data[start:end])
    bytewise = DsmlStreamDecoder(tools_active=True, thinking=thinking)
    for i in range(len(data)):
        bytewise.feed(data[i : i + 1])
    assert _snapshot(whole) == _snapshot(pieces) == _snapshot(bytewise)


@settings(max_examples=60, deadline=None)
@given(calls=st.lists(st.tuples(tool_name, arguments), min_size=1, max_size=2))
def test_streamed_block_closes_exactly_where_the_parser_ends_it(
    calls: list[tuple[str, dict[str, object]]],
) -> None:
    text = render_tool_calls(
        [ToolCall(name, json.dumps(args, ensure_ascii=False)) for name, args in calls]
    )
    data = text.encode()
    decoder = DsmlStreamDecoder(tools_active=True, thinking=False)
    decoder.feed(data[:-1])
    assert _snapshot(decoder)[1:3] == (True, False)
    decoder.feed(data[-1:])
    assert _snapshot(decoder)[1:3] == (True, True)
    parsed = finish_turn(data.decode(), tools_active=True, thinking=False, finish="stop")
    assert len(parsed.calls) == len(calls)
