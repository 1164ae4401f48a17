"""Thinking controls and model aliases to a think mode (docs/reference/server.md §2.2).

Sources differ per API but resolve the same way: thinking is on by default; the
`deepseek-chat` / `deepseek-reasoner` aliases switch it only when no explicit switch
was sent; an explicit switch (`thinking`, `think`, Responses `reasoning.effort`)
wins; an effort of "none" turns it off and "max" asks for Think Max.
"""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.chat.messages import ThinkMode
from ds4.domain.errors import RequestError

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


def effort_mode(value: object, field: str) -> ThinkMode | None:
    """An effort name to its mode; null -> None; anything else is a 400."""
    if value is None:
        return None
    if isinstance(value, str) and value in EFFORTS:
        return EFFORTS[value]
    raise RequestError(f"invalid JSON request: unsupported {field} {value!r}")


@dataclass(frozen=True)
class ThinkingControls:
    explicit: bool = False  # a switch was sent (even one we could not read)
    enabled: bool = True
    effort: ThinkMode | None = None


def thinking_switch(value: object, present: bool) -> ThinkingControls:
    """`thinking`: a bool, or an object with type enabled/disabled; any other value
    (adaptive, null, a number) leaves the switch alone but still counts as explicit."""
    if not present:
        return ThinkingControls()
    if isinstance(value, bool):
        return ThinkingControls(explicit=True, enabled=value)
    if isinstance(value, dict) and value.get("type") in ("enabled", "disabled"):
        return ThinkingControls(explicit=True, enabled=value["type"] == "enabled")
    return ThinkingControls(explicit=True)


def resolve_think_mode(model: str, controls: ThinkingControls) -> ThinkMode:
    enabled = True
    if not controls.explicit and model in NON_THINKING_ALIASES:
        enabled = False
    elif not controls.explicit and model in THINKING_ALIASES:
        enabled = True
    if controls.explicit:
        enabled = controls.enabled
    if not enabled or controls.effort is ThinkMode.NONE:
        return ThinkMode.NONE
    return ThinkMode.MAX if controls.effort is ThinkMode.MAX else ThinkMode.HIGH
