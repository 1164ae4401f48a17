"""Chat messages and thinking modes as the renderer consumes them.

API layers map their wire shapes onto these (developer -> SystemMessage, tool and
function results -> ToolResultMessage); the renderer never sees JSON.
"""

from __future__ import annotations

from enum import Enum

import msgspec

from ds4.domain.chat.constants import THINK_MAX_MIN_CONTEXT
from ds4.domain.dsml.syntax import ToolCall


class ThinkMode(Enum):
    NONE = "none"  # non-think: the assistant prefix closes thinking at once
    HIGH = "high"  # think
    MAX = "max"  # think-max: HIGH plus the Reasoning Effort prefix after BOS

    @property
    def thinking(self) -> bool:
        return self is not ThinkMode.NONE


def effective_think_mode(requested: ThinkMode, context_size: int) -> ThinkMode:
    """Think Max needs a session of at least 384 Ki tokens; below that it is Think."""
    if requested is ThinkMode.MAX and context_size < THINK_MAX_MIN_CONTEXT:
        return ThinkMode.HIGH
    return requested


class SystemMessage(msgspec.Struct, frozen=True, tag_field="role", tag="system"):
    content: str = ""


class UserMessage(msgspec.Struct, frozen=True, tag_field="role", tag="user"):
    content: str = ""


class AssistantMessage(msgspec.Struct, frozen=True, tag_field="role", tag="assistant"):
    content: str = ""
    reasoning: str | None = None
    tool_calls: tuple[ToolCall, ...] = ()
    # The exact DSML block the model sampled for these calls (tool replay memory);
    # rendered verbatim instead of the canonical JSON -> DSML form.
    raw_dsml: str | None = None


class ToolResultMessage(msgspec.Struct, frozen=True, tag_field="role", tag="tool"):
    content: str = ""
    tool_call_id: str = ""


Message = SystemMessage | UserMessage | AssistantMessage | ToolResultMessage
