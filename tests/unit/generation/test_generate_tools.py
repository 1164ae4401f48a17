"""Tool calls in the decode loop: greedy structure, live call events, forced </think>."""

from __future__ import annotations

from collections.abc import Sequence

from tests.support.fake_compute import FakeComputeSession, Scripted
from tests.support.sessions import prefilled
from tests.unit.generation.byte_tokenizer import VOCAB
from tests.unit.generation.scripts import EOS, PROMPT, TOKENIZER, SpeechScript

from ds4.domain.engine.session import EngineSession
from ds4.domain.generation.events import (
    Finished,
    GenerationEvent,
    TextDelta,
    ToolCallArguments,
    ToolCallFinished,
    ToolCallStarted,
)
from ds4.domain.generation.loop import TurnSettings, decode_turn, generate
from ds4.domain.sampling import SamplingParams

D = "｜DSML｜"
BLOCK = (
    f"\n\n<{D}tool_calls>\n"
    f'<{D}invoke name="get_weather">\n'
    f'<{D}parameter name="city" string="true">Paris & Nice</{D}parameter>\n'
    f'<{D}parameter name="days" string="false">[1, 2]</{D}parameter>\n'
    f"</{D}invoke>\n"
    f'<{D}invoke name="now">\n'
    f"</{D}invoke>\n"
    f"</{D}tool_calls>"
)
HOT = SamplingParams(temperature=50.0, seed=7)  # near-uniform unless the logit margin is huge


def run(script: SpeechScript, settings: TurnSettings, ctx: int = 1024) -> list[GenerationEvent]:
    session = EngineSession(FakeComputeSession(vocab=VOCAB, ctx=ctx, script=script))
    return list(generate(session, PROMPT, TOKENIZER, settings))


def finished(events: Sequence[GenerationEvent]) -> Finished:
    last = events[-1]
    assert isinstance(last, Finished)
    return last


def test_tool_block_streams_calls_and_stops_after_the_close_tag() -> None:
    script = SpeechScript([("Let me check.  " + BLOCK + "\n\nAFTER", 30.0)])
    events = run(script, TurnSettings(tools_active=True))
    done = finished(events)
    assert done.finish == "tool_calls"
    assert "AFTER" not in done.text
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == done.content
    assert done.content == "Let me check."
    assert [c.name for c in done.tool_calls] == ["get_weather", "now"]
    assert done.tool_calls[0].arguments == '{"city":"Paris & Nice","days":[1,2]}'
    started = [e for e in events if isinstance(e, ToolCallStarted)]
    assert [(e.index, e.name) for e in started] == [(0, "get_weather"), (1, "now")]
    fragments = [e.fragment for e in events if isinstance(e, ToolCallArguments)]
    assert len(fragments) == 6  # "{", two parameters, "}", then "{" "}"
    for index, call in enumerate(done.tool_calls):
        by_index = [
            e.fragment for e in events if isinstance(e, ToolCallArguments) and e.index == index
        ]
        assert "".join(by_index) == call.arguments
    ends = [e for e in events if isinstance(e, ToolCallFinished)]
    assert [e.call for e in ends] == list(done.tool_calls)
    # Each call's Started comes before its fragments, which come before its Finished.
    tool_types = (ToolCallStarted, ToolCallArguments, ToolCallFinished)
    order = [type(e).__name__ for e in events if isinstance(e, tool_types)]
    assert order[0] == "ToolCallStarted" and order[-1] == "ToolCallFinished"


def test_without_tools_dsml_is_plain_text() -> None:
    script = SpeechScript([("Hi" + BLOCK, 30.0)])
    done = finished(run(script, TurnSettings(tools_active=False)))
    assert done.finish == "stop"
    assert done.tool_calls == ()
    assert done.content == "Hi" + BLOCK


def _weakly_scripted_block() -> SpeechScript:
    """The block's structure has a tiny margin: only greedy sampling writes it."""
    head, rest = BLOCK.split(f"<{D}tool_calls>", 1)
    value_start = rest.index("Paris")
    value_end = rest.index(f"</{D}parameter>") + 2  # "</" is still sampled as payload
    return SpeechScript(
        [
            ("ok" + head + f"<{D}tool_calls>", 1000.0),
            (rest[:value_start], 0.5),
            (rest[value_start:value_end], 1000.0),
            (rest[value_end:], 0.5),
        ]
    )


def test_structure_is_sampled_greedily_even_at_high_temperature() -> None:
    done = finished(run(_weakly_scripted_block(), TurnSettings(HOT, tools_active=True)))
    assert done.finish == "tool_calls"
    assert (
        done.text
        == "ok"
        + BLOCK.split(f'<{D}invoke name="now">', maxsplit=1)[0]
        + done.text[len("ok" + BLOCK.split(f'<{D}invoke name="now">', maxsplit=1)[0]) :]
    )
    assert done.tool_calls[0].name == "get_weather"


def test_the_same_weak_structure_without_tools_goes_astray() -> None:
    done = finished(run(_weakly_scripted_block(), TurnSettings(HOT, tools_active=False)))
    assert not done.text.startswith("ok" + BLOCK[:60])


class ForcedCloseScript:
    """Reasoning that starts a tool call, then (after the forced </think>) the real call."""

    def __init__(self) -> None:
        self.before = TOKENIZER.encode(
            "I should call it.\n" + f'<{D}tool_calls>\n<{D}invoke name="now">'
        )
        self.forced = TOKENIZER.encode("</think>\n\n")
        self.after = TOKENIZER.encode(BLOCK.lstrip("\n"))

    def __call__(self, history: Sequence[int]) -> Scripted | None:
        generated = list(history[len(PROMPT) :])
        n = len(self.before)
        if generated[n : n + len(self.forced)] == self.forced:
            k = len(generated) - n - len(self.forced)
            return Scripted(self.after[k] if k < len(self.after) else EOS)
        k = len(generated)
        return Scripted(self.before[k] if k < len(self.before) else EOS)


def test_call_begun_inside_reasoning_forces_think_close_and_is_reissued() -> None:
    script = ForcedCloseScript()
    session = EngineSession(FakeComputeSession(vocab=VOCAB, ctx=1024, script=script))
    settings = TurnSettings(thinking=True, tools_active=True)
    events = list(generate(session, PROMPT, TOKENIZER, settings))
    done = finished(events)
    assert done.finish == "tool_calls"
    assert [c.name for c in done.tool_calls] == ["get_weather", "now"]
    assert "</think>\n\n" in done.text
    assert done.reasoning is not None and done.reasoning.startswith("I should call it.")
    assert done.usage.completion_tokens == len(done.tokens) == len(session.tokens) - len(PROMPT)


def test_on_token_follows_every_evaluated_token_forced_ones_included() -> None:
    session = EngineSession(FakeComputeSession(vocab=VOCAB, ctx=1024, script=ForcedCloseScript()))
    settings = TurnSettings(thinking=True, tools_active=True)
    prefilled(session, PROMPT)
    seen: list[tuple[int, int]] = []  # (token, live length when the callback ran)
    events = decode_turn(
        session,
        TOKENIZER,
        settings,
        prompt_tokens=len(PROMPT),
        on_token=lambda token: seen.append((token, session.pos)),
    )
    done = finished(list(events))
    assert [token for token, _ in seen] == list(done.tokens)
    assert [pos for _, pos in seen] == list(range(len(PROMPT) + 1, session.pos + 1))
