"""Tool ids, replay memory, KTM trailer (docs/reference/chat-and-dsml.md §4,
docs/reference/formats.md §9.4)."""

from __future__ import annotations

import struct

import pytest

from ds4.adapters.system import SystemRandom
from ds4.domain.chat import AssistantMessage, Message, ThinkMode, UserMessage, render_chat
from ds4.domain.dsml.parser import finish_turn
from ds4.domain.dsml.syntax import ToolCall
from ds4.domain.tools import (
    ReplaySource,
    ToolReplayMemory,
    decode_ktm,
    dsml_blocks,
    encode_ktm,
    ktm_size,
)

D = "｜DSML｜"
SAMPLED = (
    f'\n\n<{D}tool_calls>\n<{D}invoke name="bash">\n'
    f'<{D}parameter name="command" string="true">ls</{D}parameter>\n'
    f'<{D}parameter name="timeout" string="false">10</{D}parameter>\n'
    f'<{D}parameter name="description" string="true">list</{D}parameter>\n'
    f"</{D}invoke>\n</{D}tool_calls>"
)


class ScriptedRandom:
    """Plays back fixed byte strings, so ids and collisions are deterministic."""

    def __init__(self, *draws: bytes) -> None:
        self.draws = list(draws)

    def token_bytes(self, n: int) -> bytes:
        draw = self.draws.pop(0)
        assert len(draw) == n
        return draw


def _memory(*draws: bytes, max_ids: int = 100_000, max_bytes: int = 1 << 29) -> ToolReplayMemory:
    return ToolReplayMemory(ScriptedRandom(*draws), max_ids=max_ids, max_bytes=max_bytes)


def test_ids_have_the_api_prefix_and_32_hex_digits() -> None:
    memory = ToolReplayMemory(SystemRandom())
    openai, anthropic = memory.new_id("openai"), memory.new_id("anthropic")
    assert openai.startswith("call_") and len(openai) == 5 + 32
    assert anthropic.startswith("toolu_") and len(anthropic) == 6 + 32
    int(openai[5:], 16)
    assert openai != memory.new_id("openai")


def test_ids_are_redrawn_on_collision_with_memory_and_the_turn() -> None:
    memory = _memory(b"\x01" * 16, b"\x01" * 16, b"\x02" * 16, b"\x03" * 16)
    memory.put("call_" + "01" * 16, SAMPLED)
    assert memory.new_id("openai", taken={"call_" + "02" * 16}) == "call_" + "03" * 16


def test_assign_ids_keeps_streamed_ids_and_draws_the_rest() -> None:
    memory = _memory(b"\xaa" * 16)
    calls = (ToolCall("a", "{}"), ToolCall("b", "{}"))
    assigned = memory.assign_ids(calls, "anthropic", shown=["toolu_live"])
    assert [c.id for c in assigned] == ["toolu_live", "toolu_" + "aa" * 16]


def test_sampled_block_is_replayed_when_the_client_sends_reordered_json() -> None:
    result = finish_turn("Checking." + SAMPLED, tools_active=True, thinking=False, finish="stop")
    memory = _memory(b"\x05" * 16)
    calls = memory.assign_ids(result.calls, "openai")
    memory.remember(calls, result.raw_dsml)
    client_call = ToolCall(
        "bash", '{"description": "list", "command": "ls", "timeout": 10}', calls[0].id
    )
    history: list[Message] = [
        UserMessage("go"),
        AssistantMessage(content="Checking.", tool_calls=(client_call,)),
    ]
    attached, stats = memory.attach(history)
    assert (stats.mem, stats.disk, stats.canonical, stats.missing_ids) == (1, 0, 0, 0)
    prompt = render_chat(attached, (), ThinkMode.NONE)
    assert "Checking." + SAMPLED + "<｜end▁of▁sentence｜>" in prompt
    assert prompt.index('"command"') < prompt.index('"timeout"') < prompt.index('"description"')


def test_unknown_or_mixed_ids_render_canonically() -> None:
    memory = _memory()
    memory.put("call_a", SAMPLED)
    memory.put("call_b", SAMPLED + " ")
    mixed = AssistantMessage(
        tool_calls=(ToolCall("x", "{}", "call_a"), ToolCall("y", "{}", "call_b"))
    )
    unknown = AssistantMessage(tool_calls=(ToolCall("x", "{}", "call_zz"),))
    attached, stats = memory.attach([mixed, unknown])
    assert all(isinstance(m, AssistantMessage) and m.raw_dsml is None for m in attached)
    assert (stats.canonical, stats.missing_ids) == (2, 1)


def test_max_ids_evicts_the_least_recently_used() -> None:
    memory = _memory(max_ids=2)
    memory.put("a", "block a")
    memory.put("b", "block b")
    assert memory.lookup("a") == "block a"  # a is now the most recent
    memory.put("c", "block c")
    assert (memory.has_id("a"), memory.has_id("b"), memory.has_id("c")) == (True, False, True)


def test_byte_cap_evicts_and_blocks_are_shared_and_freed_with_their_last_id() -> None:
    memory = _memory()
    memory.put("a", "shared")
    memory.put("b", "shared")
    one_block = memory.byte_size
    memory.put("a", "sharer")
    memory.put("b", "sharer")
    assert memory.byte_size == one_block  # "shared" freed when its last id moved
    tight = _memory(max_bytes=one_block + 60)
    tight.put("a", "shared")
    tight.put("b", "shared")
    tight.put("c", "x" * 100)  # needs more room than "a" alone frees
    assert [tight.has_id(i) for i in "abc"] == [False, False, True]
    assert tight.byte_size <= one_block + 60
    tight.put("d", "y" * 1000)  # larger than the cap on its own: nothing can hold it
    assert len(tight) == 0 and tight.byte_size == 0


def test_identical_put_upgrades_disk_to_ram_and_different_dsml_replaces() -> None:
    memory = _memory()
    memory.put("a", "dsml", ReplaySource.DISK)
    memory.put("a", "dsml", ReplaySource.RAM)
    assert memory.source_of("a") is ReplaySource.RAM
    memory.put("a", "new dsml", ReplaySource.DISK)
    assert (memory.lookup("a"), memory.source_of("a")) == ("new dsml", ReplaySource.DISK)


def test_disabled_memory_remembers_nothing_and_writes_no_trailer() -> None:
    memory = ToolReplayMemory(SystemRandom(), enabled=False)
    memory.put("a", SAMPLED)
    assert not memory.has_id("a")
    assert memory.ktm_trailer("x" + SAMPLED) == b""
    _, stats = memory.attach([AssistantMessage(tool_calls=(ToolCall("x", "{}", "a"),))])
    assert (stats.canonical, stats.missing_ids) == (1, 1)


def test_ktm_trailer_layout_and_round_trip() -> None:
    memory = _memory()
    memory.put("call_1", SAMPLED)
    memory.put("call_2", SAMPLED)
    memory.put("call_other", "\n\nnot in the text")
    text = "prefix" + SAMPLED + "<｜end▁of▁sentence｜>" + SAMPLED
    trailer = memory.ktm_trailer(text)
    assert trailer[:4] == b"KTM\x01"
    assert struct.unpack_from("<I", trailer, 4) == (2,)  # the block counted once
    id_len, dsml_len = struct.unpack_from("<II", trailer, 8)
    assert trailer[16 : 16 + id_len] == b"call_1"
    assert dsml_len == len(SAMPLED.encode())
    assert len(trailer) == ktm_size(memory.ktm_entries(text))
    fresh = _memory()
    assert fresh.load_ktm(trailer, wanted=lambda i: i == "call_2") == 1
    assert (fresh.lookup("call_2"), fresh.source_of("call_2")) == (SAMPLED, ReplaySource.DISK)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"KTX\x01" + struct.pack("<I", 1), 0),  # bad magic
        (b"KTM\x02" + struct.pack("<I", 1), 0),  # bad version
        (b"KTM\x01" + struct.pack("<I", 9), 0),  # count over 4 x max_ids (max 2)
        (encode_ktm([("a", "x"), ("b", "y")])[:-1], 1),  # short second entry
        (encode_ktm([("a", "x")])[:8] + struct.pack("<II", 0, 1) + b"x", 0),  # empty id
        (encode_ktm([("a", "x")])[:8] + struct.pack("<II", 257, 1) + b"i" * 257 + b"x", 0),
        (encode_ktm([("a", "x")])[:8] + struct.pack("<II", 1, 1) + b"\xff" + b"x", 0),
    ],
)
def test_ktm_loader_stops_at_bad_input(data: bytes, expected: int) -> None:
    assert len(decode_ktm(data, max_count=8)) == expected


def test_block_scan_finds_blocks_whose_values_quote_the_close_tag() -> None:
    tricky = SAMPLED.replace(">ls<", f">echo </{D}tool_calls><")
    assert dsml_blocks("a" + tricky + "b" + SAMPLED) == [tricky, SAMPLED]
