"""Compaction: summarize the conversation in a private exchange, then rebuild the
context as system prompt + summary + verbatim tail (docs/agent.md "Compaction").

The summary is generated greedily in a throwaway continuation (transcript + request +
an assistant prefix without thinking); it stops at EOS or before `</think>` or a DSML
token. Any failure, or an interrupt, keeps the old transcript: the live state then no
longer matches it and the next sync re-evaluates what differs.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ds4.domain.agent import compaction
from ds4.domain.agent.core import AgentCore
from ds4.domain.agent.screen import DIM, MAGENTA_BOLD, AgentState, styled
from ds4.domain.agent.transcript import tool_turn, user_turn
from ds4.domain.chat import ASSISTANT, EOS, UNTHINK
from ds4.domain.engine.cancel import CancelledError
from ds4.domain.errors import Ds4Error


@dataclass(frozen=True)
class Partial:
    """An assistant message cut at the compaction reserve: the summary reads it, the
    rebuilt context ends before it (at `start`, its assistant prefix)."""

    start: int


class Compactor:
    def __init__(self, core: AgentCore) -> None:
        self.core = core

    def due(self) -> bool:
        c = self.core
        return compaction.should_compact(len(c.conv.tokens), c.ctx, c.reserve)

    def if_needed(self, reason: str) -> None:
        if self.due():
            self.compact(reason)

    def compact(self, reason: str, partial: Partial | None = None) -> bool:
        """True when the context was rebuilt; CancelledError when interrupted (the old
        transcript is kept)."""
        c = self.core
        old = list(c.conv.tokens)
        bottom = len(old)
        if bottom <= c.conv.system_len:
            c.io.notice("compact skipped: nothing to compact")
            return False
        c.io.publish(
            styled(MAGENTA_BOLD, f"COMPACTING {reason}") + ": summarizing durable task state\n"
        )
        try:
            rebuilt = self._rebuild(reason, old, partial)
        except CancelledError:
            c.conv.tokens = old
            c.io.notice("Compaction interrupted; keeping the previous conversation state.")
            raise
        except Ds4Error as exc:
            c.conv.tokens = old
            c.io.notice(f"compaction failed: {exc}")
            c.io.trace(f"compaction failed reason={reason!r}: {exc}")
            return False
        c.conv.seen_at = len(rebuilt)
        jobs = c.tools.jobs.running_updates()
        if jobs:
            c.append(tool_turn(compaction.JOBS_NOTE + jobs))
            c.io.trace("tool-after-compaction appended")
        return True

    def _rebuild(self, reason: str, old: list[int], partial: Partial | None) -> list[int]:
        c = self.core
        system_len = c.conv.system_len
        budget = compaction.summary_budget(c.ctx)
        base = old + ([c.tokenizer.special.eos] if partial is not None else [])
        suffix = c.encode(user_turn(compaction.request_text(reason)) + ASSISTANT + UNTHINK)
        covered = compaction.summary_bottom(c.ctx, len(base), len(suffix), budget)
        if covered <= system_len:
            raise Ds4Error("no room to summarize: the context is too small")
        summary = self._summary(base[:covered] + suffix, budget)
        tail_end = len(old) if partial is None else partial.start
        start, mid = compaction.tail_start(
            old,
            system_len=system_len,
            bottom=tail_end,
            tail=compaction.tail_budget(c.ctx),
            user_token=c.tokenizer.special.user,
        )
        if covered < tail_end and covered < start:
            start, mid = covered, True  # every token the summary did not read stays
        note = compaction.MID_MESSAGE_NOTE if mid else ""
        head = compaction.SUMMARY_OPEN + summary + "\n" + compaction.SUMMARY_CLOSE + note
        rebuilt = old[:system_len] + c.encode(head) + old[start:tail_end]
        c.io.publish(
            styled(MAGENTA_BOLD, "COMPACTING")
            + f" rebuilding context: old={len(old)} summary+tail={len(rebuilt)} "
            f"tail={tail_end - start}\n"
        )
        c.conv.tokens = rebuilt
        c.sync()
        c.io.trace(
            f'compacted reason="{reason}" old={len(old)} new={len(rebuilt)} '
            f"tail_start={start} tail={tail_end - start}"
        )
        return rebuilt

    def _summary(self, prompt: list[int], budget: int) -> str:
        """Greedy summary after `prompt`, streamed dimmed."""
        c = self.core
        c.sync(prompt, label="summarizing")
        special = c.tokenizer.special
        stops = {special.eos, special.think_close, special.dsml}
        room = c.ctx - len(prompt) - 1
        decoder = c.tokenizer.streaming_decoder()
        ids: list[int] = []
        pieces: list[str] = []
        start = c.io.monotonic()
        logits = c.session.logits()
        while len(ids) < min(budget, room):
            if c.io.interrupted():
                raise CancelledError
            token = int(np.argmax(logits))
            if token in stops:
                if token != special.eos:
                    c.io.trace(f"compaction summary stopped before control token id={token}")
                break
            logits = c.session.eval(token)
            ids.append(token)
            piece = decoder.feed(token)
            pieces.append(piece)
            c.io.publish(styled(DIM, piece))
            elapsed = max(1e-6, c.io.monotonic() - start)
            c.report(state=AgentState.COMPACTING, generated=len(ids), gen_tps=len(ids) / elapsed)
        pieces.append(decoder.flush())
        c.io.publish("\n")
        text = "".join(pieces).strip()
        if text.endswith("<"):
            text = text[:-1].rstrip()
        text = text.replace(EOS, "")
        if not text:
            raise Ds4Error("the summary came out empty")
        return text
