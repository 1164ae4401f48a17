"""A visible transcript names a state that lacks the transcript's final EOS (sampled,
never evaluated: docs/reference/server.md §5.3), so what a continuation evaluates
starts with that EOS: the live binding, a memory checkpoint kept under a transcript,
and a disk file keyed by one all continue with the prompt a full replay renders."""

from __future__ import annotations

from ds4.domain.chat import EOS
from ds4.domain.serving.live import Binding, after_visible


def test_the_suffix_starts_with_the_unevaluated_eos() -> None:
    visible = "<prompt>answer" + EOS
    prompt = visible + "<user>more<assistant>"
    assert after_visible(visible, prompt) == EOS + "<user>more<assistant>"
    assert Binding(5, visible).visible_prefix(prompt) == EOS + "<user>more<assistant>"


def test_a_transcript_without_a_final_eos_is_cut_where_it_ends() -> None:
    assert after_visible("<prompt>answer", "<prompt>answer more") == " more"
    assert Binding(5, "abc").visible_prefix("abd") is None
