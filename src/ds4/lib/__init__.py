"""ds4 as a library: the public API, all of it re-exported from this one module.

    import ds4.lib as ds4

    with ds4.open_model("models/demo.gguf") as model:
        session = model.new_session(ctx=2048)
        session.prefill(ds4.render_chat([ds4.UserMessage("Renzo e Lucia")]))
        print(session.generate(max_tokens=40).content)

Open a model (validated), tokenize and detokenize, render a chat to the exact prompt,
run a session (prefill, generate with a streaming callback, rewind, snapshot and
restore, payloads, `.kv` files), parse and render DSML tool calls, keep the tool-replay
memory. Each is a thin face over the code the `ds4` command runs. docs/library.md has
runnable examples and the stability note: only the names in `__all__` are public;
every other module under `ds4` (ds4.domain, ds4.ports, ds4.wire, ds4.adapters,
ds4.apps, the private modules of this package) is internal and may change in any release.
"""

from __future__ import annotations

from ds4 import __version__
from ds4.domain.chat import (
    AssistantMessage,
    Message,
    SystemMessage,
    ThinkMode,
    ToolResultMessage,
    UserMessage,
)
from ds4.domain.dsml.parser import Recovery, TurnResult
from ds4.domain.dsml.syntax import ToolCall, render_tool_calls
from ds4.domain.engine.cancel import CancelCheck, CancelledError
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.events import (
    Finished,
    FinishReason,
    GenerationEvent,
    ReasoningDelta,
    TextDelta,
    ToolCallArguments,
    ToolCallFinished,
    ToolCallStarted,
    Usage,
)
from ds4.domain.sampling import SamplingParams
from ds4.domain.tools import ReplayStats, ToolApi, ToolReplayMemory
from ds4.lib._chat import parse_tool_calls, render_chat, render_chat_request, tool_memory
from ds4.lib._model import KvFiles, Model, open_model
from ds4.lib._session import OnEvent, OnProgress, Session, Snapshot
from ds4.ports.tokenizer import SpecialTokenIds
from ds4.wire.chat import ChatRequestError

__all__ = [
    "AssistantMessage",
    "CancelCheck",
    "CancelledError",
    "ChatRequestError",
    "Ds4Error",
    "FinishReason",
    "Finished",
    "GenerationEvent",
    "KvFiles",
    "Message",
    "Model",
    "OnEvent",
    "OnProgress",
    "ReasoningDelta",
    "Recovery",
    "ReplayStats",
    "SamplingParams",
    "Session",
    "Snapshot",
    "SpecialTokenIds",
    "SystemMessage",
    "TextDelta",
    "ThinkMode",
    "ToolApi",
    "ToolCall",
    "ToolCallArguments",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolReplayMemory",
    "ToolResultMessage",
    "TurnResult",
    "Usage",
    "UserMessage",
    "__version__",
    "open_model",
    "parse_tool_calls",
    "render_chat",
    "render_chat_request",
    "render_tool_calls",
    "tool_memory",
]
