"""A visible transcript names a state that lacks the transcript's final EOS (sampled,
never evaluated: docs/reference/server.md §5.3), so what a continuation evaluates
starts with that EOS: the live binding, a memory checkpoint kept under a transcript,
and a disk file keyed by one all continue with the prompt a full replay renders."""

from __future__ import annotations

from ds4.domain.chat import EOS, THINK, UNTHINK
from ds4.domain.generation.events import Finished, Usage
from ds4.domain.serving.exchange import Api
from ds4.domain.serving.live import Binding, TurnFacts, after_visible, responses_visible


def test_the_suffix_starts_with_the_unevaluated_eos() -> None:
    visible = "<prompt>answer" + EOS
    prompt = visible + "<user>more<assistant>"
    assert after_visible(visible, prompt) == EOS + "<user>more<assistant>"
    assert Binding(5, visible).visible_prefix(prompt) == EOS + "<user>more<assistant>"


def test_a_transcript_without_a_final_eos_is_cut_where_it_ends() -> None:
    assert after_visible("<prompt>answer", "<prompt>answer more") == " more"
    assert Binding(5, "abc").visible_prefix("abd") is None


def _turn(thinking: bool, tool_context: bool) -> TurnFacts:
    return TurnFacts(
        api=Api.RESPONSES,
        prompt_text="<p>" + THINK,
        thinking=thinking,
        tools_active=tool_context,
        preserves_reasoning=tool_context,
        reasoning_summary=False,
        pos=9,
    )


def test_a_thinking_turn_without_tool_context_is_remembered_as_its_replay_renders() -> None:
    finished = Finished("stop", "hi", "pondering", (), Usage(3, 0, 2))
    assert responses_visible(_turn(True, False), finished) == "<p>" + UNTHINK + "hi" + EOS
    with_tools = responses_visible(_turn(True, True), finished)
    assert with_tools == "<p>" + THINK + UNTHINK + "hi" + EOS  # reasoning kept, not shown
    plain = TurnFacts(Api.RESPONSES, "<p>", False, False, False, False, 9)
    assert responses_visible(plain, finished) == "<p>hi" + EOS
