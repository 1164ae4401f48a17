"""DSML rendering, parsing and turn finishing (docs/reference/chat-and-dsml.md §3.2–3.8)."""

from __future__ import annotations

import json

from ds4.domain.dsml.parser import FinishReason, Recovery, TurnResult, finish_turn, split_reasoning
from ds4.domain.dsml.syntax import (
    ToolCall,
    escape_param_text,
    render_tool_calls,
    unescape_param_text,
)

D = "｜DSML｜"


def _finish(
    text: str, *, thinking: bool = False, finish: FinishReason = "stop", tools: bool = True
) -> TurnResult:
    return finish_turn(text, tools_active=tools, thinking=thinking, finish=finish)


def _one_param(attribute_and_value: str) -> str:
    param = f'<{D}parameter name="n" {attribute_and_value}</{D}parameter>'
    return f'<{D}tool_calls><{D}invoke name="f">{param}</{D}invoke></{D}tool_calls>'


def test_canonical_rendering_keeps_client_member_order_and_minifies_values() -> None:
    call = ToolCall("bash", '{"description": "list", "command": "ls", "timeout": { "s" : [1, 2] }}')
    text = render_tool_calls([call])
    assert text.index('"description"') < text.index('"command"') < text.index('"timeout"')
    assert f'<{D}parameter name="timeout" string="false">{{"s":[1,2]}}</{D}parameter>' in text


def test_rendering_escapes_only_each_wrappers_own_closing_tag() -> None:
    value = f"echo 2>&1 && echo </{D}tool_calls> </{D}parameter> done"
    text = render_tool_calls([ToolCall("bash", json.dumps({"cmd": value}))])
    assert f"echo 2>&1 && echo </{D}tool_calls> &lt;/{D}parameter> done" in text
    assert "&gt;" not in text
    assert "&amp;" not in text


def test_non_string_values_protect_the_close_tag_as_json_escape() -> None:
    text = render_tool_calls(
        [ToolCall("f", json.dumps({"xs": [f"a</{D}parameter>"]}, ensure_ascii=False))]
    )
    assert f'["a\\u003c/{D}parameter>"]' in text


def test_attribute_values_are_entity_escaped_and_decoded_back() -> None:
    call = ToolCall('we"ird<&>', '{"k&y": 1}')
    text = render_tool_calls([call])
    assert 'name="we&quot;ird&lt;&amp;&gt;"' in text
    result = _finish(text)
    assert result.calls == (ToolCall('we"ird<&>', '{"k&y":1}'),)


def test_non_object_arguments_become_one_string_parameter() -> None:
    text = render_tool_calls([ToolCall("f", "not json")])
    assert f'<{D}parameter name="arguments" string="true">not json</{D}parameter>' in text


def test_param_escape_is_an_exact_inverse_even_for_already_escaped_text() -> None:
    for value in [f"&lt;/{D}parameter>", f"&amp;lt;/{D}parameter></{D}parameter>", "&&lt;"]:
        assert unescape_param_text(escape_param_text(value)) == value
    assert escape_param_text(f"x</{D}parameter>") == f"x&lt;/{D}parameter>"


def test_parse_full_block_with_text_before_it() -> None:
    text = "I will inspect the files.\n\n\n\n" + render_tool_calls(
        [ToolCall("bash", '{"command":"pwd","timeout":10}')]
    )
    result = _finish(text)
    assert result.content == "I will inspect the files."  # separator whitespace is syntax
    assert result.calls == (ToolCall("bash", '{"command":"pwd","timeout":10}'),)
    assert result.finish == "tool_calls"
    assert result.raw_dsml is not None and result.raw_dsml.startswith(f"\n\n<{D}tool_calls>")
    assert text.endswith(result.raw_dsml)


def test_parse_short_spelling_after_reasoning() -> None:
    text = (
        'need a tool</think>\n\n<DSML｜tool_calls>\n<DSML｜invoke name="bash">\n'
        '<DSML｜parameter name="command" string="true">ls</DSML｜parameter>\n'
        "</DSML｜invoke>\n</DSML｜tool_calls>"
    )
    result = _finish(text, thinking=True)
    assert (result.reasoning, result.content) == ("need a tool", "")
    assert result.calls == (ToolCall("bash", '{"command":"ls"}'),)


def test_parse_plain_xml_spelling() -> None:
    text = (
        '<tool_calls><invoke name="f"><parameter name="n" string="false">3</parameter>'
        "</invoke></tool_calls>"
    )
    assert _finish(text).calls == (ToolCall("f", '{"n":3}'),)


def test_loose_nested_parameters_become_a_json_object() -> None:
    text = (
        f'review done\n\n<{D}tool_calls>\n<{D}invoke name="edit">\n'
        f'<{D}parameter name="path" string="true">/private/tmp/tetris.c</{D}parameter>\n'
        f'<{D}parameter name="edits">\n'
        f'<{D}parameter name="oldText">old <text></{D}parameter>\n'
        f'<{D}parameter name="newText">new text</{D}parameter>\n'
        f"</{D}parameter>\n</{D}invoke>\n</{D}tool_calls>"
    )
    result = _finish(text)
    assert result.content == "review done"
    assert result.calls == (
        ToolCall(
            "edit",
            '{"path":"/private/tmp/tetris.c",'
            '"edits":{"oldText":"old <text>","newText":"new text"}}',
        ),
    )


def test_shell_operators_survive_parse_without_entity_mangling() -> None:
    command = "cd /tmp && git diff 2>/dev/null; echo '&amp;'"
    text = render_tool_calls([ToolCall("bash", json.dumps({"command": command}))])
    (call,) = _finish(text).calls
    assert json.loads(call.arguments) == {"command": command}


def test_invalid_json_in_a_non_string_value_is_kept_as_text() -> None:
    text = _one_param('string="false">abc def')
    assert _finish(text).calls == (ToolCall("f", '{"n":"abc def"}'),)


def test_empty_non_string_value_is_null() -> None:
    text = _one_param('string="false"> ')
    assert _finish(text).calls == (ToolCall("f", '{"n":null}'),)


def test_invoke_without_name_is_returned_as_text_with_finish_stop() -> None:
    text = f"hello\n\n<{D}tool_calls>\n<{D}invoke>\n</{D}invoke>\n</{D}tool_calls>"
    result = _finish(text, finish="tool_calls")
    assert (result.calls, result.finish, result.recovery) == ((), "stop", Recovery.AS_TEXT)
    assert result.content == text
    assert result.reasoning is None


def test_garbage_inside_a_block_is_returned_as_text_keeping_reasoning_apart() -> None:
    text = f"why</think>ok\n\n<{D}tool_calls>\nbanana\n</{D}tool_calls>"
    result = _finish(text, thinking=True, finish="length")
    assert (result.reasoning, result.calls, result.finish) == ("why", (), "length")
    assert result.content == f"ok\n\n<{D}tool_calls>\nbanana\n</{D}tool_calls>"


def test_dsml_inside_reasoning_is_not_executable() -> None:
    block = render_tool_calls([ToolCall("bash", '{"command":"pwd"}')])
    result = _finish(f"thinking about{block}</think>Final answer.", thinking=True)
    assert result.calls == ()
    assert result.content == "Final answer."
    assert result.reasoning is not None and f"<{D}invoke" in result.reasoning


def test_dsml_after_think_close_is_executable() -> None:
    block = render_tool_calls([ToolCall("bash", '{"command": "pwd"}')])
    result = _finish(f"need a shell check</think>{block}", thinking=True)
    assert (result.reasoning, result.content) == ("need a shell check", "")
    assert result.calls == (ToolCall("bash", '{"command":"pwd"}'),)


def test_without_declared_tools_dsml_is_plain_text() -> None:
    block = render_tool_calls([ToolCall("bash", '{"command": "pwd"}')])
    result = _finish("hi" + block, tools=False)
    assert (result.calls, result.content, result.finish) == ((), "hi" + block, "stop")


def test_truncated_reasoning_goes_to_reasoning_not_content() -> None:
    result = _finish("still thinking about it", thinking=True, finish="length")
    assert (result.reasoning, result.content, result.finish) == (
        "still thinking about it",
        "",
        "length",
    )


def test_split_reasoning_rules() -> None:
    assert split_reasoning("<think>a</think>b</think>c") == ("a", "b</think>c")
    assert split_reasoning("plain") == (None, "plain")


def test_without_thinking_a_think_close_is_content() -> None:
    """The prompt closed thinking, so the turn has no reasoning (as it was streamed)."""
    assert (_finish("a</think>b").reasoning, _finish("a</think>b").content) == (None, "a</think>b")
    block = f'\n\n<{D}tool_calls><{D}invoke name="f"></{D}invoke></{D}tool_calls>'
    result = _finish("a</think>b" + block)
    assert (result.reasoning, result.content, len(result.calls)) == (None, "a</think>b", 1)
