"""`ds4 bench`: prefill and generation throughput at context frontiers
(docs/reference/cli-and-bench.md §5).

One model load, one token sequence, one session. For each frontier F: prefill the tokens
since the previous frontier (timed), snapshot the state (its payload size is the KV cache
bytes; not timed), decode gen_tokens greedy tokens never choosing EOS (timed), restore
the snapshot (not timed) and go on. One CSV row per frontier, flushed as it is written.

With --mtp the same tokens are decoded a second time from the snapshot with speculative
decoding (docs/mtp.md), timed the same way; the row adds that rate and the share of
drafted tokens accepted, and the run stops with an error if the two token streams differ.

With --distributed, stderr ends with one line per layer range (and the way back to the
coordinator) and operation: its passes, tokens and mean eval, wait and transfer time
per pass (docs/distributed.md#per-hop-telemetry).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TextIO

import numpy as np
import numpy.typing as npt

from ds4.apps import backends, flag_types
from ds4.apps.bootstrap import load_engine
from ds4.apps.cli_generate import chat_prompt
from ds4.apps.engine_flags import (
    add_distributed_flags,
    add_engine_flags,
    add_mtp_flags,
    add_repack_flag,
    add_ssd_streaming_flags,
    engine_options,
)
from ds4.apps.flag_types import MAX_CTX, DefaultsHelpFormatter, read_utf8
from ds4.domain.chat import ThinkMode
from ds4.domain.dist_transport import HopSummary
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.expert_cache import ExpertCacheStats
from ds4.domain.generation.loop import drafts_for
from ds4.domain.speculative import MtpDrafter
from ds4.ports.compute import ComputeSession
from ds4.ports.tokenizer import Tokenizer

CSV_HEADER = "ctx_tokens,prefill_tokens,prefill_tps,gen_tokens,gen_tps,kvcache_bytes"
# appended with --ssd-streaming: the expert cache over each frontier's generation
SSD_HEADER = "expert_hit_rate,disk_bytes_per_token,disk_read_mbps,stall_ms_per_token"
MTP_COLUMNS = ",mtp_gen_tps,mtp_acceptance,mtp_tokens_per_pass"
DEFAULT_SYSTEM = "You are a helpful assistant."  # bench's default ends with a period
PREFILL_CHUNK = 2048


@dataclass(frozen=True)
class Row:
    ctx_tokens: int
    prefill_tokens: int
    prefill_tps: float
    gen_tokens: int
    gen_tps: float
    kvcache_bytes: int
    mtp: MtpRun | None = None
    ssd: ExpertCacheStats | None = None  # the expert cache's counters over generation

    def csv(self) -> str:
        line = (
            f"{self.ctx_tokens},{self.prefill_tokens},{self.prefill_tps:.2f},"
            f"{self.gen_tokens},{self.gen_tps:.2f},{self.kvcache_bytes}"
        )
        if self.mtp is not None:
            m = self.mtp
            line += f",{m.gen_tps:.2f},{m.acceptance:.4f},{m.tokens_per_pass:.3f}"
        if self.ssd is not None:
            s, n = self.ssd, max(self.gen_tokens, 1)
            line += (
                f",{s.hit_rate:.4f},{s.bytes_read / n:.0f},"
                f"{s.read_bytes_per_second / 1e6:.1f},{s.stall_seconds * 1e3 / n:.3f}"
            )
        return line


@dataclass(frozen=True)
class MtpRun:
    """One frontier's speculative decode: its rate, the share of drafts accepted and
    the tokens each main-model pass produced on average."""

    gen_tps: float
    acceptance: float
    tokens_per_pass: float


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bench = sub.add_parser(
        "bench",
        formatter_class=DefaultsHelpFormatter,
        help="prefill and generation throughput at growing context frontiers (CSV)",
        description="For each context frontier: prefill t/s of the newest span, then "
        "generation t/s at the frontier (greedy, never EOS; the state is snapshotted before "
        "and restored after), and the snapshot size. CSV on stdout (or --csv FILE).",
    )
    bench.add_argument(
        "--prompt-file", type=flag_types.input_file, metavar="FILE", help="raw text, plain BPE"
    )
    bench.add_argument(
        "--chat-prompt-file",
        type=flag_types.input_file,
        metavar="FILE",
        help="text rendered as one no-thinking chat user message (system text from -sys)",
    )
    bench.add_argument("-sys", "--system", default=DEFAULT_SYSTEM, help="with --chat-prompt-file")
    add_engine_flags(bench)
    add_ssd_streaming_flags(bench)
    add_repack_flag(bench)
    add_mtp_flags(bench)
    add_distributed_flags(bench)
    tokens = flag_types.int_in(1, MAX_CTX)
    bench.add_argument("--ctx-start", type=tokens, default=2048,
                       help=f"first frontier (1..{MAX_CTX}, at most --ctx-max)")  # fmt: skip
    bench.add_argument("--ctx-max", type=tokens, default=32768,
                       help=f"last frontier (1..{MAX_CTX})")  # fmt: skip
    bench.add_argument(
        "--ctx-alloc", type=flag_types.int_in(2, 2 * MAX_CTX), default=None,
        help=f"session size, more than ctx-max + gen, up to {2 * MAX_CTX} "
        "(default: ctx-max + gen + 1)",
    )  # fmt: skip
    bench.add_argument("--step-incr", type=tokens, default=2048,
                       help=f"linear step when --step-mul is 1 (1..{MAX_CTX})")  # fmt: skip
    bench.add_argument(
        "--step-mul", type=flag_types.float_in(1, 1000), default=1.0,
        help="1..1000; > 1: next = max(cur + 1, ceil(cur * F))",
    )  # fmt: skip
    bench.add_argument(
        "--gen-tokens", "--tokens", "-n", dest="gen_tokens", type=tokens, default=128,
        help=f"tokens generated at each frontier (1..{MAX_CTX})",
    )  # fmt: skip
    bench.add_argument("--csv", type=flag_types.output_file, metavar="FILE",
                       help="write the CSV here instead of stdout")  # fmt: skip
    bench.add_argument("--plot", type=flag_types.output_file, metavar="FILE.png",
                       help="draw t/s against context (PNG)")  # fmt: skip
    bench.set_defaults(run=run, bench_parser=bench)


def frontiers(start: int, end: int, step_incr: int, step_mul: float) -> Iterator[int]:
    """start, then the next frontier each time, clamped to end; end is always the last."""
    cur = min(start, end)
    while True:
        yield cur
        if cur >= end:
            return
        nxt = max(cur + 1, math.ceil(cur * step_mul)) if step_mul > 1 else cur + step_incr
        cur = min(nxt, end)


def check_flags(args: argparse.Namespace) -> int:
    """Usage errors exit 2 through argparse; returns the session allocation."""
    parser: argparse.ArgumentParser = args.bench_parser
    if (args.prompt_file is None) == (args.chat_prompt_file is None):
        parser.error("specify exactly one of --prompt-file or --chat-prompt-file")
    if args.ctx_start > args.ctx_max:
        parser.error(f"--ctx-start {args.ctx_start} must be in 1..--ctx-max ({args.ctx_max})")
    alloc: int = args.ctx_alloc or args.ctx_max + args.gen_tokens + 1
    if alloc <= args.ctx_max + args.gen_tokens:
        parser.error(f"--ctx-alloc {alloc} must be > ctx-max + gen-tokens "
                     f"({args.ctx_max + args.gen_tokens})")  # fmt: skip
    return alloc


def prompt_ids(args: argparse.Namespace, tokenizer: Tokenizer) -> tuple[list[int], int]:
    """The benchmark sequence and the EOS id."""
    path = Path(args.prompt_file or args.chat_prompt_file)
    text = read_utf8(path, "prompt file")
    if args.chat_prompt_file is not None:
        text = chat_prompt(text, args.system, ThinkMode.NONE)
    ids = tokenizer.encode(text)
    if len(ids) < args.ctx_max:
        raise Ds4Error(f"prompt has {len(ids)} tokens, need at least --ctx-max={args.ctx_max}")
    return ids, tokenizer.special.eos


def greedy_not_eos(logits: npt.NDArray[np.float32], eos: int) -> int:
    masked = np.array(logits, dtype=np.float32)
    if 0 <= eos < masked.size:
        masked[eos] = -np.inf
    if not np.isfinite(masked).any():
        raise Ds4Error("no token other than EOS can be chosen")
    return int(np.argmax(masked))


def measure(
    session: ComputeSession,
    ids: list[int],
    eos: int,
    args: argparse.Namespace,
    ssd_stats: Callable[[], ExpertCacheStats] | None = None,
    speculative: EngineSession | None = None,
) -> Iterator[Row]:
    """`speculative`: an EngineSession with a drafter over the same compute session."""
    done = 0
    for frontier in frontiers(args.ctx_start, args.ctx_max, args.step_incr, args.step_mul):
        t0 = time.perf_counter()
        session.prefill(ids[done:frontier], chunk=PREFILL_CHUNK)
        prefill_s = time.perf_counter() - t0
        snapshot = session.payload()
        if frontier + args.gen_tokens > session.ctx:
            raise Ds4Error(f"generation would exceed allocated context at frontier {frontier}")
        logits = session.logits()
        plain = []
        before = ssd_stats() if ssd_stats is not None else None
        t0 = time.perf_counter()
        for _ in range(args.gen_tokens):
            plain.append(greedy_not_eos(logits, eos))
            logits = session.eval(plain[-1])
        gen_s = time.perf_counter() - t0
        ssd = ssd_stats().since(before) if ssd_stats is not None and before else None
        mtp = None
        if speculative is not None:
            session.load_payload(snapshot)
            mtp = _measure_mtp(speculative, plain, eos)
        session.load_payload(snapshot)
        yield Row(frontier, frontier - done, (frontier - done) / max(prefill_s, 1e-9),
                  args.gen_tokens, args.gen_tokens / max(gen_s, 1e-9), len(snapshot),
                  mtp, ssd)  # fmt: skip
        done = frontier


def _measure_mtp(session: EngineSession, expected: list[int], eos: int) -> MtpRun:
    """Decode len(expected) tokens greedily (never EOS) with drafts; they must be
    `expected`, the tokens decoded without."""
    drafter = session.drafter
    assert isinstance(drafter, MtpDrafter)
    before = (drafter.stats.proposed, drafter.stats.accepted, drafter.stats.blocks)
    t0 = time.perf_counter()
    out, passes = speculative_greedy(session, len(expected), eos)
    gen_s = time.perf_counter() - t0
    for step, (got, want) in enumerate(zip(out, expected, strict=True)):
        if got != want:
            raise Ds4Error(f"MTP changed the greedy output at step {step}: {got} != {want}")
    proposed = drafter.stats.proposed - before[0]
    accepted = drafter.stats.accepted - before[1]
    return MtpRun(
        len(out) / max(gen_s, 1e-9), accepted / proposed if proposed else 0.0, len(out) / passes
    )


def speculative_greedy(session: EngineSession, n: int, eos: int) -> tuple[list[int], int]:
    """n greedy tokens, never EOS, with the session's drafter; (tokens, main passes)."""
    out: list[int] = []
    passes = 0
    logits = session.logits()
    while len(out) < n:
        token = greedy_not_eos(logits, eos)
        drafts = drafts_for(session, token, n - len(out) - 1, eos)
        passes += 1
        if not drafts:
            logits = session.eval(token)
            out.append(token)
            continue
        start = session.pos
        rows = session.verify([token, *drafts])
        kept = [token]
        for i, draft in enumerate(drafts):
            if greedy_not_eos(rows[i], eos) != draft:
                break
            kept.append(draft)
        session.keep(start + len(kept))
        if session.drafter is not None:
            session.drafter.settle(len(drafts), len(kept) - 1)
        logits = rows[len(kept) - 1]
        out += kept
    return out, passes


def mtp_summary(rows: list[Row], draft: int) -> str:
    """One line: generation rates with and without drafts over every frontier."""
    runs = [r.mtp for r in rows if r.mtp is not None]
    plain = sum(r.gen_tps for r in rows) / len(rows)
    fast = sum(m.gen_tps for m in runs) / len(runs)
    accept = sum(m.acceptance for m in runs) / len(runs)
    per_pass = sum(m.tokens_per_pass for m in runs) / len(runs)
    return (
        f"ds4 bench: mtp (draft {draft}): acceptance {100 * accept:.1f} %, "
        f"{per_pass:.2f} tokens per main pass, decode {fast:.2f} t/s vs {plain:.2f} t/s "
        f"without (x{fast / max(plain, 1e-9):.2f}), same tokens"
    )


def run(args: argparse.Namespace) -> int:
    alloc = check_flags(args)
    if args.plot is not None:
        require_matplotlib()  # before the model loads: a missing extra fails in a second
    from ds4.apps.cli_generate import model_path

    model = model_path(args)
    engine = load_engine(engine_options(args, model))
    ssd_stats = backends.expert_cache_stats(engine.runner)
    hops = HopSummary()
    feed = backends.hop_feed(engine.runner)  # --distributed: each range's share
    if feed is not None:
        feed(hops.add)
    ids, eos = prompt_ids(args, engine.tokenizer)
    session = engine.runner.new_session(alloc)
    speculative = engine.session_over(session) if args.mtp is not None else None
    rows: list[Row] = []
    out: TextIO = sys.stdout
    if args.csv is not None:
        try:
            out = Path(args.csv).open("w", encoding="utf-8")  # noqa: SIM115 (closed below)
        except OSError as exc:
            raise Ds4Error(f"cannot write {args.csv}: {exc.strerror}") from None
    try:
        columns = (MTP_COLUMNS if speculative else "") + (
            "," + SSD_HEADER if ssd_stats is not None else ""
        )
        out.write(CSV_HEADER + columns + "\n")
        out.flush()
        for row in measure(session, ids, eos, args, ssd_stats, speculative):
            rows.append(row)
            out.write(row.csv() + "\n")
            out.flush()
    finally:
        if out is not sys.stdout:
            out.close()
    if speculative is not None and rows:
        print(mtp_summary(rows, args.mtp_draft), file=sys.stderr)
    for line in hops.lines():
        print(f"ds4 bench: distributed {line}", file=sys.stderr)
    device = backends.device_step_report(engine.runner)
    if device is not None:
        print(device, file=sys.stderr)
    if args.plot is not None:
        plot_rows(rows, args.plot, title=f"{Path(model).stem} ({args.backend}, "
                  f"{args.threads} threads) t/s")  # fmt: skip
        print(f"ds4: wrote {args.plot}", file=sys.stderr)
    return 0


# ---- bench plot ----------------------------------------------------------------------
# `ds4 bench --plot`: prefill (left axis) and generation (right axis) t/s against
# context, as a PNG (matplotlib, Agg backend; colours of docs/reference/cli-and-bench.md
# §6).


PREFILL_COLOUR = "#2563eb"
GEN_COLOUR = "#dc2626"


class BenchRow(Protocol):
    @property
    def ctx_tokens(self) -> int: ...

    @property
    def prefill_tps(self) -> float: ...

    @property
    def gen_tps(self) -> float: ...


# The advice names the interpreter that runs ds4, so it installs into the right
# environment from a checkout (.venv/bin/python) as from an installed package; the
# `dev` extra of pyproject.toml is the one that carries matplotlib.
MATPLOTLIB_ADVICE = "--plot needs matplotlib: {python} -m pip install matplotlib"


def require_matplotlib() -> None:
    """Raise the install advice when matplotlib cannot be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise Ds4Error(MATPLOTLIB_ADVICE.format(python=sys.executable)) from None


def plot_rows(rows: Sequence[BenchRow], path: str, *, title: str) -> None:
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
