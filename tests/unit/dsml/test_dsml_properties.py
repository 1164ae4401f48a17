"""Property test: DSML render -> parse round trip."""

from __future__ import annotations

import json

from hypothesis import given, settings
from tests.unit.dsml.strategies import as_tool_calls, nasty_text, tool_calls

from ds4.domain.dsml.parser import finish_turn
from ds4.domain.dsml.syntax import SPELLINGS, render_tool_calls


@settings(max_examples=80, deadline=None)
@given(calls=tool_calls, prose=nasty_text)
def test_render_then_parse_returns_the_same_calls(
    calls: list[tuple[str, dict[str, object]]], prose: str
) -> None:
    rendered = render_tool_calls(as_tool_calls(calls))
    for spelling in SPELLINGS:  # visible prose never opens a block of its own
        prose = prose.replace(spelling.block_open, "")
    text = "reasoning</think>" + prose + rendered
    result = finish_turn(text, tools_active=True, thinking=True, finish="stop")
    assert result.finish == "tool_calls"
    assert [(c.name, json.loads(c.arguments)) for c in result.calls] == calls
    assert result.raw_dsml is not None and text.endswith(result.raw_dsml)
