"""Context compaction: when to compact, how much room each part gets, where the
verbatim tail starts, and the text around the summary (docs/agent.md "Compaction").

With `used` tokens of a `ctx`-token context and `reserve` R = (tokens of the compaction
request) + S + 64, where S = clamp(ctx/8, 256, 4096) is the summary budget, compaction
is due when used >= 85% of ctx or when ctx - used <= max(min(8192, ctx/8), R + 128).
The rebuilt context is the system prompt, the summary, then the last T = min(ctx/10,
50000) tokens verbatim, moved back to the nearest user-turn start within 2T so that a
whole turn is kept rather than a fragment.
"""

from __future__ import annotations

from collections.abc import Sequence

SOFT_PERCENT = 85
FREE_FLOOR = 8192
TOOL_RESULT_RESERVE = 1024
REMINDER_EVERY = 50_000  # transcript tokens between system prompt reminders

COMPACTION_REQUEST = (
    "[Internal ds4 agent compaction request; this is not a message from the user.]\n"
    "Write a durable task-state summary of the conversation above, keeping only what is "
    "needed to continue the work: the user's goals, constraints and preferences; files "
    "inspected or edited; commands run and their important results; decisions taken, "
    "approaches rejected, known bugs and the pending next steps; and, for bulky data "
    "that can be loaded again, the exact paths, line ranges or commands to get it. Do "
    "not invent facts, do not narrate, and do not copy file contents unless they are "
    "essential. Do not solve unfinished work, compute new results or complete code: "
    "record what was asked and what happened, and list unfinished work as pending. No "
    "tool calls, no thinking, no DSML; write only the summary and stop after it.\n"
)
SUMMARY_OPEN = (
    "\n\n[ds4 agent compacted earlier conversation. Durable task-state summary follows.]\n"
)
SUMMARY_CLOSE = "[End compacted summary. Recent conversation continues verbatim below.]\n\n"
MID_MESSAGE_NOTE = "[Verbatim tail of the previous conversation; it may begin mid-message.]\n"
JOBS_NOTE = (
    "Bash job update after context compaction. Running jobs still need explicit "
    "bash_status or bash_stop if relevant."
)
CALL_DROPPED_NOTE = (
    "[ds4 agent note: the context was compacted while you were writing a tool call; "
    "that call was interrupted and not executed. Retry it with smaller arguments or "
    "smaller edits.]"
)


def request_text(reason: str) -> str:
    return COMPACTION_REQUEST + f"\nCompaction reason: {reason}\n"


def summary_budget(ctx: int) -> int:
    return max(256, min(ctx // 8, 4096))


def tail_budget(ctx: int) -> int:
    return max(1, min(ctx // 10, 50_000))


def reserve(ctx: int, request_tokens: int) -> int:
    """R: room a compaction needs (its request, the summary, a margin)."""
    return request_tokens + summary_budget(ctx) + 64


def should_compact(used: int, ctx: int, reserve_tokens: int) -> bool:
    if used * 100 >= ctx * SOFT_PERCENT:
        return True
    return ctx - used <= max(min(FREE_FLOOR, ctx // 8), reserve_tokens + 128)


def tool_result_reserve(reserve_tokens: int) -> int:
    return max(TOOL_RESULT_RESERVE, reserve_tokens)


def tail_start(
    tokens: Sequence[int], *, system_len: int, bottom: int, tail: int, user_token: int
) -> tuple[int, bool]:
    """(start of the verbatim tail, whether it starts mid-message)."""
    t0 = max(bottom - tail, system_len)
    low = max(system_len, t0 - 2 * tail)
    for i in range(t0, low - 1, -1):
        if tokens[i] == user_token:
            return i, False
    return t0, t0 > system_len


def summary_bottom(ctx: int, bottom: int, suffix_tokens: int, summary: int) -> int:
    """How much of the transcript the summary request can cover: all of it, or (a full
    resumed session) only the prefix that leaves room for the request and the summary."""
    return min(bottom, ctx - suffix_tokens - summary - 1)
