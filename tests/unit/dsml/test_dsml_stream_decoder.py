"""The decode tracker: greedy structure vs free payload, block close, think handling."""

from __future__ import annotations

from ds4.domain.dsml.calls import ToolCall
from ds4.domain.dsml.render import render_tool_calls
from ds4.domain.dsml.stream_decoder import DecodeState, DsmlStreamDecoder, ThinkToolState

D = "｜DSML｜"
S = DecodeState


def _flags(decoder: DsmlStreamDecoder) -> tuple[DecodeState, bool, bool, bool, bool]:
    """Read through a call so mypy does not narrow properties across feeds."""
    return (
        decoder.state,
        decoder.block_started,
        decoder.block_closed,
        decoder.inside_think,
        decoder.force_think_close,
    )


def _states(text: str, *, thinking: bool = False) -> list[tuple[str, DecodeState]]:
    """(text so far, state) after every byte, collapsed to state changes."""
    decoder = DsmlStreamDecoder(tools_active=True, thinking=thinking)
    data = text.encode()
    out: list[tuple[str, DecodeState]] = []
    for i in range(len(data)):
        decoder.feed(data[i : i + 1])
        if not out or out[-1][1] is not decoder.state:
            out.append((data[: i + 1].decode("utf-8", "replace"), decoder.state))
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
    decoder = DsmlStreamDecoder(tools_active=True, thinking=False)
    cut = block.index(f"</{D}tool_calls>") + len(f"</{D}tool_calls>")
    decoder.feed(block[:cut].encode())
    assert _flags(decoder)[1:3] == (True, False)
    decoder.feed(block[cut:].encode())
    assert _flags(decoder)[:3] == (S.OUTSIDE, True, True)


def test_markers_inside_reasoning_are_ignored_until_think_closes() -> None:
    decoder = DsmlStreamDecoder(tools_active=True, thinking=True)
    decoder.feed(f'I could write "<{D}tool_calls>" here'.encode())
    assert (decoder.state, decoder.block_started, decoder.think_tool) == (
        S.OUTSIDE,
        False,
        ThinkToolState.NONE,
    )
    decoder.feed(b"</thi")
    assert _flags(decoder)[3]
    decoder.feed(b"nk>")
    assert not _flags(decoder)[3]
    decoder.feed(f"\n\n<{D}tool_calls>".encode())
    assert _flags(decoder)[:2] == (S.STRUCTURAL, True)


def test_complete_call_inside_unclosed_think_asks_for_forced_close() -> None:
    decoder = DsmlStreamDecoder(tools_active=True, thinking=True)
    decoder.feed(f"plan\n<{D}tool_calls>\n".encode())
    assert decoder.think_tool is ThinkToolState.STARTED
    assert not _flags(decoder)[4]
    decoder.feed(f'<{D}invoke name="ba'.encode())
    assert not _flags(decoder)[4]
    decoder.feed(b'sh">')
    assert _flags(decoder) == (S.OUTSIDE, False, False, True, True)
    decoder.feed(b"</think>\n\n")  # what the generation loop injects
    # Out of reasoning, no block yet: the model must re-issue the call after </think>.
    assert _flags(decoder) == (S.OUTSIDE, False, False, False, False)


def test_stanza_that_turns_out_not_to_be_a_call_resets() -> None:
    decoder = DsmlStreamDecoder(tools_active=True, thinking=True)
    decoder.feed(f"<{D}tool_calls> is the tag I will use".encode())
    assert decoder.think_tool is ThinkToolState.NONE


def test_without_tools_the_tracker_stays_outside() -> None:
    decoder = DsmlStreamDecoder(tools_active=False, thinking=False)
    decoder.feed(render_tool_calls([ToolCall("f", '{"a":1}')]).encode())
    assert (decoder.state, decoder.block_started, decoder.greedy) == (S.OUTSIDE, False, False)


def test_partial_close_tag_in_a_string_body_is_structural() -> None:
    decoder = DsmlStreamDecoder(tools_active=True, thinking=False)
    header = f'<{D}tool_calls><{D}invoke name="f"><{D}parameter name="a" string="true">'
    seen = []
    for piece in (f"{header}x<".encode(), b"/", b"div>"):
        decoder.feed(piece)
        seen.append(decoder.state)
    # A lone "<" may be text; "</" may start the close tag; "</div>" was text after all.
    assert seen == [S.STRING_BODY, S.STRUCTURAL, S.STRING_BODY]
