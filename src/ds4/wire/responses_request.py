"""POST /v1/responses bodies (docs/reference/server.md §2.7), with freeform custom
tools (ADR 0043); the reply side is responses_reply.py.

Input items are strict (an unexpected item or content part is a 400) while unknown
top-level fields are ignored, so Codex's `include` (but its logprobs value,
wire/logprobs.py), `prompt_cache_key`, `client_metadata`, `text`, and hosted tools such
as `web_search` pass. `store` and `previous_response_id` keep and continue responses
(wire/responses_state.py); `conversation` is refused.
Freeform custom tools become one-string-parameter functions (custom tools, below).
Reasoning items collect into a buffer that the next assistant-side item takes.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import replace

import msgspec

from ds4.domain.chat import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResultMessage,
    ToolSchema,
    UserMessage,
    canonical_json,
    tool_schema,
    unanswerable,
)
from ds4.domain.dsml.syntax import ToolCall, object_members, parse_json
from ds4.domain.errors import Ds4Error, RequestError
from ds4.domain.serving.exchange import Api, GenerationRequest
from ds4.wire.constraints import grammar_field, one_format, openai_tool_choice, text_format
from ds4.wire.logprobs import responses_logprobs
from ds4.wire.requests import (
    DEFAULT_MODEL,
    InvalidJsonError,
    ParsedRequest,
    ReplyOptions,
    WireTool,
    check_tool_count,
    clamp_int,
    decode_body,
    present,
    refuse_responses_part,
    responses_think_mode,
    sampling,
)
from ds4.wire.responses_state import stored_state

_TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})
_SUMMARIES = frozenset({"auto", "concise", "detailed"})
_CALL_ITEMS = {
    "function_call": None,
    "custom_tool_call": None,
    "local_shell_call": "local_shell",
    "web_search_call": "web_search_call",
    "tool_search_call": "tool_search",
    "image_generation_call": "image_generation_call",
}
_OUTPUT_ITEMS = frozenset(
    {
        "function_call_output",
        "custom_tool_call_output",
        "local_shell_call_output",
        "web_search_call_output",
        "tool_search_output",
        "tool_search_call_output",
        "image_generation_call_output",
    }
)
_EMPTY_PARAMETERS = {"type": "object", "properties": {}}
_ROLES = ("user", "system", "developer", "assistant")


def _named(kind: object, names: Collection[str]) -> bool:
    """`kind` is one of `names` (a list or object sent as a type is none of them)."""
    return isinstance(kind, str) and kind in names


def _malformed() -> RequestError:
    """An input value of a shape the endpoint does not take."""
    return RequestError("invalid JSON request")


def _refuse_input(message: str) -> RequestError:
    return RequestError(message, param="input")


class _Reasoning(msgspec.Struct):
    effort: str | None = None
    summary: str | None = None


class ResponsesBody(msgspec.Struct):
    """Every member the endpoint reads: the body is decoded once, into this."""

    model: str | None = None
    instructions: str | None = None
    max_output_tokens: int | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    stream: bool | None = None
    reasoning: _Reasoning | None = None
    tools: list[dict[str, object]] | None = None
    input: object = msgspec.UNSET
    tool_choice: object = None
    parallel_tool_calls: object = None
    text: object = msgspec.UNSET
    grammar: object = msgspec.UNSET
    previous_response_id: object = None
    conversation: object = None
    include: object = None  # read for its logprobs value only (wire/logprobs.py)
    top_logprobs: object = None
    store: object = None


def _text(value: object) -> str:
    """A content array / string / null as text; anything else is refused."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise _malformed()
    out: list[str] = []
    for part in value:
        if isinstance(part, str):
            out.append(part)
        elif isinstance(part, dict) and _named(part.get("type"), _TEXT_PARTS) and "text" in part:
            text = part["text"]
            if text is not None and not isinstance(text, str):
                raise _malformed()
            out.append(text or "")
        else:
            refuse_responses_part(part.get("type") if isinstance(part, dict) else None)
            raise InvalidJsonError("unsupported content part")
    return "".join(out)


def _raw(value: object) -> str:
    return value if isinstance(value, str) else msgspec.json.encode(value).decode()


class _Tools:
    """Schemas in prompt form plus the wire mapping back (namespaces, tool_search)."""

    def __init__(self) -> None:
        self.schemas: list[ToolSchema] = []
        self.wire: dict[str, WireTool] = {}

    def add(self, tools: object) -> None:
        if not isinstance(tools, list):
            raise _malformed()
        for tool in tools:
            if isinstance(tool, dict):
                self._add_one(tool)

    def _add_one(self, tool: dict[str, object]) -> None:
        kind = tool.get("type")
        if kind == "namespace":
            namespace = str(tool.get("name") or "")
            inner_tools = tool.get("tools")
            for inner in inner_tools if isinstance(inner_tools, list) else []:
                name = inner.get("name") if isinstance(inner, dict) else None
                if not isinstance(inner, dict) or inner.get("type", "function") != "function":
                    continue
                if isinstance(name, str) and name:
                    params = inner.get("parameters") or inner.get("input_schema")
                    self._put(
                        namespace + name,
                        {
                            "name": namespace + name,
                            "description": inner.get("description") or "",
                            "parameters": params or _EMPTY_PARAMETERS,
                        },
                        WireTool(name, namespace),
                    )
        elif kind == "tool_search":
            definition = {
                "name": "tool_search",
                "description": tool.get("description") or "Search available tools.",
                "parameters": tool.get("parameters") or _EMPTY_PARAMETERS,
            }
            self._put("tool_search", definition, WireTool("tool_search", hosted_tool_search=True))
        elif kind == "custom":
            definition = custom_tool_definition(tool)
            name = str(definition["name"])
            self._put(name, definition, WireTool(name, custom=True))
        elif kind in (None, "function") and isinstance(tool.get("name"), str):
            name = str(tool["name"])
            self._put(name, tool, WireTool(name))
        # other hosted tools (web_search, file_search, image_generation, ...) are
        # the provider's business; the model cannot call them here

    def _put(self, name: str, definition: dict[str, object], wire: WireTool) -> None:
        self.schemas = [s for s in self.schemas if s.name != name]
        self.schemas.append(tool_schema(definition))
        self.wire[name] = wire


class _Items:
    def __init__(self, tools: _Tools) -> None:
        self.messages: list[Message] = []
        self.pending: list[str] = []
        self.tools = tools

    def take_reasoning(self) -> str | None:
        reasoning = "\n".join(self.pending) if self.pending else None
        self.pending = []
        return reasoning

    def flush_reasoning(self) -> None:
        if self.pending:
            self.messages.append(AssistantMessage("", self.take_reasoning()))

    def add(self, index: int, item: object) -> None:
        if not isinstance(item, dict):
            raise _malformed()
        status = item.get("status")
        if status is not None and status != "completed":
            raise InvalidJsonError("input item status is not completed")
        kind = item.get("type", "message")
        if kind == "reasoning":
            for key in ("summary", "content"):
                text = _text(item.get(key))
                if text:
                    self.pending.append(text)
        elif kind in ("compaction", "context_compaction"):
            return
        elif kind == "message":
            self._message(index, item)
        elif _named(kind, _CALL_ITEMS):
            self._call(str(kind), item)
        elif _named(kind, _OUTPUT_ITEMS):
            self._output(str(kind), item)
        else:
            raise _refuse_input(f"input[{index}].type: unsupported input item type {kind!r}")

    def _message(self, index: int, item: dict[str, object]) -> None:
        role = item.get("role", "user")
        if role not in _ROLES:
            expected = ", ".join(_ROLES)
            raise _refuse_input(f"input[{index}].role: unknown role {role!r} (expected {expected})")
        content = _text(item.get("content"))
        if role == "assistant":
            self.messages.append(AssistantMessage(content, self.take_reasoning()))
            return
        self.flush_reasoning()
        if role in ("system", "developer"):
            self.messages.append(SystemMessage(content))
        else:
            self.messages.append(UserMessage(content))

    def _call(self, kind: str, item: dict[str, object]) -> None:
        name = _CALL_ITEMS[kind] or str(item.get("name") or "")
        if kind == "function_call" and isinstance(item.get("namespace"), str):
            name = str(item["namespace"]) + name
        for key in ("action", "arguments", "input"):
            if key in item and (key != "action" or _CALL_ITEMS[kind] is not None):
                arguments = _raw(item[key])
                if key == "input" and kind == "custom_tool_call":
                    arguments = custom_call_arguments(item[key])  # freeform text (ADR 0043)
                break
        else:
            arguments = "{}"
        tool_id = item.get("call_id") or item.get("id") or ""
        call = ToolCall(name, arguments, tool_id if isinstance(tool_id, str) else "")
        last = self.messages[-1] if self.messages else None
        if isinstance(last, AssistantMessage):
            reasoning = last.reasoning if last.reasoning is not None else self.take_reasoning()
            self.messages[-1] = msgspec.structs.replace(
                last, tool_calls=(*last.tool_calls, call), reasoning=reasoning
            )
        else:
            self.messages.append(AssistantMessage("", self.take_reasoning(), (call,)))

    def _output(self, kind: str, item: dict[str, object]) -> None:
        self.flush_reasoning()
        if kind == "tool_search_output" and "tools" in item:
            self.tools.add(item["tools"])
        value = next((item[k] for k in ("output", "result") if k in item), None)
        if value is None and "tools" in item:
            content = canonical_json(item["tools"])
        elif isinstance(value, list | str) or value is None:
            content = _text(value)
        else:
            content = _raw(value)
        tool_id = item.get("call_id") or item.get("id") or ""
        self.messages.append(
            ToolResultMessage(content, tool_call_id=tool_id if isinstance(tool_id, str) else "")
        )


def parse_responses(body: bytes) -> ParsedRequest:
    wire = decode_body(body, ResponsesBody)
    if not present(wire.input):
        raise RequestError("missing input")
    if not isinstance(wire.input, str | list):
        raise InvalidJsonError("input must be a string or an array")
    state = stored_state(wire.store, wire.previous_response_id, wire.conversation, wire.input)

    def resume(history: tuple[object, ...]) -> ParsedRequest:
        parsed = _parse(wire, history)
        return replace(parsed, stored=replace(state, history=history, resume=None))

    # with previous_response_id the request is parsed again, the stored items in front,
    # once the app has looked them up (resume); until then only its items are checked
    parsed = _parse(wire, (), check=state.previous_response_id is None)
    return replace(parsed, stored=replace(state, resume=resume))


def _parse(
    wire: ResponsesBody, history: tuple[object, ...], *, check: bool = True
) -> ParsedRequest:
    check_tool_count(len(wire.tools or ()))
    choice = openai_tool_choice(wire.tool_choice, wire.parallel_tool_calls)
    output_format = one_format(text_format(wire.text), grammar_field(wire.grammar))
    tools_enabled = choice.mode != "none"
    reasoning = wire.reasoning or _Reasoning()
    model = wire.model or DEFAULT_MODEL
    think_mode = responses_think_mode(model, reasoning.effort)
    tools = _Tools()
    items = _Items(tools)
    try:
        tools.add(wire.tools or [])
        for index, item in enumerate(history):
            items.add(index, item)
        raw_input = wire.input
        if isinstance(raw_input, str):
            items.flush_reasoning()
            items.messages.append(UserMessage(raw_input))
        elif isinstance(raw_input, list):
            for index, item in enumerate(raw_input):
                items.add(index, item)
        if items.pending:
            items.messages.append(AssistantMessage("", items.take_reasoning()))
    except RequestError:
        raise
    except Ds4Error as error:  # a tool schema that is not one
        raise InvalidJsonError(str(error)) from None
    messages = items.messages
    problem = unanswerable(messages) if check else None
    if problem is not None:
        raise _refuse_input(f"input: {problem}")
    if wire.instructions:
        messages.insert(0, SystemMessage(wire.instructions))
    max_tokens = wire.max_output_tokens if wire.max_output_tokens is not None else wire.max_tokens
    request = GenerationRequest(
        api=Api.RESPONSES,
        model=model,
        messages=tuple(messages),
        schemas=tuple(tools.schemas) if tools_enabled else (),
        think_mode=think_mode,
        max_tokens=clamp_int(max_tokens),
        sampling=sampling(wire.temperature, wire.top_p),
        stream=bool(wire.stream),
        reasoning_summary=reasoning.summary in _SUMMARIES,
        output_format=output_format,
        tool_choice=choice,
        logprobs=responses_logprobs(wire.include, wire.top_logprobs),
        keep_state=wire.store is not False,
    )
    return ParsedRequest(request, ReplyOptions(wire_tools=tools.wire))


# ---- custom tools ----------------------------------------------------------
# Responses freeform custom tools (`{"type":"custom","name","description","format"}`),
# ADR 0043.
#
# DeepSeek V4 only knows JSON-schema functions and DSML, so a custom tool is shown to
# it as a function with one string parameter named `arguments` (the name
# docs/reference/chat-and-dsml.md §3.2 already gives a call whose arguments are not a
# JSON object, so a replayed `custom_tool_call` renders exactly as the model writes a
# fresh one), its format (free text or a lark/regex grammar) spelled out in that
# parameter's description.
# A call's freeform `input` travels as that one string member and is taken back out
# for the `custom_tool_call` output item.

INPUT_PARAMETER = "arguments"
FREEFORM = "The raw input as plain text (not JSON)."
_SYNTAXES = ("lark", "regex")


def _refuse(what: str) -> InvalidJsonError:
    return InvalidJsonError(f"custom tool {what}")


def _format_hint(value: object) -> str:
    if value is None:
        return FREEFORM
    if not isinstance(value, Mapping):
        raise _refuse("format must be an object")
    kind = value.get("type")
    if kind == "text":
        return FREEFORM
    if kind != "grammar":
        raise _refuse(f"format type {kind!r} is not supported (use 'text' or 'grammar')")
    syntax, definition = value.get("syntax"), value.get("definition")
    if syntax not in _SYNTAXES:
        raise _refuse(f"grammar syntax {syntax!r} is not supported (use 'lark' or 'regex')")
    if not isinstance(definition, str) or not definition:
        raise _refuse("grammar needs a non-empty string 'definition'")
    return f"{FREEFORM} It must match this {syntax} grammar:\n{definition}"


def custom_tool_definition(tool: Mapping[str, object]) -> dict[str, object]:
    """The function the model sees for a custom tool (InvalidJsonError on a bad one)."""
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise _refuse("needs a non-empty string 'name'")
    description = tool.get("description")
    if description is not None and not isinstance(description, str):
        raise _refuse(f"{name!r}: 'description' must be a string")
    parameter = {"type": "string", "description": _format_hint(tool.get("format"))}
    return {
        "name": name,
        "description": description or "",
        "parameters": {
            "type": "object",
            "properties": {INPUT_PARAMETER: parameter},
            "required": [INPUT_PARAMETER],
        },
    }


def custom_call_arguments(value: object) -> str:
    """A `custom_tool_call` item's `input` as call arguments ({"arguments": input})."""
    if not isinstance(value, str):
        raise InvalidJsonError("custom_tool_call 'input' must be a string")
    return msgspec.json.encode({INPUT_PARAMETER: value}).decode()


def custom_call_input(arguments: str) -> str:
    """The freeform input of a parsed call: its `arguments` string member, else its only
    string member (the model named the parameter differently), else the text itself."""
    members = object_members(arguments)
    if members is None:
        return arguments
    strings = [(key, parse_json(raw)) for key, raw in members if raw.startswith('"')]
    for key, value in strings:
        if key == INPUT_PARAMETER and isinstance(value, str):
            return value
    if len(members) == 1 and strings and isinstance(strings[0][1], str):
        return strings[0][1]
    return arguments
