"""A `ds4 eval` run: select the cases, build the answerer (the engine with an
auto-sized session, or an endpoint), run them under the full screen or plain output,
then print the report and write the trace and JSON."""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from ds4.apps import wiring
from ds4.apps.bootstrap import bootstrap_eval, model_path
from ds4.apps.engine_flags import app_options, engine_options
from ds4.apps.eval.eval_command import DEFAULT_TOKENS, load_cases, selection
from ds4.apps.eval.views import MIN_COLUMNS, MIN_ROWS, PausableTimer, PlainView, RunControls
from ds4.apps.options import EvalOptions
from ds4.domain.chat import ThinkMode, effective_think_mode
from ds4.domain.eval.cases import EvalCase, SizedContext, auto_size_context, select_cases
from ds4.domain.eval.prompts import ReplyLimits, case_prompt
from ds4.domain.eval.readers import source_table
from ds4.domain.eval.report import render_report, report_json
from ds4.domain.eval.runner import EvalRun, RunOutcome, RunSettings
from ds4.domain.eval.traces import TraceHeader
from ds4.domain.sampling import SamplingParams, seed_from_bytes
from ds4.ports.case_answerer import CaseAnswerer

TOOL = "ds4-eval"


def settings(args: argparse.Namespace, seed: int) -> RunSettings:
    mode = ThinkMode(args.think_mode) if args.think_mode else ThinkMode.HIGH
    return RunSettings(
        think_mode=mode,
        tokens=DEFAULT_TOKENS if args.tokens is None else args.tokens,
        tokens_override=args.tokens is not None,
        reply=ReplyLimits(
            args.soft_limit_reply_budget,
            args.hard_limit_reply_budget,
            args.soft_limit_think_close_rank,
        ),
        sampling=SamplingParams(
            temperature=args.temp, top_k=args.top_k, top_p=args.top_p, min_p=args.min_p, seed=seed
        ),
        retry_incomplete=args.retry_incomplete,
    )


def size_context(
    cases: Sequence[EvalCase], run: RunSettings, prompt_length: Callable[[EvalCase, int], int]
) -> SizedContext:
    """docs/reference/eval.md §3.1; with --retry-incomplete the doubled budget must fit."""
    factor = 2 if run.retry_incomplete else 1
    return auto_size_context(
        [f"{c.source}/{c.id}" for c in cases],
        [factor * run.budget(c) for c in cases],
        lambda i, ctx: prompt_length(cases[i], ctx),
    )


def eval_options(args: argparse.Namespace) -> EvalOptions:
    """The engine the parsed flags ask to answer with."""
    return app_options(
        EvalOptions,
        engine_options(args, model_path(args.backend, args.model)),
        ctx=args.ctx,
        prefill_chunk=args.prefill_chunk,
    )


def engine_answerer(
    options: EvalOptions, cases: Sequence[EvalCase], run: RunSettings
) -> tuple[CaseAnswerer, str, int]:
    """The engine answerer with its session open; (answerer, model label, largest prompt)."""
    answerer = bootstrap_eval(options)

    def length(case: EvalCase, ctx: int) -> int:
        mode = effective_think_mode(run.think_mode, ctx)
        return len(answerer.encode(case_prompt(case, mode)))

    if options.ctx is None:
        sized = size_context(cases, run, length)
        print(sized.log_line(), file=sys.stderr)
        ctx, largest = sized.ctx, sized.max_prompt
    else:
        ctx = options.ctx
        largest = max(length(c, ctx) for c in cases)
    answerer.open(ctx)
    label = options.model or f"scripted outputs from {options.script}"
    return answerer, label, largest


def header(
    args: argparse.Namespace,
    answerer: CaseAnswerer,
    model: str,
    largest: int,
    run: RunSettings,
    n: int,
    started: int,
) -> TraceHeader:
    return TraceHeader(
        started_unix=started,
        model=model,
        backend=answerer.backend,
        ctx=answerer.ctx or 0,
        max_tokens=run.tokens,
        max_prompt_tokens=largest,
        questions=n,
        temperature=run.sampling.temperature,
        top_p=run.sampling.top_p,
        min_p=run.sampling.min_p,
        seed=run.sampling.seed,
        think_mode_requested=run.think_mode.value,
        soft_limit_reply_budget=run.reply.soft,
        hard_limit_reply_budget=run.reply.hard,
        soft_limit_think_close_rank=run.reply.rank,
    )


def use_full_screen(args: argparse.Namespace) -> bool:
    if args.plain or not sys.stdout.isatty() or not sys.stdin.isatty():
        return False
    try:  # the terminal's own size ($COLUMNS/$LINES may be stale or inherited)
        size = os.get_terminal_size(sys.stdout.fileno())
    except OSError:
        return False
    if size.columns < MIN_COLUMNS or size.lines < MIN_ROWS:
        print(
            f"{TOOL}: the terminal is {size.columns}x{size.lines}, smaller than the "
            f"{MIN_COLUMNS}x{MIN_ROWS} the full screen needs: plain output",
            file=sys.stderr,
        )
        return False
    return True


@contextmanager
def ctrl_c_quits(controls: RunControls) -> Iterator[None]:
    """Plain mode: the first Ctrl+C stops the running case and ends the run with the
    report; a second one interrupts at once."""

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        if controls.quitting:
            raise KeyboardInterrupt
        controls.quit(signalled=True)

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def execute(
    eval_run: EvalRun, controls: RunControls, trace_header: TraceHeader, full_screen: bool
) -> tuple[RunOutcome, int | None]:
    if not full_screen:
        with ctrl_c_quits(controls):
            return eval_run.run(trace_header), None
    from ds4.apps.eval.tui import run_full_screen
    from ds4.apps.eval.views import TuiState

    state = eval_run.view
    assert isinstance(state, TuiState)
    outcome, got_signal = run_full_screen(lambda: eval_run.run(trace_header), state, controls)
    assert outcome is not None
    return outcome, got_signal


def build_answerer(
    args: argparse.Namespace, cases: Sequence[EvalCase], run: RunSettings
) -> tuple[CaseAnswerer, str, int]:
    """(answerer, what answers for the trace, the largest prompt in tokens)."""
    if args.endpoint is None:
        return engine_answerer(eval_options(args), cases, run)
    answerer = wiring.endpoint_answerer(
        args.endpoint,
        model=args.endpoint_model,
        api_key=args.api_key,
        timeout=args.endpoint_timeout,
    )
    try:
        answerer.check_reachable()  # before the first case, not as every case's error
    except BaseException:
        answerer.close()
        raise
    return answerer, f"{args.endpoint} ({args.endpoint_model})", 0


def run_eval(args: argparse.Namespace) -> int:
    case_set = load_cases(args)
    cases = select_cases(case_set.cases, selection(args))
    seed = args.seed or seed_from_bytes(wiring.random_source().token_bytes(8))
    run = settings(args, seed)
    trace = wiring.eval_trace_file(args.trace) if args.trace else None  # before the model
    try:
        answerer, model, largest = build_answerer(args, cases, run)
    except BaseException:
        if trace is not None:
            trace.discard()
        raise
    timer = PausableTimer(wiring.system_timer())
    controls = RunControls(timer)
    full_screen = use_full_screen(args)
    eval_run = EvalRun(
        cases,
        answerer,
        run,
        view=PlainView(len(cases)),
        control=controls,
        timer=timer,
        trace=None if trace is None else trace.write,
    )
    if full_screen:
        from ds4.apps.eval.views import TuiState

        eval_run.view = TuiState(
            eval_run.results, controls, pause_ms=args.pause_ms, hard_limit=run.reply.hard
        )
    trace_header = header(args, answerer, model, largest, run, len(cases), timer.unix())
    try:
        outcome, got_signal = execute(eval_run, controls, trace_header, full_screen)
    finally:
        if trace is not None:
            trace.close()
        answerer.close()
    sources = source_table(case_set.sources)
    sys.stdout.write(render_report(outcome.results, outcome.runtime, sources))
    sys.stdout.flush()
    if args.json is not None:
        write_json(args.json, report_json(outcome.results, outcome.runtime, sources, {
            "model": model, "backend": trace_header.backend, "ctx": trace_header.ctx,
            "seed": seed, "temperature": args.temp, "think_mode": run.think_mode.value,
            "tokens": run.tokens, "suite": args.suite,
        }))  # fmt: skip
    if got_signal is not None:
        signal.signal(got_signal, signal.SIG_DFL)
        signal.raise_signal(got_signal)  # after the screen and the report: die as asked
    if controls.signalled:
        return 130
    return outcome.exit_code


def write_json(path: str, report: dict[str, object]) -> None:
    with wiring.atomic_write(Path(path)) as handle:
        handle.write((json.dumps(report, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
