"""Auto-sizing the one session's context to the selected cases
(docs/reference/eval.md §3.1)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ds4.domain.errors import Ds4Error

CONTEXT_CAP = 1_000_000  # the largest context ds4 eval asks for
_ROUNDS = 3  # the think mode may depend on the size; it settles within three rounds


@dataclass(frozen=True)
class SizedContext:
    ctx: int
    max_prompt: int  # the longest prompt among the cases
    case: int  # 1-based: the case that set the size (the largest prompt + budget)
    prompt: int  # that case's prompt tokens
    budget: int  # and its generation budget

    def log_line(self) -> str:
        return (
            f"ds4-eval: context auto-sized to {self.ctx} tokens (largest prompt="
            f"{self.prompt} tokens, case={self.case}, generation budget={self.budget})"
        )


def auto_size_context(
    labels: Sequence[str],
    budgets: Sequence[int],
    prompt_length: Callable[[int, int], int],
) -> SizedContext:
    """The smallest context that holds every case's prompt and generation budget.

    `prompt_length(i, ctx)` is case i's encoded prompt for a session of `ctx` tokens
    (the effective think mode, and so the prompt, may depend on it). Starting from the
    cap, the size is recomputed until it no longer changes (at most three rounds).
    A case that cannot fit under the cap is an error naming it.
    """
    if not labels:
        raise Ds4Error("no cases selected")
    candidate = CONTEXT_CAP
    sized: SizedContext | None = None
    for _ in range(_ROUNDS):
        lengths = [prompt_length(i, candidate) for i in range(len(labels))]
        need = [n + b for n, b in zip(lengths, budgets, strict=True)]
        worst = max(range(len(labels)), key=lambda i: (need[i], lengths[i]))
        if need[worst] > CONTEXT_CAP:
            raise Ds4Error(
                f"case {worst + 1} ({labels[worst]}) needs {lengths[worst]} prompt tokens + "
                f"{budgets[worst]} generation tokens, more than the {CONTEXT_CAP} token "
                "context cap (lower -n/--tokens or leave the case out)"
            )
        sized = SizedContext(need[worst], max(lengths), worst + 1, lengths[worst], budgets[worst])
        if sized.ctx == candidate:
            break
        candidate = sized.ctx
    assert sized is not None
    return sized
