"""Prompt reuse across a live miss (docs/kv-cache.md, the decision order; ADR 0049), on
the request sequences the agents send (tests/integration/server/agent_requests and
issue 16), in domain terms: the worker over fakes, the byte tokenizer (a token per
byte), and an engine whose rewinds reach back HISTORY tokens, as a real state's bounded
history does (1024 positions there; the shapes here are scaled down alike).

- Claude Code: a long prompt (12K tokens in the issue's trace), a long reply (2K+),
  then the prompt plus the conversation's continuation, and a retry of the same prompt
  (the trace said common=11816 cached=0: the whole prompt prefilled again);
- opencode: a short tool-less title request between two turns of the real conversation;
- Codex: the next request replays the turn in another rendering, so it parts from the
  live tokens a little after the prompt.
"""

from __future__ import annotations

from tests.unit.serving.fake_server import (
    TOK,
    FakeServer,
    fake_server,
    finished,
    prompt_ready,
    texts,
)

from ds4.domain.kvcache.kv_file import SaveReason
from ds4.domain.serving.exchange import ServedEvent
from ds4.domain.serving.prepare import PreparedJob

HISTORY = 128  # the fake engine's rewind reach (a real state's: 1024)
SYSTEM = {"role": "system", "content": "You are a coding agent. " * 48}  # ~1.2K tokens
TASK = "Fix the failing test."
LONG_REPLY = "I looked at the test and the code under it. " * 6  # 264 tokens > HISTORY
SHORT_REPLY = "Done."
REPLIES = {TASK: LONG_REPLY, "And now?": SHORT_REPLY, "Title?": "Fixing a test", "ls": "ok"}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


FIRST = [SYSTEM, user(TASK)]
CONTINUED = [*FIRST, assistant(LONG_REPLY), user("And now?")]


def server(**options: object) -> FakeServer:
    return fake_server(REPLIES, rewind_history=HISTORY, **options)  # type: ignore[arg-type]


def run(srv: FakeServer, job: PreparedJob) -> tuple[list[ServedEvent], list[int]]:
    """The job's events and the tokens the engine evaluated for it."""
    before = sum(len(s.evaluated) for s in srv.runner.sessions)
    events = srv.run(job)
    evaluated = [t for s in srv.runner.sessions for t in s.evaluated]
    return events, evaluated[before:]


# ---- Claude Code ------------------------------------------------------------------


def test_a_retry_after_a_long_reply_prefills_nothing_again() -> None:
    srv = server(disk=False)
    job = srv.chat(FIRST)
    events, _ = run(srv, job)
    assert texts(events) == LONG_REPLY  # the live state now ends far past the prompt
    assert srv.compute.rewind_floor(len(job.prompt_tokens)) == 0  # out of its reach
    events, evaluated = run(srv, srv.chat(FIRST))
    assert prompt_ready(events).source == "memory-checkpoint"
    assert prompt_ready(events).cached_tokens == len(job.prompt_tokens)
    assert evaluated == TOK.encode(LONG_REPLY)  # the reply only: no prompt token again


def test_a_continuation_then_a_retry_both_keep_the_whole_prompt() -> None:
    srv = server(disk=False)
    first = srv.chat(FIRST)
    run(srv, first)
    events, _ = run(srv, srv.chat(CONTINUED))
    assert prompt_ready(events).source == "memory-token"  # the live state continues
    assert prompt_ready(events).cached_tokens >= len(first.prompt_tokens)
    events, _ = run(srv, srv.chat(FIRST))  # the live state now ends past the continuation
    assert prompt_ready(events).source == "memory-checkpoint"
    assert prompt_ready(events).cached_tokens == len(first.prompt_tokens)


def test_when_the_live_state_still_reaches_the_prompt_no_copy_is_kept() -> None:
    """A short reply leaves the prompt's end within the live history: the retry rewinds
    the live state, and the prompt-end copy was dropped when the turn ended."""
    srv = server(disk=False)
    job = srv.chat([SYSTEM, user("ls")])
    run(srv, job)
    events, _ = run(srv, srv.chat([SYSTEM, user("ls")]))
    assert prompt_ready(events).source == "none"  # the live rewind, logged as a miss
    assert prompt_ready(events).cached_tokens == len(job.prompt_tokens) - 1  # last redone
    mem = srv.worker.mem
    assert mem is not None
    assert tuple(job.prompt_tokens) not in mem.tokens()


def test_without_a_memory_budget_the_retry_prefills_the_prompt_again() -> None:
    """What the issue's trace showed (common=11816 cached=0), with the store off."""
    srv = server(disk=False, mem_bytes=0)
    job = srv.chat(FIRST)
    run(srv, job)
    events, evaluated = run(srv, srv.chat(FIRST))
    assert prompt_ready(events).cached_tokens == 0
    assert evaluated[: len(job.prompt_tokens)] == list(job.prompt_tokens)


# ---- opencode -------------------------------------------------------------------


def test_a_side_request_between_turns_does_not_cost_the_conversation() -> None:
    """The title request replaces the live state; the next turn of the real
    conversation continues from the copy kept when it was replaced."""
    srv = server(disk=False)
    first = srv.chat([SYSTEM, user("ls")])
    run(srv, first)
    kept = len(srv.compute.tokens)
    title = [{"role": "system", "content": "You make titles."}, user("Title?")]
    events, _ = run(srv, srv.chat(title))
    assert finished(events).content == "Fixing a test"
    job = srv.chat([SYSTEM, user("ls"), assistant("ok"), user("And now?")])
    events, evaluated = run(srv, job)
    assert prompt_ready(events).source == "memory-checkpoint"
    assert prompt_ready(events).cached_tokens == kept
    assert evaluated == [*job.prompt_tokens[kept:], *TOK.encode(SHORT_REPLY)]


def test_any_slot_restores_what_another_kept() -> None:
    srv = server(disk=False, sessions=2)
    one, two = srv.built.workers
    job = srv.chat(FIRST)
    list(one.run(job))
    events = list(two.run(srv.chat(FIRST)))
    assert prompt_ready(events).source == "memory-checkpoint"
    assert prompt_ready(events).cached_tokens == len(job.prompt_tokens)


# ---- Codex ------------------------------------------------------------------------


def test_a_replay_that_parts_from_the_sampled_reply_keeps_the_prompt() -> None:
    """The next request renders the last turn otherwise than it was sampled (Codex
    replays reasoning as a summary): it shares the prompt and a few reply tokens with
    the live state, whose rewind cannot reach back that far; the prompt's end can."""
    srv = server(disk=False)
    first = srv.chat(FIRST)
    run(srv, first)
    replay = [*FIRST, assistant("I looked at it. Summary."), user("And now?")]
    job = srv.chat(replay)
    common = srv.worker.session.common_prefix(job.prompt_tokens)
    assert common > len(first.prompt_tokens)  # the reply's opening words agree
    assert srv.worker.session.reusable(job.prompt_tokens) == 0
    events, _ = run(srv, job)
    assert prompt_ready(events).source == "memory-checkpoint"
    assert prompt_ready(events).cached_tokens >= len(first.prompt_tokens)


# ---- with the disk cache ----------------------------------------------------------


def test_memory_wins_a_tie_with_the_disk_and_the_disk_wins_when_it_holds_more() -> None:
    srv = server()
    first = srv.chat(FIRST)
    run(srv, first)
    events, _ = run(srv, srv.chat(FIRST))  # the disk holds frontiers up to here too
    assert prompt_ready(events).source == "memory-checkpoint"
    # Parting 40 tokens into the reply: a continued frontier written while decoding
    # (every 16 tokens) holds more than the prompt's end.
    part = LONG_REPLY[:40] + "Something else."
    events, _ = run(srv, srv.chat([*FIRST, assistant(part), user("And now?")]))
    assert prompt_ready(events).source == "disk-text"
    assert prompt_ready(events).cached_tokens > len(first.prompt_tokens)


def test_after_a_restart_the_disk_has_the_prompt_ends_memory_kept() -> None:
    srv = server()
    first = srv.chat(FIRST)
    run(srv, first)
    run(srv, srv.chat(CONTINUED))
    srv.worker.shutdown()  # the live state, then what memory kept
    assert (SaveReason.SHUTDOWN, len(first.prompt_tokens)) in srv.saved()

    again = server(store=srv.store)
    events, _ = run(again, again.chat(CONTINUED))
    assert prompt_ready(events).source == "disk-text"
    assert prompt_ready(events).cached_tokens >= len(first.prompt_tokens)
    events, _ = run(again, again.chat(FIRST))
    assert prompt_ready(events).source in ("disk-text", "memory-checkpoint")
    assert prompt_ready(events).cached_tokens == len(first.prompt_tokens)


# ---- the context limit ----------------------------------------------------------


def test_a_reply_cut_by_the_context_is_reported_and_one_cut_by_max_tokens_is_not() -> None:
    srv = server(disk=False, ctx=1400)
    warned: list[str] = []
    srv.worker.warn = warned.append
    events, _ = run(srv, srv.chat(FIRST))
    assert finished(events).finish == "length"
    (line,) = warned
    assert "reply stopped at the context limit" in line and "ctx 1400" in line
    warned.clear()
    events, _ = run(srv, srv.chat(FIRST, max_tokens=5))
    assert finished(events).finish == "length" and warned == []
