"""Hypothesis strategies for DSML tool calls whose names, keys and values fight the syntax."""

from __future__ import annotations

import json

from hypothesis import strategies as st

from ds4.domain.dsml.syntax import ToolCall

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
tool_calls = st.lists(st.tuples(tool_name, arguments), min_size=1, max_size=3)


def as_tool_calls(calls: list[tuple[str, dict[str, object]]]) -> list[ToolCall]:
    return [ToolCall(name, json.dumps(args, ensure_ascii=False)) for name, args in calls]
