"""One user turn: the user message, then assistant rounds until an answer, with the
tool calls of each round confirmed, run and handed back (docs/agent.md "A turn").

Each round appends the assistant prefix, syncs the session, decodes with the shared
generation loop (DSML steers sampling, a closed tool block ends the round) and closes
the message with EOS. A round's tool calls run in order; their results go back as one
tool message, followed by any prompts the user queued meanwhile. The user's interrupt
stops a prefill at a chunk boundary, generation at a token, a tool at its next check,
and always leaves the transcript a whole conversation.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from ds4.domain.agent import compaction
from ds4.domain.agent.compactor import Compactor, Partial
from ds4.domain.agent.core import AgentCore
from ds4.domain.agent.file_tools import EditPreflight
from ds4.domain.agent.screen import BOLD_RED, DIM, AgentState, TerminalRenderer, styled, user_echo
from ds4.domain.agent.session_meta import normalize_title, session_id
from ds4.domain.agent.tool_catalog import tool_error
from ds4.domain.agent.toolbox import PlannedCall
from ds4.domain.agent.transcript import (
    combined_results,
    datetime_note,
    queued_message,
    text_record,
    tool_turn,
    user_turn,
)
from ds4.domain.chat import ASSISTANT, THINK, UNTHINK
from ds4.domain.dsml.parser import Recovery, find_block_start
from ds4.domain.dsml.syntax import THINK_CLOSE, ToolCall
from ds4.domain.engine.cancel import CancelledError
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.events import Finished
from ds4.domain.generation.loop import TurnSettings, decode_turn
from ds4.ports.agent import Approval

DSML_REMINDER = (
    "Write tool calls exactly in this shape, after thinking:\n"
    "<｜DSML｜tool_calls>\n"
    '<｜DSML｜invoke name="TOOL_NAME">\n'
    '<｜DSML｜parameter name="PARAM" string="true">VALUE</｜DSML｜parameter>\n'
    "</｜DSML｜invoke>\n"
    "</｜DSML｜tool_calls>\n"
)
RESULT_PREVIEW_LINES = 8
STOPPED = "Stopped by user"
READING_INTERRUPTED = (
    "Model reading interrupted; the model may only be aware of the prefix processed so far."
)


class RoundEnd(Enum):
    ANSWER = "answer"
    TOOLS = "tools"
    STOPPED = "stopped"
    CONTINUE = "continue"  # compacted mid-message: the same reply goes on


@dataclass(frozen=True)
class RoundResult:
    end: RoundEnd
    calls: tuple[ToolCall, ...] = ()
    result: str | None = None  # a ready tool result (an error) instead of running calls
    generated: int = 0
    think_open: bool = False  # CONTINUE: the next prefix reopens thinking


def _preview(text: str) -> str:
    lines = text.rstrip("\n").split("\n")
    shown = lines[:RESULT_PREVIEW_LINES]
    if len(lines) > RESULT_PREVIEW_LINES:
        shown.append(f"... {len(lines) - RESULT_PREVIEW_LINES} more lines")
    return "".join(styled(DIM, "  " + line) + "\n" for line in shown)


def _block_started(text: str, thinking: bool) -> bool:
    """The reply has begun a tool block (one counts only after the reasoning closed)."""
    calls_from = 0
    if thinking:
        close = text.find(THINK_CLOSE)
        if close < 0:
            return False
        calls_from = close + len(THINK_CLOSE)
    return find_block_start(text, calls_from) is not None


class TurnRunner:
    def __init__(self, core: AgentCore, compactor: Compactor) -> None:
        self.core = core
        self.compactor = compactor
        self._rounds = 0  # varies the sampling seed from round to round
        self._preflight = EditPreflight(self._selector_error)

    def run(self, text: str) -> None:
        """One whole turn; ends IDLE (ERROR when the engine failed)."""
        c = self.core
        c.io.clear_interrupt()
        try:
            self._turn(text)
        except CancelledError:
            c.io.notice(STOPPED)
        except Ds4Error as exc:
            c.io.publish(styled(BOLD_RED, f"error: {exc}") + "\n")
            c.report(state=AgentState.ERROR, error=str(exc))
            c.io.clear_interrupt()
            return
        c.io.clear_interrupt()  # a stale interrupt never outlives the turn
        c.report(state=AgentState.IDLE)

    # ---- the turn -------------------------------------------------------------

    def _turn(self, text: str) -> None:
        c = self.core
        self.compactor.if_needed("soft limit before user turn")
        note = [] if c.conv.datetime_told else c.encode(datetime_note(c.io.local_time()))
        user = c.encode(user_turn(text))
        if len(c.conv.tokens) + len(note) + len(user) + c.reserve >= c.ctx:
            c.io.notice("user message is too large for --ctx")
            return
        if note:
            c.conv.tokens += note
            c.conv.datetime_told = True
            c.io.trace(text_record("datetime-context", c.io.local_time()))
        if c.conv.title is None:
            c.conv.title = normalize_title(text)
            c.conv.created_at = c.io.now()
            c.conv.session_id = session_id(c.conv.title, c.conv.created_at)
        c.conv.tokens += user
        c.conv.dirty = True
        c.io.trace(text_record("user", text))
        budget = c.settings.max_tokens
        think_open = c.settings.mode.thinking
        first = True
        stalls = 0
        while True:
            if not first:
                self.compactor.if_needed("soft limit before tool continuation")
            first = False
            self._maybe_remind()
            result = self._round(budget, think_open)
            if result.end is RoundEnd.CONTINUE:
                stalls = stalls + 1 if result.generated == 0 else 0
                if stalls > 1:
                    raise Ds4Error("context full after compaction")
                budget = max(1, budget - result.generated)
                think_open = result.think_open
                continue
            if result.end is not RoundEnd.TOOLS:
                return
            tool_text = (
                result.result if result.result is not None else self._run_calls(result.calls)
            )
            self._append_tool_result(tool_text)
            if c.io.interrupted():
                raise CancelledError
            self._deliver_queued()
            budget, think_open = c.settings.max_tokens, c.settings.mode.thinking

    def _deliver_queued(self) -> None:
        c = self.core
        queued = c.io.take_queued()
        if not queued:
            return
        for text in queued:
            c.io.publish(user_echo(text))
            c.io.trace(text_record("queued_user", text))
        c.append(user_turn(queued_message(queued)))

    def _maybe_remind(self) -> None:
        c = self.core
        if len(c.conv.tokens) - c.conv.seen_at < compaction.REMINDER_EVERY:
            return
        text = (
            "\n\n[System prompt reminder follows.]\n"
            + c.tool_prompt
            + "[End system prompt reminder.]\n\n"
        )
        if c.settings.system:
            text += (
                "\nAdditional system instructions reminder:\n"
                + c.settings.system
                + "\n[End additional system instructions reminder.]\n\n"
            )
        c.io.notice("Re-injecting system prompt reminder...")
        c.io.trace(f"system prompt reminder injected at transcript={len(c.conv.tokens)}")
        c.append(text)
        c.conv.seen_at = len(c.conv.tokens)

    # ---- one assistant round ----------------------------------------------------

    def _round(self, budget: int, think_open: bool) -> RoundResult:
        c = self.core
        eos = c.tokenizer.special.eos
        start = len(c.conv.tokens)
        c.append(ASSISTANT + (THINK if think_open else UNTHINK))
        try:
            c.sync()
        except CancelledError:
            c.conv.tokens.append(eos)
            c.io.notice(READING_INTERRUPTED)
            return RoundResult(RoundEnd.STOPPED)
        except Ds4Error:
            del c.conv.tokens[start:]  # no reply was begun: the transcript stays whole
            raise
        room = c.ctx - len(c.conv.tokens) - c.reserve
        if room <= 0:
            del c.conv.tokens[start:]
            if not self.compactor.compact("generation reached compaction reserve"):
                raise Ds4Error("context full: nothing left to compact")
            return RoundResult(RoundEnd.CONTINUE, think_open=think_open)
        limit = min(budget, room)
        done = self._decode(limit, think_open)
        c.conv.tokens += done.tokens
        generated = len(done.tokens)
        if self._preflight_failed is not None:
            c.conv.tokens.append(eos)
            c.io.publish(styled(BOLD_RED, "[tool call stopped: edit old selector failed]") + "\n")
            return RoundResult(
                RoundEnd.TOOLS, result=tool_error(self._preflight_failed), generated=generated
            )
        if done.finish == "cancelled":
            c.conv.tokens.append(eos)
            if _block_started(done.text, think_open):
                c.io.publish(styled(BOLD_RED, "[tool call interrupted]") + "\n")
            raise CancelledError
        if done.finish == "error":
            c.conv.tokens.append(eos)
            raise Ds4Error(done.error or "generation failed")
        if done.finish == "length" and generated >= limit and limit < budget:
            return self._compact_mid_message(start, done, think_open)
        c.conv.tokens.append(eos)
        if done.tool_calls:
            c.io.trace(f"dsml done calls={len(done.tool_calls)}")
            return RoundResult(RoundEnd.TOOLS, calls=done.tool_calls, generated=generated)
        if done.recovery is Recovery.AS_TEXT:
            reason = "the tool call block is malformed or incomplete"
            c.io.trace(f"dsml error {reason}")
            c.io.publish(styled(BOLD_RED, f"[invalid tool call: {reason}]") + "\n")
            return RoundResult(
                RoundEnd.TOOLS,
                result=tool_error(f"invalid DSML tool call: {reason}\n") + DSML_REMINDER,
                generated=generated,
            )
        if done.finish == "length":
            c.io.notice(f"[reply stopped at the token limit: {generated} tokens]")
        c.conv.last_answer = done.content
        return RoundResult(RoundEnd.ANSWER, generated=generated)

    def _decode(self, limit: int, thinking: bool) -> Finished:
        c = self.core
        self._rounds += 1
        sampling = c.settings.sampling
        seed = (sampling.seed + self._rounds - 1) % (1 << 64) or 1
        settings = TurnSettings(
            sampling=replace(sampling, seed=seed),
            max_tokens=limit,
            tools_active=True,
            thinking=thinking,
        )
        renderer = TerminalRenderer()
        preflight = EditPreflight(self._selector_error)
        self._preflight = preflight
        start = c.io.monotonic()
        count = 0

        def on_token(_token: int) -> None:
            nonlocal count
            count += 1
            elapsed = max(1e-6, c.io.monotonic() - start)
            c.report(state=AgentState.GENERATING, generated=count, gen_tps=count / elapsed)

        def stop() -> bool:
            return c.io.interrupted() or preflight.failed is not None

        done: Finished | None = None
        events = decode_turn(
            c.session,
            c.tokenizer,
            settings,
            prompt_tokens=len(c.conv.tokens),
            cancel=stop,
            on_token=on_token,
        )
        for event in events:
            preflight.feed(event)
            if isinstance(event, Finished):
                done = event
            else:
                c.io.publish(renderer.feed(event))
        c.io.publish(renderer.end())
        assert done is not None
        return done

    @property
    def _preflight_failed(self) -> str | None:
        return self._preflight.failed

    def _selector_error(self, path: str, old: str) -> str | None:
        return self.core.tools.edit_selector_error(path, old)

    def _compact_mid_message(self, start: int, done: Finished, think_open: bool) -> RoundResult:
        c = self.core
        text = done.text
        in_call = _block_started(text, think_open)
        reason = "generation reached compaction reserve"
        c.io.trace(f"{reason} in_call={int(in_call)}")
        if in_call:
            del c.conv.tokens[start:]  # a truncated call is never run
            if not self.compactor.compact(reason):
                raise Ds4Error("context full and compaction failed")
            c.append(user_turn(compaction.CALL_DROPPED_NOTE))
            thinking = c.settings.mode.thinking
            return RoundResult(RoundEnd.CONTINUE, generated=len(done.tokens), think_open=thinking)
        if not self.compactor.compact(reason, Partial(start)):
            c.conv.tokens.append(c.tokenizer.special.eos)
            raise Ds4Error("context full and compaction failed")
        still_thinking = think_open and THINK_CLOSE not in text
        return RoundResult(RoundEnd.CONTINUE, generated=len(done.tokens), think_open=still_thinking)

    # ---- tools ----------------------------------------------------------------

    def _run_calls(self, calls: tuple[ToolCall, ...]) -> str:
        c = self.core
        results: list[tuple[str, str]] = []
        for call in calls:
            if c.io.interrupted():
                results.append((call.name, tool_error("interrupted before running")))
                continue
            planned = c.tools.plan(call)
            c.report(state=AgentState.TOOL, tool=call.name)
            refusal = self._refusal(planned)
            text = refusal if refusal is not None else c.tools.run(planned, c.io.interrupted)
            c.io.publish(_preview(text))
            results.append((call.name, text))
        return combined_results(results)

    def _refusal(self, planned: PlannedCall) -> str | None:
        """None when the call may run; else the result that says why it did not."""
        c = self.core
        if planned.error is not None or planned.question is None or c.settings.auto_approve:
            return None
        answer = c.io.confirm(planned.question)
        name = planned.name
        if answer is Approval.YES:
            return None
        if answer is Approval.TIMEOUT:
            return tool_error(f"{name} approval timed out (user denied {name})")
        if answer is Approval.INTERRUPTED:
            return tool_error(f"user denied {name} (interrupted)")
        return tool_error(f"user denied {name}")

    def _append_tool_result(self, text: str) -> None:
        c = self.core
        tokens = c.encode(tool_turn(text))
        reserve = compaction.tool_result_reserve(c.reserve)
        if len(c.conv.tokens) + len(tokens) + reserve > c.ctx:
            self.compactor.compact("tool result would exceed context")
            if len(c.conv.tokens) + len(tokens) + reserve > c.ctx:
                projected = len(c.conv.tokens) + len(tokens)
                text = tool_error(
                    f"tool result still does not fit after context compaction "
                    f"(projected_prompt={projected} tokens, ctx={c.ctx}, reserve={reserve}). "
                    "Retry with a smaller read/search/bash output."
                )
                tokens = c.encode(tool_turn(text))
                if len(c.conv.tokens) + len(tokens) + 16 > c.ctx:
                    raise Ds4Error("context full after compaction")
        c.conv.tokens += tokens
