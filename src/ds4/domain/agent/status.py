"""The worker's state as the UI shows it: one footer line (docs/agent.md "The screen")."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

BAR_CELLS = 32
PREFILL_LABELS = ("reading", "absorbing", "studying", "gathering", "crunching", "scrutinizing")


class AgentState(Enum):
    STARTING = "starting"
    IDLE = "idle"
    PREFILL = "prefill"
    GENERATING = "generating"
    TOOL = "tool"  # a tool runs (or waits for the user's yes/no)
    COMPACTING = "compacting"
    SAVING = "saving"
    ERROR = "error"
    STOPPED = "stopped"

    @property
    def busy(self) -> bool:
        return self not in (AgentState.IDLE, AgentState.ERROR, AgentState.STOPPED)


@dataclass(frozen=True)
class AgentStatus:
    state: AgentState = AgentState.STARTING
    ctx_used: int = 0
    ctx_size: int = 0
    prefill_done: int = 0
    prefill_total: int = 0
    prefill_label: str = PREFILL_LABELS[0]
    prefill_tps: float = 0.0
    generated: int = 0
    gen_tps: float = 0.0
    tool: str = ""
    error: str = ""
    last_prefill: int | None = None  # tokens the last sync or restore had to evaluate


def short_count(n: int) -> str:
    """1234 -> 1.2k, 32000 -> 32k, 999 -> 999."""
    if n < 1000:
        return str(n)
    if n % 1000 == 0:
        return f"{n // 1000}k"
    return f"{n / 1000:.1f}k"


def progress_bar(done: int, total: int, rate: str) -> str:
    """32 cells of `▶` (done) and `·`, with the rate written over the empty part."""
    frac = 0.0 if total <= 0 else min(1.0, done / total)
    filled = int(frac * BAR_CELLS)
    if done < total:
        filled = max(1, min(BAR_CELLS - 1, filled))
    empty = BAR_CELLS - filled
    rest = list("·" * empty)
    if len(rate) + 2 <= empty:
        rest[1 : 1 + len(rate)] = list(rate)
    return "▶" * filled + "".join(rest)


def footer_text(s: AgentStatus) -> str:
    head = f"ctx {short_count(s.ctx_used)}/{short_count(s.ctx_size)} | "
    state = s.state
    if state is AgentState.PREFILL:
        pct = 0.0 if s.prefill_total <= 0 else 100.0 * s.prefill_done / s.prefill_total
        bar = progress_bar(s.prefill_done, s.prefill_total, f"{s.prefill_tps:.0f}t/s")
        return (
            head + f"{s.prefill_label} [{bar}] {short_count(s.prefill_done)}/"
            f"{short_count(s.prefill_total)} {pct:.1f}%"
        )
    if state is AgentState.GENERATING:
        return head + f"generation {short_count(s.generated)} tokens {s.gen_tps:.1f} t/s"
    if state is AgentState.COMPACTING:
        return head + f"COMPACTING summary {short_count(s.generated)} tokens {s.gen_tps:.1f} t/s"
    if state is AgentState.TOOL:
        return head + f"running {s.tool}"
    if state is AgentState.SAVING:
        return head + "saving session"
    if state is AgentState.ERROR:
        return head + f"error: {s.error}"
    if state is AgentState.STOPPED:
        return head + "interrupted"
    if state is AgentState.STARTING:
        return head + "starting"
    tail = "" if s.last_prefill is None else f" | last prefill {s.last_prefill} tokens"
    return head + "idle" + tail
