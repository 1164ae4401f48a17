"""Tool-output validation, live tails and the bindings' post-processing
(docs/reference/server.md §5, §5.3–5.4)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ds4.domain.chat import EOS, ThinkMode
from ds4.domain.dsml.syntax import ToolCall
from ds4.domain.errors import RequestError
from ds4.domain.generation.events import Finished, FinishReason, Usage
from ds4.domain.kvcache.kv_file import KvcFlags
from ds4.domain.serving.exchange import Api, GenerationRequest
from ds4.domain.serving.live import (
    Binding,
    LiveBindings,
    TurnFacts,
    anthropic_tail,
    responses_tail,
    validate_tool_outputs,
    validate_tool_results,
)
from ds4.domain.serving.prepare import live_plan
from ds4.wire.anthropic import parse_messages
from ds4.wire.replies import http_status
from ds4.wire.responses_request import parse_responses

LS = [{"type": "function", "name": "exec_command", "parameters": {"type": "object"}}]


def responses(items: list[Any]) -> GenerationRequest:
    return parse_responses(json.dumps({"input": items, "tools": LS}).encode()).generation


def anthropic(messages: list[Any], **fields: Any) -> GenerationRequest:
    return parse_messages(json.dumps({"messages": messages, **fields}).encode()).generation


def output(call_id: str) -> dict[str, str]:
    return {"type": "function_call_output", "call_id": call_id, "output": "/tmp"}


def call(call_id: str, reasoning: str | None = None) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = [{"role": "user", "content": "where?"}]
    if reasoning is not None:
        items.append(
            {"type": "reasoning", "summary": [{"type": "summary_text", "text": reasoning}]}
        )
    fc = {"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": call_id}
    return [*items, fc]


def test_responses_live_tail_renders_tool_outputs_only_a71() -> None:
    request = responses([output("call_live")])
    ids, suffix = responses_tail(request.messages, ThinkMode.HIGH)
    assert ids == ("call_live",)
    assert suffix.startswith("<｜end▁of▁sentence｜><｜User｜><tool_result>")
    assert "/tmp</tool_result>" in suffix and suffix.endswith("<｜Assistant｜><think>")
    assert "exec_command" not in suffix


def test_responses_tail_with_a_replayed_call_takes_its_ids_and_instructions_end_it() -> None:
    request = responses([*call("call_a"), output("call_a")])
    assert responses_tail(request.messages, ThinkMode.HIGH)[0] == ("call_a",)
    body = {"input": [output("call_a")], "instructions": "be brief"}
    with_system = parse_responses(json.dumps(body).encode()).generation
    assert responses_tail(with_system.messages, ThinkMode.HIGH) == ((), "")  # [QUIRK] -> 409


def test_responses_tool_output_id_validation_a72() -> None:
    with pytest.raises(RequestError) as refused:
        validate_tool_outputs(responses([output("call_x")]).messages, {"call_live"}, True)
    assert http_status(refused.value.kind) == 400
    assert refused.value.message == (
        "Responses continuation state is not available for call_id call_x; "
        "retry by replaying the full input history"
    )
    flags = validate_tool_outputs(responses([output("call_live")]).messages, {"call_live"}, True)
    assert flags == (True, False)


def test_stateless_replay_without_reasoning_requires_live_reasoning_a73() -> None:
    bare = responses([*call("call_a"), output("call_a")]).messages
    assert validate_tool_outputs(bare, set(), True) == (False, True)
    assert validate_tool_outputs(bare, {"call_a"}, True) == (False, True)
    reasoned = responses([*call("call_a", "think first"), output("call_a")]).messages
    assert validate_tool_outputs(reasoned, set(), True) == (False, False)
    assert validate_tool_outputs(bare, set(), False) == (False, False)


def test_anthropic_live_tail_renders_tool_results_only_a67() -> None:
    result = {"type": "tool_result", "tool_use_id": "toolu_live", "content": "/tmp"}
    request = anthropic([{"role": "user", "content": [result]}], system="sys")
    ids, suffix = anthropic_tail(request.messages, ThinkMode.HIGH)  # the system comes last
    assert ids == ("toolu_live",)
    assert suffix.startswith("<｜end▁of▁sentence｜><｜User｜><tool_result>")
    assert "/tmp</tool_result>" in suffix and "<｜Assistant｜><think>" in suffix
    assert "sys" not in suffix


def test_anthropic_tool_result_validation_a68_a69_a70() -> None:
    result = {"type": "tool_result", "tool_use_id": "toolu_old", "content": "/tmp"}
    results_only = anthropic([{"role": "user", "content": [result]}]).messages
    with pytest.raises(RequestError) as refused:
        validate_tool_results(results_only, {"toolu_live"})
    assert http_status(refused.value.kind) == 400
    assert refused.value.message.startswith(
        "Anthropic continuation state is not available for tool_use_id toolu_old; retry by"
    )
    assert validate_tool_results(results_only, {"toolu_old"}) is True
    use = {"type": "tool_use", "id": "toolu_old", "name": "ls", "input": {}}
    replay = [
        {"role": "user", "content": "where?"},
        {"content": [use], "role": "assistant"},  # content before role
        {"role": "user", "content": [result]},
    ]
    assert validate_tool_results(anthropic(replay).messages, {"toolu_live"}) is False


def test_live_plan_uses_the_bindings_known_ids() -> None:
    bindings = LiveBindings()
    request = responses([output("call_a")])
    with pytest.raises(RequestError):
        live_plan(request, ThinkMode.HIGH, bindings)
    bindings.responses = Binding(10, "v", frozenset({"call_a"}))
    plan = live_plan(request, ThinkMode.HIGH, bindings)
    assert plan.call_ids == ("call_a",) and plan.requires_live_tool_state


CALL = ToolCall("exec_command", '{"cmd":"ls"}', "call_a")
DSML = "\n\n<｜DSML｜tool_calls>sampled</｜DSML｜tool_calls>"


def facts(api: Api, prompt: str = "P<think>", **fields: Any) -> TurnFacts:
    base: dict[str, Any] = {
        "thinking": True,
        "tools_active": True,
        "preserves_reasoning": True,
        "reasoning_summary": False,
        "pos": 40,
    }
    return TurnFacts(api=api, prompt_text=prompt, **{**base, **fields})


def finished(
    finish: FinishReason = "stop", calls: tuple[ToolCall, ...] = (), text: str = ""
) -> Finished:
    raw = DSML if calls else None
    return Finished(finish, "answer", "tool summary", calls, Usage(30, 0, 10), text, raw_dsml=raw)


def test_responses_visible_suffix_matches_the_client_replay_a74() -> None:
    bindings = LiveBindings()
    bindings.after_turn(facts(Api.RESPONSES, "P<think>"), finished())
    assert bindings.responses == Binding(40, "P<think></think>answer" + EOS, frozenset())
    summaries = facts(Api.RESPONSES, "P<think>", reasoning_summary=True)
    bindings.after_turn(summaries, finished("tool_calls", (CALL,)))
    assert bindings.responses is not None
    assert bindings.responses.visible == "P<think>tool summary</think>answer" + DSML + EOS
    assert bindings.responses.call_ids == {"call_a"}
    bindings.after_turn(summaries, finished("length"))
    assert bindings.responses is None


def test_anthropic_binding_holds_ids_only_after_calls() -> None:
    bindings = LiveBindings()
    bindings.after_turn(facts(Api.ANTHROPIC), finished("tool_calls", (CALL,)))
    assert bindings.anthropic == Binding(40, "", frozenset({"call_a"}))
    bindings.after_turn(facts(Api.ANTHROPIC), finished())
    assert bindings.anthropic is None


def test_thinking_binding_gate_a_tool_less_closed_thinking_turn() -> None:
    toolless = {"tools_active": False, "preserves_reasoning": False}
    bindings = LiveBindings()
    bindings.after_turn(facts(Api.CHAT, "P<a><think>", **toolless), finished(text="r</think>x"))
    assert bindings.thinking == Binding(40, "P<a></think>answer" + EOS)
    for turn, end in [
        (facts(Api.CHAT, "P<a><think>"), finished(text="r</think>x")),  # tool context
        (facts(Api.CHAT, "P<a><think>", **toolless), finished(text="still thinking")),
        (facts(Api.CHAT, "P<a><think>", **toolless), finished("error", text="r</think>")),
        (facts(Api.CHAT, "P<a></think>", **toolless), finished(text="x")),  # no <think> end
    ]:
        bindings.thinking = Binding(1, "v")
        bindings.after_turn(turn, end)
        assert bindings.thinking is None


def test_keep_only_and_the_visible_disk_key() -> None:
    bindings = LiveBindings()
    bindings.responses = Binding(40, "resp", frozenset({"a"}))
    bindings.thinking = Binding(40, "think")
    bindings.anthropic = Binding(40, "", frozenset({"b"}))
    key = bindings.disk_key(40)
    assert key is not None and (key.text, key.flags) == ("resp", KvcFlags.RESPONSES_VISIBLE)
    assert bindings.disk_key(41) is None
    bindings.keep_only("thinking-visible")
    assert bindings.known_ids(Api.RESPONSES) == bindings.known_ids(Api.ANTHROPIC) == frozenset()
    key = bindings.disk_key(40)
    assert key is not None and (key.text, key.flags) == ("think", KvcFlags.THINKING_VISIBLE)
    bindings.keep_only("memory-token")
    assert bindings.disk_key(40) is None
