"""What every API's request parser shares (docs/reference/server.md §1.2, §2; ADR 0044,
ADR 0048): the body decoded once after one bounding token scan, the field rules and
limits, the refusal of fields this server cannot honour, the think-mode rules, the
parsed request, and which host names mean "this machine only".

Before decoding, one token scan (scan_json) refuses nesting deeper than 256 (as in
the reference, docs/reference/server.md §1.2), more than MAX_VALUES values, and duplicate `content`
members in one object (msgspec keeps the last one). msgspec itself refuses NaN/Infinity,
lone surrogates and malformed text, and wrong types name the field at fault.

Each API's parser declares every member it reads in one msgspec struct, so the body
is decoded exactly once, straight into typed fields and the parser's own value trees
(members the parser reads as JSON values are typed `object`; an absent member that
must be told from `null` defaults to msgspec.UNSET). Members nobody reads are skipped.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import msgspec

from ds4.domain.chat import ThinkMode
from ds4.domain.errors import RequestError
from ds4.domain.serving.exchange import GenerationRequest, Sampling

T = TypeVar("T")

DEFAULT_MODEL = "deepseek-v4-flash"  # the model a body that names none gets, and /v1/models' id

MAX_NESTING = 256
MAX_VALUES = 1_000_000  # ~100 MB as Python objects at worst; real agent requests: ~10^4
_OBJECT_START = re.compile(rb"[ \t\r\n]*\{")


class InvalidJsonError(RequestError):
    """A body that is not the JSON its API takes; `detail` says why, without the
    `invalid JSON request:` prefix the server's message starts with."""

    def __init__(self, detail: str) -> None:
        super().__init__(f"invalid JSON request: {detail}")
        self.detail = detail


def decode_body(body: bytes, body_type: type[T]) -> T:
    """The body as `body_type`, decoded once; InvalidJsonError (a 400) when it is not
    one: too deep, too many values, malformed, not an object, a member of the wrong
    type (named), or a duplicate `content` member."""
    shape = scan_json(body, max_depth=MAX_NESTING, max_values=MAX_VALUES)
    if shape.too_deep:
        raise InvalidJsonError(f"nesting deeper than {MAX_NESTING}")
    if shape.too_many_values:
        raise InvalidJsonError(f"more than {MAX_VALUES} values")
    try:
        value = msgspec.json.decode(body, type=body_type)
    except msgspec.ValidationError as error:
        if _OBJECT_START.match(body) is None:
            raise InvalidJsonError("the body must be a JSON object") from None
        raise InvalidJsonError(str(error)) from None
    except msgspec.DecodeError as error:
        raise InvalidJsonError(str(error)) from None
    if shape.duplicate_content:
        raise InvalidJsonError("duplicate 'content' member")
    return value


def present(value: object) -> bool:
    """The member was sent (even as null)."""
    return not isinstance(value, msgspec.UnsetType)


# ---- the bounding token scan -----------------------------------------------
# One pass over a request body's JSON tokens, before it is decoded (ADR 0044).
#
# It measures what decoding would cost and msgspec does not bound: how deep the
# containers nest, and how many values there are (each becomes a Python object of
# 50-100 bytes, so 64 MiB of `[],` would take gigabytes). It also finds a duplicate
# `content` member in one object, which msgspec would silently resolve to the last one.
# The pass stops as soon as a limit is passed. Strings are matched whole by the regex
# engine (possessive quantifiers: no backtracking state, however long the string),
# so a 60 MiB string costs one match. The body is not trusted to be valid JSON here;
# the decoder that runs next is the judge of that.

_TOKEN = re.compile(
    rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"(\s*+:)?'  # a string; group 1: it is an object key
    rb"|[\[\]{}]"  # a bracket
    rb'|[^\s,:\[\]{}"]++'  # a number, true, false or null
)
_WATCHED_KEY = "content"


@dataclass(frozen=True)
class JsonShape:
    too_deep: bool = False
    too_many_values: bool = False
    duplicate_content: bool = False


def _is_watched_key(token: bytes) -> bool:
    key = token[: token.rindex(b'"') + 1]
    if key == b'"content"':
        return True
    if b"\\" not in key or len(key) > 64:
        return False
    try:  # "\u0063ontent" is `content` too
        return bool(msgspec.json.decode(key) == _WATCHED_KEY)
    except msgspec.DecodeError:
        return False


def scan_json(body: bytes, *, max_depth: int, max_values: int) -> JsonShape:
    """Stops at the first container deeper than max_depth or value past max_values."""
    # per open container: None for an array, else whether `content` was seen
    open_containers: list[bool | None] = []
    values = 0
    duplicate = False
    for match in _TOKEN.finditer(body):
        first = body[match.start()]
        if first in b"]}":
            if open_containers:
                open_containers.pop()
            continue
        if first == 0x22 and match.group(1) is not None:  # an object key, not a value
            in_object = bool(open_containers) and open_containers[-1] is not None
            if in_object and _is_watched_key(match.group()):
                duplicate |= bool(open_containers[-1])
                open_containers[-1] = True
            continue
        values += 1
        if values > max_values:
            return JsonShape(too_many_values=True)
        if first in b"[{":
            open_containers.append(False if first == 0x7B else None)
            if len(open_containers) > max_depth:
                return JsonShape(too_deep=True)
    return JsonShape(duplicate_content=duplicate)


# ---- field rules -----------------------------------------------------------
# Field rules shared by the POST endpoints: sampling clamps, stop lists, limits.
#
# Limits (docs/reference/server.md §1.2; ADR 0040): a request may carry at most
# MAX_STOPS stop strings of at most MAX_STOP_BYTES each and MAX_TOOLS tools;
# max_tokens and top_k are clamped rather than refused (the worker clamps max_tokens
# to the free context anyway, and the sampler caps top_k at 1024).

INT_MAX = 2**31 - 1
MAX_STOPS = 16
MAX_STOP_BYTES = 1024
MAX_TOOLS = 512


def clamp_int(value: int | None) -> int | None:
    """Integers from JSON clamp to [0, INT_MAX] (docs/reference/server.md §2.3)."""
    return None if value is None else min(max(value, 0), INT_MAX)


def sampling(
    temperature: float | None = None,
    top_p: float | None = None,
    top_k: int | None = None,
    min_p: float | None = None,
    seed: int | None = None,
) -> Sampling:
    base = Sampling()
    return Sampling(
        temperature=base.temperature if temperature is None else temperature,
        top_p=base.top_p if top_p is None else top_p,
        top_k=base.top_k if top_k is None else min(clamp_int(top_k) or 0, 1024),
        min_p=base.min_p if min_p is None else min_p,
        seed=base.seed if seed is None else max(seed, 0),
    )


def stop_list(value: object) -> tuple[str, ...]:
    """A string or array; non-strings and empty strings are ignored."""
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    stops = tuple(s for s in items if isinstance(s, str) and s)
    if len(stops) > MAX_STOPS:
        raise RequestError(f"too many stop sequences (at most {MAX_STOPS})")
    if any(len(s.encode()) > MAX_STOP_BYTES for s in stops):
        raise RequestError(f"stop sequence longer than {MAX_STOP_BYTES} bytes")
    return stops


def check_tool_count(count: int) -> None:
    if count > MAX_TOOLS:
        raise RequestError(f"too many tools (at most {MAX_TOOLS})")


# ---- unsupported fields ----------------------------------------------------
# Request fields this server cannot honour are refused, not silently dropped (issue 14
# item 9; docs/adr/0044-server-exposure-and-limits.md).
#
# - `n` (and completions' `best_of`) above 1: one model, one live state, one answer.
# - non-text content (images, audio, files, documents): the model reads text only.
#
# Each refusal is a 400 naming the field. Fields that ask for nothing (`n: 1`,
# nulls) pass. (Log-probabilities are served: wire/logprobs.py reads their fields.)
# The checks read the values the parser decoded (decode_body), so nothing is decoded twice.

CHAT_NON_TEXT_PARTS = frozenset({"image_url", "input_audio", "file"})
ANTHROPIC_NON_TEXT_BLOCKS = frozenset({"image", "document"})
RESPONSES_NON_TEXT_PARTS = frozenset({"input_image", "input_file", "input_audio"})


def _refuse(param: str, message: str) -> RequestError:
    return RequestError(message, param=param)


def check_choices(fields: Mapping[str, object]) -> None:
    """`n` (and `best_of` on completions) must be absent, null or 1."""
    for member, value in fields.items():
        if value is not None and value != 1:
            raise _refuse(member, f"{member}={value!r} is not supported: one choice per request")


def _parts(content: object) -> list[object]:
    return content if isinstance(content, list) else []


def _part_type(part: object) -> str | None:
    kind = part.get("type") if isinstance(part, dict) else None
    return kind if isinstance(kind, str) else None


def check_chat_content(contents: Sequence[object]) -> None:
    """messages[i].content[j] of type image_url, input_audio or file (`contents`: each
    message's decoded content, in order)."""
    for i, content in enumerate(contents):
        for j, part in enumerate(_parts(content)):
            kind = _part_type(part)
            if kind in CHAT_NON_TEXT_PARTS:
                raise _refuse(
                    "messages",
                    f"messages[{i}].content[{j}]: {kind} content is not supported "
                    "(this server reads text only)",
                )


def check_anthropic_content(contents: Sequence[object]) -> None:
    """messages.i.content.j (or inside a tool_result) of type image or document."""
    for i, content in enumerate(contents):
        for j, part in enumerate(_parts(content)):
            if not isinstance(part, dict):
                continue
            where = f"messages.{i}.content.{j}"
            nested = enumerate(_parts(part.get("content")))  # a tool_result's blocks
            inner = [(f"{where}.content.{k}", block) for k, block in nested]
            for path, block in [(where, part), *inner]:
                kind = _part_type(block)
                if kind in ANTHROPIC_NON_TEXT_BLOCKS:
                    raise _refuse(
                        "messages",
                        f"{path}: {kind} content is not supported (this server reads text only)",
                    )


def refuse_responses_part(kind: object) -> None:
    """A Responses input content part that is not text (the parser calls this on the
    part types it does not take)."""
    if isinstance(kind, str) and kind in RESPONSES_NON_TEXT_PARTS:
        raise _refuse("input", f"{kind} content is not supported (this server reads text only)")


# ---- think-mode rules ------------------------------------------------------
# Which request fields select the think mode, per API: the one place these rules live
# (docs/reference/server.md §2.2; ADR 0048).
#
# All APIs resolve the same way: thinking is on by default; the `deepseek-chat` /
# `deepseek-reasoner` aliases switch it only when no explicit switch was sent; an
# explicit switch wins; an effort of "none" turns it off and "max" asks for Think Max.
# What counts as a switch or an effort differs:
#
# - chat completions, completions and `ds4 cli --render-chat`: the switch is `thinking`
#   (a bool, or `{"type": "enabled" | "disabled"}`), with `think` (a bool) over it; the
#   effort is `reasoning_effort`;
# - Anthropic messages: the switch is `thinking`; the effort `output_config.effort`,
#   else `reasoning_effort`;
# - Responses: no switch; an effort in `reasoning.effort` counts as one.
#
# A `thinking` value that is neither (`{"type": "adaptive"}`, null, a number) leaves the
# switch on but still counts as explicit, so it turns the model alias off.

EFFORTS = {
    "max": ThinkMode.MAX,
    "xhigh": ThinkMode.HIGH,
    "high": ThinkMode.HIGH,
    "medium": ThinkMode.HIGH,
    "low": ThinkMode.HIGH,
    "minimal": ThinkMode.HIGH,
    "none": ThinkMode.NONE,
}
NON_THINKING_ALIASES = frozenset({"deepseek-chat"})
THINKING_ALIASES = frozenset({"deepseek-reasoner"})


def effort_mode(value: str | None, field: str) -> ThinkMode | None:
    """An effort name to its mode; None when not sent; an unknown name is a 400."""
    if value is None:
        return None
    if value in EFFORTS:
        return EFFORTS[value]
    raise InvalidJsonError(f"unsupported {field} {value!r}")


@dataclass(frozen=True)
class ThinkingControls:
    explicit: bool = False  # a switch was sent (even one we could not read)
    enabled: bool = True
    effort: ThinkMode | None = None


def thinking_switch(value: object) -> ThinkingControls:
    """The `thinking` member (msgspec.UNSET when absent)."""
    if not present(value):
        return ThinkingControls()
    if isinstance(value, bool):
        return ThinkingControls(explicit=True, enabled=value)
    if isinstance(value, dict) and value.get("type") in ("enabled", "disabled"):
        return ThinkingControls(explicit=True, enabled=value["type"] == "enabled")
    return ThinkingControls(explicit=True)


def resolve_think_mode(model: str | None, controls: ThinkingControls) -> ThinkMode:
    enabled = controls.enabled
    if not controls.explicit and model in NON_THINKING_ALIASES:
        enabled = False
    elif not controls.explicit and model in THINKING_ALIASES:
        enabled = True
    if not enabled or controls.effort is ThinkMode.NONE:
        return ThinkMode.NONE
    return ThinkMode.MAX if controls.effort is ThinkMode.MAX else ThinkMode.HIGH


def openai_think_mode(
    model: str | None, thinking: object, think: bool | None, reasoning_effort: str | None
) -> ThinkMode:
    """Chat completions and completions (and the CLI's chat bodies)."""
    effort = effort_mode(reasoning_effort, "reasoning_effort")
    switch = thinking_switch(thinking)
    if think is not None:
        switch = ThinkingControls(explicit=True, enabled=think)
    return resolve_think_mode(model, ThinkingControls(switch.explicit, switch.enabled, effort))


def anthropic_think_mode(
    model: str | None, thinking: object, output_effort: str | None, reasoning_effort: str | None
) -> ThinkMode:
    effort = effort_mode(output_effort, "effort")
    if effort is None:
        effort = effort_mode(reasoning_effort, "reasoning_effort")
    switch = thinking_switch(thinking)
    return resolve_think_mode(model, ThinkingControls(switch.explicit, switch.enabled, effort))


def responses_think_mode(model: str | None, reasoning_effort: str | None) -> ThinkMode:
    effort = effort_mode(reasoning_effort, "reasoning.effort")
    return resolve_think_mode(model, ThinkingControls(effort is not None, True, effort))


# ---- the parsed request ----------------------------------------------------
# A parsed request body: the generation request the server runs, and the options only
# its reply reads (docs/adr/0048-wire-formats-at-the-edge.md).


@dataclass(frozen=True)
class WireTool:
    """How a prompt-side tool name maps back to the Responses wire (namespace tools,
    hosted tool_search, custom tools); chat and Anthropic use the prompt name as is."""

    wire_name: str
    namespace: str | None = None
    hosted_tool_search: bool = False
    custom: bool = False  # a freeform custom tool: calls are custom_tool_call items


@dataclass(frozen=True)
class ReplyOptions:
    include_usage: bool = False  # chat, completions: stream_options.include_usage
    wire_tools: dict[str, WireTool] = field(default_factory=dict)  # Responses
    logprobs: bool = False  # completions: the reply carries log-probabilities


@dataclass(frozen=True)
class StoredState:
    """A Responses request's `store` and `previous_response_id` (wire/responses_state.py):
    the input items as sent, the stored conversation's items before them once resumed,
    and how to parse the request again with that history in front."""

    store: bool
    previous_response_id: str | None
    items: tuple[object, ...]  # this request's input items (a string input as one message)
    history: tuple[object, ...] = ()  # the stored conversation before them (resumed)
    resume: Callable[[tuple[object, ...]], ParsedRequest] | None = None


@dataclass(frozen=True)
class ParsedRequest:
    generation: GenerationRequest
    reply: ReplyOptions = ReplyOptions()
    stored: StoredState | None = None  # Responses only


# ---- loopback hosts --------------------------------------------------------
# Which host names mean "this machine only" (ADR 0044).
#
# Loopback is the whole 127.0.0.0/8 block, ::1 (also as ::ffff:127.x.y.z) and the
# name `localhost`. IPv4 is read the way inet_aton reads it, as the resolver does for
# `--host` and curl does for URLs: `127.1`, `0x7f.1` and `2130706433` are all
# 127.0.0.1. Other names are not loopback, whatever they resolve to today (a DNS
# rebinding attack points a foreign name at 127.0.0.1).

_DIGITS = {8: "01234567", 10: "0123456789", 16: "0123456789abcdef"}
_LAST_PART_LIMIT = {1: 1 << 32, 2: 1 << 24, 3: 1 << 16, 4: 1 << 8}  # the bytes it fills


def host_name(authority: str) -> str:
    """The host of a Host header or URL authority: `[::1]:80` -> `::1`, `a:80` -> `a`."""
    if authority.startswith("["):
        return authority[1 : authority.find("]")] if "]" in authority else authority[1:]
    if authority.count(":") == 1:
        return authority.split(":", 1)[0]
    return authority  # a bare IPv6 address, or no port


# A Host header is an RFC 3986 authority without userinfo: `host [":" port]`, the host
# an IP-literal (`[` IPv6 `]`, no zone, no IPvFuture) or a reg-name (which covers
# IPv4 in every inet_aton form), the port 1..65535. It is parsed whole before any
# comparison, so `127.0.0.1:8000@evil.example` or `localhost:evil.example` is refused
# instead of being cut at a colon into a loopback name.
_REG_NAME = re.compile(r"(?:[A-Za-z0-9\-._~!$&'()*+,;=]|%[0-9A-Fa-f]{2})+")
_PORT = re.compile(r"[0-9]{1,5}")


def parse_host_header(value: str) -> tuple[str, int | None] | None:
    """(host, port or None) of a Host header value; None when it is malformed. The
    host is lower-cased, an IPv6 literal without its brackets."""
    value = value.strip(" \t")
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            return None
        host, rest = value[1:end], value[end + 1 :]
        if "%" in host:
            return None  # a zone id (RFC 6874) names an interface of the client's
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return None
    else:
        host, colon, port_text = value.partition(":")
        rest = colon + port_text
        if not _REG_NAME.fullmatch(host):
            return None
    if not rest:
        return host.lower(), None
    if not rest.startswith(":") or not _PORT.fullmatch(rest[1:]):
        return None
    port = int(rest[1:])
    return (host.lower(), port) if 1 <= port <= 65535 else None


def _inet_aton(text: str) -> int | None:
    """An IPv4 address in any inet_aton form (1 to 4 parts, decimal/octal/hex)."""
    parts = text.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers = []
    for part in parts:
        if part.startswith("0x"):
            base, digits = 16, part[2:]
        elif len(part) > 1 and part.startswith("0"):
            base, digits = 8, part[1:]
        else:
            base, digits = 10, part
        if not digits or any(c not in _DIGITS[base] for c in digits):
            return None
        numbers.append(int(digits, base))
    *leading, last = numbers
    if any(n > 255 for n in leading) or last >= _LAST_PART_LIMIT[len(parts)]:
        return None
    value = last
    for index, number in enumerate(leading):
        value |= number << (24 - 8 * index)
    return value


def is_loopback_host(name: str) -> bool:
    """`name` is a host without port (brackets around IPv6 allowed)."""
    name = name.strip().rstrip(".").lower()
    if name.startswith("[") and name.endswith("]"):
        name = name[1:-1]
    if name == "localhost":
        return True
    ipv4 = _inet_aton(name)
    if ipv4 is not None:
        return ipv4 >> 24 == 127
    try:
        address = ipaddress.IPv6Address(name.split("%", 1)[0])
    except ValueError:
        return False
    mapped = address.ipv4_mapped
    return address.is_loopback or (mapped is not None and mapped.is_loopback)
