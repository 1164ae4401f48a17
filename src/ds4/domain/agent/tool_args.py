"""A tool call's arguments as the agent's tools read them (docs/agent.md "Tools").

The model writes every parameter as a DSML string or JSON literal; the parser hands
over a JSON object. Numbers and booleans are accepted either way ("12" or 12, "yes" or
true). An integer that does not parse takes the default, one out of range is clamped;
a boolean accepts true/yes/1 and false/no/0 (any case), anything else is the default.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping

from ds4.domain.agent.errors import ToolError

Args = Mapping[str, object]


def parse_arguments(text: str) -> dict[str, object]:
    """The arguments object of a call; ToolError when it is not a JSON object."""
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        raise ToolError("tool arguments are not a JSON object") from None
    if not isinstance(value, dict):
        raise ToolError("tool arguments are not a JSON object")
    return value


def arg_text(args: Args, name: str) -> str | None:
    """A string argument; a JSON number or literal counts as its text, null as absent."""
    value = args.get(name)
    if value is None:
        return None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def _leading_int(text: str) -> int | None:
    """strtol's reading: optional blanks and sign, then decimal digits (the rest ignored)."""
    body = text.lstrip(" \t\n\r\f\v")
    sign = 1
    if body[:1] in "+-" and body:
        sign = -1 if body[0] == "-" else 1
        body = body[1:]
    digits = ""
    for ch in body:
        if not "0" <= ch <= "9":
            break
        digits += ch
    return sign * int(digits) if digits else None


def arg_int(args: Args, name: str, default: int, low: int, high: int) -> int:
    value = args.get(name)
    number: int | None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float):
        number = int(value) if math.isfinite(value) and abs(value) < 2**62 else None
    elif isinstance(value, str):
        number = _leading_int(value)
    else:
        number = None
    if number is None:
        return default
    return max(low, min(high, number))


_TRUE = ("true", "yes", "1")
_FALSE = ("false", "no", "0")


def arg_bool(args: Args, name: str, default: bool) -> bool:
    value = args.get(name)
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return value != 0 if value in (0, 1) else default
    if isinstance(value, str):
        word = value.strip().lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    return default


def required_text(args: Args, name: str, tool: str) -> str:
    """A string argument that must be present (`<tool> requires <name>` otherwise)."""
    value = arg_text(args, name)
    if value is None:
        raise ToolError(f"{tool} requires {name}")
    return value
