"""`ds4 bench --plot`: prefill (left axis) and generation (right axis) t/s against
context, as a PNG (matplotlib, Agg backend; colours of docs/reference/cli-and-bench.md §6)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ds4.domain.errors import Ds4Error

PREFILL_COLOUR = "#2563eb"
GEN_COLOUR = "#dc2626"


class BenchRow(Protocol):
    @property
    def ctx_tokens(self) -> int: ...

    @property
    def prefill_tps(self) -> float: ...

    @property
    def gen_tps(self) -> float: ...


def plot_rows(rows: Sequence[BenchRow], path: str, *, title: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise Ds4Error("--plot needs matplotlib (pip install 'ds4[plot]')") from None
    ordered = sorted(rows, key=lambda r: r.ctx_tokens)
    ctx = [r.ctx_tokens for r in ordered]
    fig, left = plt.subplots(figsize=(9.6, 5.4), dpi=100)
    right = left.twinx()
    left.plot(ctx, [r.prefill_tps for r in ordered], color=PREFILL_COLOUR, lw=3, marker="o",
              label="prefill")  # fmt: skip
    right.plot(ctx, [r.gen_tps for r in ordered], color=GEN_COLOUR, lw=3, marker="o",
               label="generation")  # fmt: skip
    left.set_xlim(0, max(ctx) * 1.05)
    left.set_ylim(0, max(r.prefill_tps for r in ordered) * 1.05 or 1)
    right.set_ylim(0, max(r.gen_tps for r in ordered) * 1.05 or 1)
    left.set_xlabel("ctx size")
    left.set_ylabel("prefill t/s", color=PREFILL_COLOUR)
    right.set_ylabel("generation t/s", color=GEN_COLOUR, rotation=90)
    left.grid(True, color="#e2e8f0")
    left.set_title(title, fontsize=16, fontweight="bold")
    handles = left.get_lines() + right.get_lines()
    left.legend(handles, [str(h.get_label()) for h in handles], loc="upper right")
    fig.tight_layout()
    try:
        fig.savefig(path, format="png")
    except OSError as exc:
        raise Ds4Error(f"cannot write plot {path}: {exc.strerror or exc}") from None
    finally:
        plt.close(fig)
