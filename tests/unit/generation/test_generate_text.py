"""decode_turn / generate on plain text: deltas, stop strings, UTF-8, budgets, usage."""

from __future__ import annotations

from collections.abc import Iterable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.support.fake_compute import FakeComputeSession
from tests.support.sessions import prefilled
from tests.unit.generation.byte_tokenizer import VOCAB
from tests.unit.generation.scripts import EOS, PROMPT, TOKENIZER, SpeechScript, speaking

from ds4.domain.engine.session import EngineSession
from ds4.domain.generation.events import (
    Finished,
    GenerationEvent,
    PrefillProgress,
    ReasoningDelta,
    TextDelta,
)
from ds4.domain.generation.loop import TurnSettings, decode_tokens, generate
from ds4.domain.sampling import SamplingParams


def run(
    session: EngineSession, settings_: TurnSettings, prompt: list[int] = PROMPT
) -> list[GenerationEvent]:
    return list(generate(session, prompt, TOKENIZER, settings_))


def text_of(events: Iterable[GenerationEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, TextDelta))


def reasoning_of(events: Iterable[GenerationEvent]) -> str:
    return "".join(e.text for e in events if isinstance(e, ReasoningDelta))


def final(events: list[GenerationEvent]) -> Finished:
    assert isinstance(events[-1], Finished)
    assert sum(isinstance(e, Finished) for e in events) == 1
    return events[-1]


def test_text_streams_and_eos_ends_the_turn_without_being_evaluated() -> None:
    session, compute = speaking("Hello, world")
    events = run(session, TurnSettings())
    done = final(events)
    assert text_of(events) == done.content == "Hello, world"
    assert done.finish == "stop"
    assert EOS not in compute.evaluated
    assert list(session.tokens) == PROMPT + TOKENIZER.encode("Hello, world")
    assert done.usage.prompt_tokens == len(PROMPT)
    assert done.usage.completion_tokens == len("Hello, world")


def test_utf8_split_across_tokens_never_breaks_a_character() -> None:
    text = "héllo 日本語 🎉!"
    session, _ = speaking(text)
    events = run(session, TurnSettings())
    deltas = [e.text for e in events if isinstance(e, TextDelta)]
    assert "".join(deltas) == text
    assert all("\ufffd" not in d for d in deltas)
    assert len(deltas) > 5  # streamed, not one blob


def test_budget_ends_with_length() -> None:
    session, _ = speaking("abcdefghij")
    done = final(run(session, TurnSettings(max_tokens=4)))
    assert (done.finish, done.content, done.usage.completion_tokens) == ("length", "abcd", 4)


def test_zero_budget_generates_nothing() -> None:
    session, _ = speaking("abc")
    done = final(run(session, TurnSettings(max_tokens=0)))
    assert (done.finish, done.content, done.tokens) == ("length", "", ())


def test_full_context_ends_with_length() -> None:
    session, _ = speaking("abcdefghij", ctx=len(PROMPT) + 3)
    done = final(run(session, TurnSettings()))
    assert (done.finish, done.content) == ("length", "abc")


def test_stop_string_split_across_tokens_is_cut_and_never_shown() -> None:
    session, _ = speaking("one two STOP three")
    events = run(session, TurnSettings(stops=("STOP",)))
    done = final(events)
    assert text_of(events) == done.content == "one two "
    assert (done.finish, done.stop) == ("stop", "STOP")
    assert "three" not in done.text


def test_earliest_stop_string_wins() -> None:
    session, _ = speaking("xx abcd ef")
    done = final(run(session, TurnSettings(stops=("cd ef", "d"))))
    assert (done.content, done.stop) == ("xx abc", "d")


def test_stop_strings_never_match_inside_reasoning() -> None:
    session, _ = speaking("I must not say END here.</think>The answer END ignored")
    events = run(session, TurnSettings(thinking=True, stops=("END",)))
    done = final(events)
    assert reasoning_of(events) == done.reasoning == "I must not say END here."
    assert text_of(events) == done.content == "The answer "
    assert done.finish == "stop"


def test_reasoning_and_text_split_at_the_first_think_close() -> None:
    session, _ = speaking("<think>plan</think>answer</think>more")
    events = run(session, TurnSettings(thinking=True))
    done = final(events)
    assert reasoning_of(events) == done.reasoning == "plan"
    assert text_of(events) == done.content == "answer</think>more"
    assert done.usage.reasoning_tokens == 1 + len("plan") + 1  # <think> and </think> are one each


def test_without_thinking_a_think_close_is_text_streamed_and_final() -> None:
    session, _ = speaking("a</think>b")
    events = run(session, TurnSettings(thinking=False))
    done = final(events)
    assert text_of(events) == done.content == "a</think>b"
    assert (reasoning_of(events), done.reasoning, done.usage.reasoning_tokens) == ("", None, 0)


def test_truncated_reasoning_stays_reasoning() -> None:
    session, _ = speaking("still thinking about it")
    events = run(session, TurnSettings(thinking=True, max_tokens=8))
    done = final(events)
    assert reasoning_of(events) == done.reasoning == "still th"
    assert (done.content, done.finish) == ("", "length")


def test_prefill_progress_then_cached_tokens_on_the_next_turn() -> None:
    session, _ = speaking("ok", chunk=4)
    events = run(session, TurnSettings())
    progress = [e for e in events if isinstance(e, PrefillProgress)]
    assert progress[-1] == PrefillProgress(len(PROMPT), len(PROMPT))
    assert [p.done for p in progress] == sorted(p.done for p in progress)
    live = list(session.tokens)
    follow_up = live + TOKENIZER.encode("<｜User｜>more")
    done = final(run(session, TurnSettings(max_tokens=1), follow_up))
    assert done.usage.cached_tokens == len(live) == len(PROMPT) + 2


def test_cancel_between_tokens() -> None:
    session, _ = speaking("abcdefgh")
    calls = 0

    def cancel() -> bool:
        nonlocal calls
        calls += 1
        return calls > 3

    done = final(list(generate(session, PROMPT, TOKENIZER, TurnSettings(), cancel=cancel)))
    assert done.finish == "cancelled"
    assert 0 < done.usage.completion_tokens < 8


def test_cancel_during_prefill_finishes_cancelled() -> None:
    session, compute = speaking("abc", chunk=2)
    events = list(generate(session, PROMPT, TOKENIZER, TurnSettings(), cancel=lambda: True))
    assert final(events).finish == "cancelled"
    assert compute.evaluated == []


def test_engine_failure_mid_turn_finishes_with_error() -> None:
    compute = FakeComputeSession(
        vocab=VOCAB, ctx=512, script=SpeechScript([("abcdef", 30.0)]), fail_after=len(PROMPT) + 2
    )
    done = final(run(EngineSession(compute), TurnSettings()))
    assert (done.finish, done.content) == ("error", "ab")
    assert done.error == "fake engine failure"


def test_sampling_is_reproducible_per_seed() -> None:
    def once(seed: int) -> tuple[int, ...]:
        session = EngineSession(FakeComputeSession(vocab=VOCAB, ctx=256))
        return final(run(session, TurnSettings(SamplingParams(seed=seed), max_tokens=20))).tokens

    assert once(42) == once(42)
    assert once(42) != once(43)


def test_decode_tokens_is_the_plain_token_path() -> None:
    session, _ = speaking("xyz")
    prefilled(session, PROMPT)
    tokens = list(decode_tokens(session, SamplingParams(temperature=0), 10, eos=EOS))
    assert tokens == TOKENIZER.encode("xyz")


@settings(max_examples=80, deadline=None)
@given(
    body=st.text(alphabet="ab S\nTéP<", max_size=30),
    stops=st.lists(st.text(alphabet="abSTP", min_size=1, max_size=4), max_size=3),
)
@pytest.mark.parametrize("tools", [False, True])
def test_streamed_text_is_the_visible_content_cut_at_the_first_stop(
    tools: bool, body: str, stops: list[str]
) -> None:
    session, _ = speaking(body)
    events = run(session, TurnSettings(stops=tuple(stops), tools_active=tools))
    done = final(events)
    expected = body
    for end in range(len(body) + 1):  # the first token that completes a stop string ends it
        hits = [p for s in stops if (p := body.find(s, 0, end)) >= 0]
        if hits:
            expected = body[: min(hits)]
            break
    assert done.content == expected
    streamed = text_of(events)
    assert streamed == (
        expected.rstrip(" \t\n\r") if tools and "<tool_calls>" in body else expected
    )
