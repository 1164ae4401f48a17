"""Compaction: the arithmetic of when and how much, and the worker compacting before a
turn, inside a reply (resuming it) and inside a tool call (dropping it), on request,
failing and interrupted."""

from __future__ import annotations

from tests.support.agent_fakes import FakeIO
from tests.unit.agent.agent_setup import answer, block, call, make_rig

from ds4.domain.agent import compaction
from ds4.domain.agent.screen import AgentState, AgentStatus
from ds4.domain.agent.slash import SlashCommand

CTX = 12000
LONG = "word " * 1400  # more than the room left before the compaction reserve


def test_budgets_and_reserve() -> None:
    assert compaction.summary_budget(1000) == 256
    assert compaction.summary_budget(16000) == 2000
    assert compaction.summary_budget(1_000_000) == 4096
    assert compaction.tail_budget(5) == 1
    assert compaction.tail_budget(100_000) == 10_000
    assert compaction.tail_budget(1_000_000) == 50_000
    assert compaction.reserve(100_000, 300) == 300 + 4096 + 64
    assert compaction.tool_result_reserve(500) == 1024
    assert compaction.tool_result_reserve(5000) == 5000


def test_should_compact_soft_percent_and_free_floor() -> None:
    ctx, reserve = 100_000, 4460
    assert not compaction.should_compact(84_999, ctx, reserve)
    assert compaction.should_compact(85_000, ctx, reserve)  # 85 %
    small, r = 20_000, 4000
    # free floor: max(min(8192, ctx/8), R + 128) = 4128 tokens, before the 85 % mark
    assert not compaction.should_compact(small - 4129, small, r)
    assert compaction.should_compact(small - 4128, small, r)


def test_tail_starts_at_the_nearest_user_turn_within_twice_the_budget() -> None:
    u = 9
    tokens = [0] * 10 + [u] + [1] * 30 + [u] + [1] * 50  # system 10, users at 10 and 41
    start, mid = compaction.tail_start(
        tokens, system_len=10, bottom=len(tokens), tail=20, user_token=u
    )
    assert (start, mid) == (41, False)  # t0 = 72, 41 is within 40 tokens back
    start, mid = compaction.tail_start(
        tokens, system_len=10, bottom=len(tokens), tail=10, user_token=u
    )
    assert (start, mid) == (82, True)  # nothing within 20 back: mid-message
    start, mid = compaction.tail_start(tokens, system_len=10, bottom=40, tail=100, user_token=u)
    assert (start, mid) == (10, False)  # everything after the system prompt


def test_summary_bottom_leaves_room_for_request_and_summary() -> None:
    assert compaction.summary_bottom(1000, 500, 100, 200) == 500
    assert compaction.summary_bottom(1000, 900, 100, 200) == 699


def test_a_reply_reaching_the_reserve_is_compacted_and_resumed() -> None:
    rig = make_rig([answer(LONG), "User asked for many words.", "after"], ctx=CTX)
    rig.agent.turn("say many words")
    text = rig.transcript
    assert "COMPACTING generation reached compaction reserve" in rig.io.text
    assert (
        compaction.SUMMARY_OPEN + "User asked for many words.\n" + compaction.SUMMARY_CLOSE in text
    )
    assert "<｜User｜>say many words<｜Assistant｜></think>after" in text  # resumed, no thinking
    assert "word word" not in text  # the cut reply lives on in the summary only
    assert rig.agent.last_answer == "after"
    assert len(rig.core.conv.tokens) < CTX
    assert rig.io.statuses[-1].state is AgentState.IDLE
    assert any(s.state is AgentState.COMPACTING for s in rig.io.statuses)


def test_a_tool_call_cut_by_the_reserve_is_dropped_not_run() -> None:
    huge_write = block(call("write", path="big.txt", content=LONG))
    rig = make_rig(
        [huge_write, "User wanted big.txt written.", answer("retrying smaller")], ctx=CTX
    )
    rig.agent.turn("write big.txt")
    assert rig.workspace.writes == []
    assert rig.io.questions == []
    assert compaction.CALL_DROPPED_NOTE in rig.transcript
    assert rig.agent.last_answer == "retrying smaller"


def test_compact_on_request() -> None:
    rig = make_rig([answer("first answer"), "Summary of the first turn."], ctx=CTX)
    rig.agent.turn("hello")
    before = len(rig.core.conv.tokens)
    out = rig.agent.command(SlashCommand("compact", ""))
    assert out == "context compacted"
    assert "Summary of the first turn." in rig.transcript
    assert "<｜User｜>hello" in rig.transcript  # the short conversation stays verbatim
    assert len(rig.core.conv.tokens) > before - 200
    assert rig.core.conv.seen_at == len(rig.core.conv.tokens)


def test_nothing_to_compact() -> None:
    rig = make_rig([answer("x")], ctx=CTX)
    assert rig.agent.command(SlashCommand("compact", "")) == ""
    assert "compact skipped: nothing to compact" in rig.io.notices


def test_an_empty_summary_keeps_the_conversation() -> None:
    rig = make_rig([answer("first"), ""], ctx=CTX)
    rig.agent.turn("hello")
    before = list(rig.core.conv.tokens)
    rig.agent.command(SlashCommand("compact", ""))
    assert rig.core.conv.tokens == before
    assert "compaction failed: the summary came out empty" in rig.io.notices


def test_an_interrupted_compaction_keeps_the_conversation() -> None:
    io = FakeIO()
    rig = make_rig([answer("first"), "a long summary " * 20], ctx=CTX, io=io)
    rig.agent.turn("hello")
    before = list(rig.core.conv.tokens)

    def summarizing(status: AgentStatus) -> bool:
        return status.state is AgentState.COMPACTING and status.generated >= 5

    io.interrupt_when = summarizing
    assert rig.agent.command(SlashCommand("compact", "")) == "compaction interrupted"
    assert rig.core.conv.tokens == before
    assert "Compaction interrupted; keeping the previous conversation state." in io.notices
    assert not io.interrupt  # cleared before going idle
