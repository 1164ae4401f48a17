"""The lexer's sampling view: greedy structure vs free payload, block close, think handling."""

from __future__ import annotations

from ds4.domain.dsml.stream import Structure, ThinkCall
from ds4.domain.dsml.syntax import ToolCall, render_tool_calls
from ds4.domain.generation.lexer import TurnLexer

D = "｜DSML｜"
S = Structure


def _flags(lexer: TurnLexer) -> tuple[Structure, bool, bool, bool, bool]:
    """Read through a call so mypy does not narrow properties across feeds."""
    return (
        lexer.structure,
        lexer.block_at is not None,
        lexer.block_closed,
        lexer.in_reasoning,
        lexer.force_think_close,
    )


def _states(text: str, *, thinking: bool = False) -> list[tuple[str, Structure]]:
    """(text so far, structure) after every character, collapsed to changes."""
    lexer = TurnLexer(tools_active=True, thinking=thinking)
    out: list[tuple[str, Structure]] = []
    for i, char in enumerate(text):
        lexer.feed(char)
        if not out or out[-1][1] is not lexer.structure:
            out.append((text[: i + 1], lexer.structure))
    return out


def test_structure_is_greedy_and_payloads_are_free() -> None:
    block = render_tool_calls([ToolCall("f", '{"s":"hi","n":[1,"x"]}')])
    changes = _states("ok" + block)
    states = [state for _, state in changes]
    assert states == [
        S.OUTSIDE,
        S.STRUCTURAL,  # block open through the string parameter header
        S.STRING_BODY,  # hi
        S.STRUCTURAL,  # "</" of the close tag, then tags
        S.JSON_STRUCTURAL,  # [1,
        S.JSON_STRING,  # "x
        S.JSON_STRUCTURAL,  # "]
        S.STRUCTURAL,  # close tags
        S.OUTSIDE,  # after the block close
    ]
    assert changes[2][0].endswith('string="true">')
    assert changes[4][0].endswith('string="false">')


def test_block_close_inside_a_string_value_does_not_end_the_block() -> None:
    block = render_tool_calls([ToolCall("bash", f'{{"c":"echo </{D}tool_calls>"}}')])
    lexer = TurnLexer(tools_active=True, thinking=False)
    cut = block.index(f"</{D}tool_calls>") + len(f"</{D}tool_calls>")
    lexer.feed(block[:cut])
    assert _flags(lexer)[1:3] == (True, False)
    lexer.feed(block[cut:])
    assert _flags(lexer)[:3] == (S.OUTSIDE, True, True)


def test_markers_inside_reasoning_are_ignored_until_think_closes() -> None:
    lexer = TurnLexer(tools_active=True, thinking=True)
    lexer.feed(f'I could write "<{D}tool_calls>" here')
    assert (lexer.structure, lexer.block_at, lexer.think_call) == (S.OUTSIDE, None, ThinkCall.NONE)
    lexer.feed("</thi")
    assert _flags(lexer)[3]
    lexer.feed("nk>")
    assert not _flags(lexer)[3]
    lexer.feed(f"\n\n<{D}tool_calls>")
    assert _flags(lexer)[:2] == (S.STRUCTURAL, True)


def test_complete_call_inside_unclosed_think_asks_for_forced_close() -> None:
    lexer = TurnLexer(tools_active=True, thinking=True)
    lexer.feed(f"plan\n<{D}tool_calls>\n")
    assert lexer.think_call is ThinkCall.STARTED
    assert not _flags(lexer)[4]
    lexer.feed(f'<{D}invoke name="ba')
    assert not _flags(lexer)[4]
    lexer.feed('sh">')
    assert _flags(lexer) == (S.OUTSIDE, False, False, True, True)
    lexer.feed("</think>\n\n")  # what the generation loop injects
    # Out of reasoning, no block yet: the model must re-issue the call after </think>.
    assert _flags(lexer) == (S.OUTSIDE, False, False, False, False)


def test_stanza_that_turns_out_not_to_be_a_call_resets() -> None:
    lexer = TurnLexer(tools_active=True, thinking=True)
    lexer.feed(f"<{D}tool_calls> is the tag I will use")
    assert lexer.think_call is ThinkCall.NONE


def test_a_rejected_stanza_is_looked_at_again_from_its_invoke_position() -> None:
    lexer = TurnLexer(tools_active=True, thinking=True)
    lexer.feed(f"<{D}tool_calls>\n<{D}tool_calls>\n")
    assert lexer.think_call is ThinkCall.STARTED  # the second tag, at its own line start
    lexer.feed(f'<{D}invoke name="f">')
    assert lexer.force_think_close


def test_without_tools_the_lexer_stays_outside() -> None:
    lexer = TurnLexer(tools_active=False, thinking=False)
    lexer.feed(render_tool_calls([ToolCall("f", '{"a":1}')]))
    assert (lexer.structure, lexer.block_at, lexer.greedy) == (S.OUTSIDE, None, False)


def test_partial_close_tag_in_a_string_body_is_structural() -> None:
    lexer = TurnLexer(tools_active=True, thinking=False)
    header = f'<{D}tool_calls><{D}invoke name="f"><{D}parameter name="a" string="true">'
    seen = []
    for piece in (f"{header}x<", "/", "div>"):
        lexer.feed(piece)
        seen.append(lexer.structure)
    # A lone "<" may be text; "</" may start the close tag; "</div>" was text after all.
    assert seen == [S.STRING_BODY, S.STRUCTURAL, S.STRING_BODY]


def test_loose_object_leaves_are_structure_and_their_values_payload() -> None:
    lexer = TurnLexer(tools_active=True, thinking=False)
    seen = []
    for piece in (
        f'<{D}tool_calls><{D}invoke name="f"><{D}parameter name="o">\n',  # a string, or not
        f'<{D}parameter name="a" str',
        'ing="true">',
        f"x</{D}parameter>",
    ):
        lexer.feed(piece)
        seen.append(lexer.structure)
    assert seen == [S.STRING_BODY, S.STRUCTURAL, S.STRING_BODY, S.STRUCTURAL]
