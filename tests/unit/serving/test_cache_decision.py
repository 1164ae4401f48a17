"""The worker's cache decision order (docs/reference/server.md §4.2, §5) with a one-token-per-
character tokenizer, so token counts and text lengths can be read off the strings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import pytest

from ds4.domain.chat import ThinkMode, UserMessage
from ds4.domain.errors import ErrorKind, RequestError
from ds4.domain.serving.exchange import Api, GenerationRequest
from ds4.domain.serving.live import NO_PLAN, Binding, LiveBindings, LivePlan
from ds4.domain.serving.prepare import PreparedJob, cache_decision
from ds4.domain.tools import ReplayStats
from ds4.ports.tokenizer import Tokenizer
from ds4.wire.replies import http_status


class CharTokenizer:
    def encode(self, text: str) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(chr(i) for i in ids)


TOKENIZER = cast(Tokenizer, CharTokenizer())


def tokens(text: str) -> tuple[int, ...]:
    return tuple(ord(c) for c in text)


def job(api: Api, prompt_text: str, plan: LivePlan = NO_PLAN) -> PreparedJob:
    request = GenerationRequest(api, "m", (UserMessage("x"),), (), ThinkMode.HIGH, None)
    return PreparedJob(
        request, ThinkMode.HIGH, prompt_text, tokens(prompt_text), ReplayStats(), plan
    )


# The live state holds the hidden reasoning; the client's visible replay differs.
LIVE = "<u>q<a><think>hidden</think>call<eos>"
VISIBLE = "<u>q<a><think></think>call<eos>"


def bound(**bindings: Binding) -> LiveBindings:
    live = LiveBindings()
    for name, binding in bindings.items():
        setattr(live, name, binding)
    return live


def test_responses_visible_prefix_appends_only_the_suffix() -> None:
    bindings = bound(responses=Binding(len(LIVE), VISIBLE, frozenset({"call_a"})))
    prompt = VISIBLE + "<u>result<a><think>"
    plan = LivePlan(("call_a",), "<eos><u>result<a><think>")
    decision = cache_decision(tokens(LIVE), job(Api.RESPONSES, prompt, plan), TOKENIZER, bindings)
    assert decision.source == "responses-visible"
    assert decision.tokens == tokens(LIVE) + tokens("<u>result<a><think>")
    assert decision.common == len(LIVE)
    assert "match=visible-prefix ids=1" in decision.note
    other_ids = job(Api.RESPONSES, prompt, LivePlan(("call_b",), "s"))
    assert "ids=0" in cache_decision(tokens(LIVE), other_ids, TOKENIZER, bindings).note


def test_a_binding_matches_only_at_the_live_position() -> None:
    bindings = bound(responses=Binding(len(LIVE) - 1, VISIBLE, frozenset({"call_a"})))
    prompt = VISIBLE + "<u>result<a><think>"
    plan = LivePlan(("call_a",), "<eos><u>result<a><think>")
    decision = cache_decision(tokens(LIVE), job(Api.RESPONSES, prompt, plan), TOKENIZER, bindings)
    assert decision.source == "none"


def test_visible_text_must_be_strictly_shorter_than_the_prompt() -> None:
    bindings = bound(responses=Binding(len(LIVE), VISIBLE))
    decision = cache_decision(tokens(LIVE), job(Api.RESPONSES, VISIBLE), TOKENIZER, bindings)
    assert decision.source == "none"


def test_responses_tool_output_ids_continue_with_the_prepared_tail() -> None:
    bindings = bound(responses=Binding(len(LIVE), VISIBLE, frozenset({"call_a", "call_b"})))
    plan = LivePlan(("call_b", "call_a"), "<eos><u>r1r2<a><think>", requires_live_tool_state=True)
    decision = cache_decision(
        tokens(LIVE), job(Api.RESPONSES, "<u>r1r2<a><think>", plan), TOKENIZER, bindings
    )
    assert decision.source == "responses-tool-output"
    assert decision.tokens == tokens(LIVE) + tokens("<eos><u>r1r2<a><think>")
    assert "match=tool-output-ids ids=2" in decision.note


@pytest.mark.parametrize("ids", [("call_a",), ("call_a", "call_b", "call_c"), ("call_a", "x")])
def test_tool_output_ids_need_the_same_set(ids: tuple[str, ...]) -> None:
    bindings = bound(responses=Binding(len(LIVE), VISIBLE, frozenset({"call_a", "call_b"})))
    plan = LivePlan(ids, "<eos><u>r<a><think>")
    decision = cache_decision(tokens(LIVE), job(Api.RESPONSES, "<u>r", plan), TOKENIZER, bindings)
    assert decision.source == "none"


def test_anthropic_tool_use_ids_continue_and_ignore_the_responses_binding() -> None:
    ids = frozenset({"toolu_a"})
    bindings = bound(anthropic=Binding(len(LIVE), "", ids), responses=Binding(len(LIVE), "", ids))
    plan = LivePlan(("toolu_a",), "<eos><u>r<a><think>")
    anthropic = cache_decision(tokens(LIVE), job(Api.ANTHROPIC, "x", plan), TOKENIZER, bindings)
    assert anthropic.source == "anthropic-tool-output"
    assert "anthropic live continuation match=tool-output-ids ids=1" in anthropic.note
    chat = cache_decision(tokens(LIVE), job(Api.CHAT, "x", plan), TOKENIZER, bindings)
    assert chat.source == "none"


GONE = "continuation state is not available; retry by replaying the full"


@pytest.mark.parametrize(
    ("api", "message"),
    [
        (Api.RESPONSES, f"Responses {GONE} input history"),
        (Api.ANTHROPIC, f"Anthropic {GONE} messages history"),
    ],
)
def test_required_live_tool_state_that_is_gone_is_409(api: Api, message: str) -> None:
    bindings = bound(
        responses=Binding(len(LIVE) + 5, "", frozenset({"id_a"})),
        anthropic=Binding(len(LIVE) + 5, "", frozenset({"id_a"})),
    )
    plan = LivePlan(("id_a",), "<eos><u>r<a><think>", requires_live_tool_state=True)
    with pytest.raises(RequestError) as refused:
        cache_decision(tokens(LIVE), job(api, LIVE + "more", plan), TOKENIZER, bindings)
    assert refused.value.kind is ErrorKind.CONFLICT and refused.value.message == message
    assert http_status(refused.value.kind) == 409


def test_exact_token_prefix_comes_before_the_thinking_binding() -> None:
    bindings = bound(thinking=Binding(len(LIVE), VISIBLE))
    decision = cache_decision(tokens(LIVE), job(Api.CHAT, LIVE + "<u>next"), TOKENIZER, bindings)
    assert decision.source == "memory-token"
    assert decision.tokens == tokens(LIVE + "<u>next")


@pytest.mark.parametrize("api", [Api.CHAT, Api.ANTHROPIC])
def test_thinking_binding_matches_the_reasoning_free_replay(api: Api) -> None:
    bindings = bound(thinking=Binding(len(LIVE), VISIBLE))
    decision = cache_decision(tokens(LIVE), job(api, VISIBLE + "<u>next"), TOKENIZER, bindings)
    assert decision.source == "thinking-visible"
    assert decision.tokens == tokens(LIVE) + tokens("<u>next")
    assert decision.note.startswith("thinking live continuation match=visible-prefix")


def test_thinking_binding_is_not_for_responses() -> None:
    bindings = bound(thinking=Binding(len(LIVE), VISIBLE))
    decision = cache_decision(
        tokens(LIVE), job(Api.RESPONSES, VISIBLE + "<u>next"), TOKENIZER, bindings
    )
    assert decision.source == "none"


def test_live_text_prefix_then_miss() -> None:
    live = (*tokens("ab"), ord("c") + 1000)  # a token whose text the renderer spells "c"

    class MergingTokenizer(CharTokenizer):
        def decode(self, ids: Sequence[int]) -> str:
            return "".join(chr(i - 1000 if i > 1000 else i) for i in ids)

    merging = cast(Tokenizer, MergingTokenizer())
    text = cache_decision(live, job(Api.CHAT, "abcd"), merging, LiveBindings())
    assert text.source == "memory-text" and text.tokens == (*live, ord("d"))
    miss = cache_decision(live, job(Api.CHAT, "xyz"), merging, LiveBindings())
    assert miss.source == "none" and miss.tokens == tokens("xyz") and miss.common == 0
