"""Auto-sizing the eval context (docs/reference/eval.md §3.1)."""

from __future__ import annotations

import pytest

from ds4.domain.errors import Ds4Error
from ds4.domain.eval.cases import CONTEXT_CAP, auto_size_context


def test_the_largest_prompt_plus_budget() -> None:
    sized = auto_size_context(["a", "b", "c"], [100, 100, 100], lambda i, ctx: [50, 70, 60][i])
    assert (sized.ctx, sized.max_prompt, sized.case, sized.prompt, sized.budget) == (
        170, 70, 2, 70, 100
    )  # fmt: skip
    assert sized.log_line() == (
        "ds4-eval: context auto-sized to 170 tokens (largest prompt=70 tokens, case=2, "
        "generation budget=100)"
    )


def test_per_case_budgets_pick_the_largest_need() -> None:
    sized = auto_size_context(["a", "b"], [1000, 10], lambda i, ctx: [50, 70][i])
    assert (sized.ctx, sized.case, sized.max_prompt) == (1050, 1, 70)


def test_a_prompt_that_depends_on_the_size_settles() -> None:
    calls: list[int] = []

    def length(i: int, ctx: int) -> int:
        calls.append(ctx)
        return 500 if ctx >= 400_000 else 40  # a long prefix only in a big context

    sized = auto_size_context(["a"], [100], length)
    assert sized.ctx == 140
    assert calls == [CONTEXT_CAP, 600, 140]


def test_over_the_cap_names_the_case() -> None:
    with pytest.raises(Ds4Error, match=r"case 2 \(S/big\)"):
        auto_size_context(["S/a", "S/big"], [10, CONTEXT_CAP], lambda i, ctx: 5)
