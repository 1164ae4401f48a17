"""The agent's live state: the engine session, the token transcript and what the
conversation is (title, id, dirty), plus the operations every part shares: syncing
the session to the transcript with progress, and status reports
(docs/agent.md "How it is built").

The transcript is the model's own tokens: pieces the agent writes are encoded at
special-token boundaries, generated tokens are kept as sampled.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ds4.domain.agent import compaction
from ds4.domain.agent.library import SessionLibrary
from ds4.domain.agent.screen import PREFILL_LABELS, AgentState, AgentStatus
from ds4.domain.agent.tool_catalog import agent_tool_schemas
from ds4.domain.agent.toolbox import ToolBox
from ds4.domain.agent.transcript import agent_guide, system_head, token_records, user_turn
from ds4.domain.chat import ASSISTANT, UNTHINK, ThinkMode, tools_system_text
from ds4.domain.engine.cancel import never_cancel
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.loop import prefill
from ds4.domain.sampling import SamplingParams
from ds4.ports.agent import AgentIO
from ds4.ports.tokenizer import Tokenizer


@dataclass(frozen=True)
class AgentSettings:
    max_tokens: int = 50_000  # generated tokens per assistant round (-n)
    sampling: SamplingParams = field(default_factory=SamplingParams)
    mode: ThinkMode = ThinkMode.HIGH
    system: str = ""  # the user's extra system text (-sys)
    edit_upto: bool = False
    auto_approve: bool = False  # --yes


@dataclass
class Conversation:
    tokens: list[int]
    system_len: int
    title: str | None = None
    created_at: int = 0
    session_id: str | None = None
    dirty: bool = False
    datetime_told: bool = False
    seen_at: int = 0  # transcript length when the system prompt was last seen
    last_answer: str = ""


class AgentCore:
    def __init__(
        self,
        session: EngineSession,
        tokenizer: Tokenizer,
        settings: AgentSettings,
        tools: ToolBox,
        io: AgentIO,
        library: SessionLibrary | None = None,
    ) -> None:
        self.session = session
        self.tokenizer = tokenizer
        self.settings = settings
        self.tools = tools
        self.io = io
        self.library = library
        self.ctx = session.ctx
        web = tools.browser is not None
        schemas = agent_tool_schemas(edit_upto=settings.edit_upto, web=web)
        self.system_text = system_head(
            schemas, settings.system, settings.mode, edit_upto=settings.edit_upto, web=web
        )
        # what a reminder repeats: the tool block and the guidance, without BOS or -sys
        self.tool_prompt = (
            tools_system_text(schemas) + "\n\n" + agent_guide(edit_upto=settings.edit_upto, web=web)
        )
        system_tokens = tokenizer.encode(self.system_text)
        self.conv = Conversation(
            list(system_tokens), len(system_tokens), seen_at=len(system_tokens)
        )
        request = tokenizer.encode(
            user_turn(compaction.request_text("soft limit before user turn")) + ASSISTANT + UNTHINK
        )
        self.reserve = compaction.reserve(self.ctx, len(request))
        self.status = AgentStatus(state=AgentState.STARTING, ctx_size=self.ctx)
        self._labels = 0

    # ---- status ---------------------------------------------------------------

    def report(self, **changes: Any) -> None:
        self.status = replace(self.status, ctx_used=len(self.conv.tokens), **changes)
        self.io.set_status(self.status)

    # ---- the engine -----------------------------------------------------------

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text)

    def append(self, text: str) -> None:
        self.conv.tokens += self.encode(text)

    def sync(
        self, tokens: list[int] | None = None, *, label: str | None = None, cancellable: bool = True
    ) -> int:
        """Bring the session to `tokens` (the transcript by default), prefilling what
        the live state lacks; returns how many tokens were evaluated. CancelledError
        at a chunk boundary (the state keeps the finished chunks), Ds4Error when it
        does not fit or the engine fails."""
        target = self.conv.tokens if tokens is None else tokens
        if len(target) >= self.ctx:
            raise Ds4Error(f"the transcript ({len(target)} tokens) does not fit --ctx {self.ctx}")
        name = label or PREFILL_LABELS[self._labels % len(PREFILL_LABELS)]
        self._labels += 1
        start = self.io.monotonic()
        cancel = self.io.interrupted if cancellable else never_cancel
        steps = prefill(self.session, target, cancel=cancel)
        cached = 0
        while True:
            try:
                progress = next(steps)
            except StopIteration as stop:
                cached = int(stop.value)
                break
            elapsed = max(1e-6, self.io.monotonic() - start)
            self.report(
                state=AgentState.PREFILL,
                prefill_done=progress.done,
                prefill_total=progress.total,
                prefill_label=name,
                prefill_tps=progress.done / elapsed,
            )
        evaluated = len(target) - cached
        self.io.trace(
            f"prefill transcript={len(target)} cached={cached} suffix={evaluated} "
            f"think={self.settings.mode.value}"
        )
        if evaluated:
            for line in token_records(self.tokenizer, "prefill", cached, target[cached:]):
                self.io.trace(line)
        self.status = replace(self.status, last_prefill=evaluated)
        return evaluated

    # ---- the system prompt ----------------------------------------------------

    def start(self) -> None:
        """Bring the session to the system prompt: from its KV file when one matches
        this text and model, else by prefilling it (and saving the file)."""
        tokens = self.conv.tokens[: self.conv.system_len]
        if self.library is not None and self._load_system(tokens):
            self.io.trace(f"sysprompt kv hit tokens={len(tokens)}")
        else:
            if self.library is not None:
                self.io.notice("Updating system prompt cache...")
            self.sync(tokens, cancellable=False)
            if self.library is not None:
                self._store_system(tokens)
        self.report(state=AgentState.IDLE)

    def _load_system(self, tokens: list[int]) -> bool:
        assert self.library is not None
        payload = self.library.load_system(self.system_text)
        if payload is None:
            return False
        try:
            self.session.load_payload(payload)
        except Ds4Error:
            return False
        if list(self.session.tokens) != tokens:
            self.session.invalidate()
            return False
        self.status = replace(self.status, last_prefill=0)
        return True

    def _store_system(self, tokens: list[int]) -> None:
        assert self.library is not None
        try:
            payload = self.session.payload()
            self.library.save_system(self.system_text, len(tokens), payload, self.io.now())
        except (Ds4Error, OSError) as exc:
            self.io.notice(f"system prompt cache not saved: {exc}")
            return
        self.io.trace(f"sysprompt kv stored tokens={len(tokens)}")

    def reset(self) -> None:
        """/new: back to the system prompt (the live KV prefix is reused)."""
        n = self.conv.system_len
        self.conv = Conversation(self.conv.tokens[:n], n, seen_at=n)
        self.report(state=AgentState.IDLE)
