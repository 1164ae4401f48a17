"""Which request fields select the think mode, per API: the one place these rules live
(docs/reference/server.md §2.2; ADR 0048).

All APIs resolve the same way: thinking is on by default; the `deepseek-chat` /
`deepseek-reasoner` aliases switch it only when no explicit switch was sent; an
explicit switch wins; an effort of "none" turns it off and "max" asks for Think Max.
What counts as a switch or an effort differs:

- chat completions, completions and `ds4 cli --render-chat`: the switch is `thinking`
  (a bool, or `{"type": "enabled" | "disabled"}`), with `think` (a bool) over it; the
  effort is `reasoning_effort`;
- Anthropic messages: the switch is `thinking`; the effort `output_config.effort`,
  else `reasoning_effort`;
- Responses: no switch; an effort in `reasoning.effort` counts as one.

A `thinking` value that is neither (`{"type": "adaptive"}`, null, a number) leaves the
switch on but still counts as explicit, so it turns the model alias off.
"""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.chat import ThinkMode
from ds4.wire.json_body import InvalidJsonError, present

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
