"""`ds4 eval`: its flags, the modes without a model (self-test, regrade, compare, list,
validate) and the checks between flags; a run itself is eval_run."""

from __future__ import annotations

import argparse
import sys

from ds4.apps import flag_types, wiring
from ds4.apps.bootstrap import shipped_sample_suite
from ds4.apps.cli_command import add_sampling_flags
from ds4.apps.engine_flags import (
    add_backend_flags,
    add_distributed_flags,
    add_model_flag,
    add_numerics_flag,
    scripted_flags_problem,
)
from ds4.apps.flag_types import INT_MAX, MAX_CTX, DefaultsHelpFormatter
from ds4.domain.errors import Ds4Error
from ds4.domain.eval.case_schema import CaseSet
from ds4.domain.eval.cases import (
    DEFAULT_SUITE,
    MAX_CASE_TOKENS,
    EvalCase,
    Selection,
    case_listing,
    parse_case_sequence,
    select_cases,
)
from ds4.domain.eval.prompts import ReplyLimits
from ds4.domain.eval.readers import AUTO, FORMAT_NAMES, validation_report
from ds4.domain.eval.self_test import PASSED_LINE, run_self_tests
from ds4.domain.eval.traces import compare_traces, parse_trace, regrade
from ds4.domain.sampling import MAX_TOP_K


def run(args: argparse.Namespace) -> int:
    if args.self_test_extractors:
        return self_test()
    if args.regrade_trace is not None:
        return regrade_trace(args)
    if args.compare is not None:
        return compare(args.compare[0], args.compare[1])
    if args.validate_cases:
        return validate(args)
    if args.list_cases:
        for line in case_listing(selected_cases(args)):
            print(line)
        return 0
    check_run_flags(args)
    from ds4.apps.eval.eval_run import run_eval

    return run_eval(args)


def self_test() -> int:
    failures = run_self_tests()
    for line in failures:
        print(line, file=sys.stderr)
    if failures:
        return 1
    print(PASSED_LINE)
    return 0


def case_files(args: argparse.Namespace) -> list[str]:
    if args.cases:
        return list(args.cases)
    sample = shipped_sample_suite()
    if not sample.exists():
        raise Ds4Error(f"no cases: pass --cases FILE (the sample suite {sample} is not here)")
    return [str(sample)]


def load_cases(args: argparse.Namespace) -> CaseSet:
    return wiring.eval_case_files(case_files(args), args.cases_format)


def selection(args: argparse.Namespace) -> Selection:
    return Selection(
        suite=args.suite,
        sources=tuple(args.source),
        domains=tuple(args.domain),
        case_ids=tuple(args.case_id),
        sequence=args.case_sequence or (),
        questions=args.questions,
    )


def selected_cases(args: argparse.Namespace) -> list[EvalCase]:
    return select_cases(load_cases(args).cases, selection(args))


def regrade_trace(args: argparse.Namespace) -> int:
    cases = load_cases(args)
    summary = regrade(parse_trace(wiring.eval_trace_bytes(args.regrade_trace)), cases.find)
    for line in summary.lines:
        print(line)
    print(summary.line(args.regrade_trace))
    return summary.exit_code


def compare(a: str, b: str) -> int:
    first = parse_trace(wiring.eval_trace_bytes(a))
    second = parse_trace(wiring.eval_trace_bytes(b))
    for line in compare_traces(first, second, a, b).lines:
        print(line)
    return 0


def validate(args: argparse.Namespace) -> int:
    report = validation_report(
        [(path, wiring.eval_text_file(path)) for path in case_files(args)], args.cases_format
    )
    for line in report.lines:
        print(line)
    return 1 if report.problems else 0


def check_run_flags(args: argparse.Namespace) -> None:
    """The rules between flags of a run (usage errors, exit 2); the model-free modes
    do not need them."""
    parser: argparse.ArgumentParser = args.eval_parser
    tokens = DEFAULT_TOKENS if args.tokens is None else args.tokens
    hard, soft = args.hard_limit_reply_budget, args.soft_limit_reply_budget
    if tokens > MAX_CASE_TOKENS:
        parser.error(f"--tokens ({tokens}) exceeds the {MAX_CASE_TOKENS} token context cap")
    if hard >= tokens:
        parser.error(f"--hard-limit-reply-budget ({hard}) must be smaller than --tokens ({tokens})")
    if soft < hard:
        parser.error(
            f"--soft-limit-reply-budget ({soft}) must be >= --hard-limit-reply-budget ({hard})"
        )
    if args.endpoint is None:
        problem = scripted_flags_problem(args)
        if problem is not None:
            parser.error(problem)
        if args.api_key is not None:
            parser.error("--api-key needs --endpoint")
    elif args.script is not None or args.model is not None:
        parser.error("--endpoint runs on another server: drop -m/--model and --script")
    elif args.distributed is not None or args.layer_files:
        parser.error("--endpoint runs on another server: drop --distributed and --layer-files")


# ---- eval flags ----------------------------------------------------------------------
# `ds4 eval` flags (docs/eval.md "Flags"): the engine's own (shared with cli, bench and
# server), the budgets and sampling of a run, case selection, outputs and modes.


DEFAULT_TOKENS = 16_000
DEFAULT_PREFILL_CHUNK = 2048
DEFAULT_ENDPOINT_MODEL = "deepseek-v4-flash"


def _case_sequence(text: str) -> tuple[int, ...]:
    try:
        return parse_case_sequence(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "eval",
        formatter_class=DefaultsHelpFormatter,
        help="capability regression harness: run question sets, grade answers, report",
        description="Render each case as a chat prompt, generate token by token, extract and "
        "grade the final answer, report per case, source and suite. A regression harness for "
        "the engine (numerics, tokenizer, template, sampling), not a leaderboard. Cases come "
        "from --cases files (default: the sample suite evals/sample.jsonl); docs/eval.md.",
    )
    add_model_flag(p)
    add_backend_flags(p, scripted=True)
    add_numerics_flag(p)
    add_distributed_flags(p)
    _budgets(p)
    _sampling(p)
    _cases(p)
    _outputs(p)
    _modes(p)
    _endpoint(p)
    p.set_defaults(run=run, eval_parser=p)


def _budgets(p: argparse.ArgumentParser) -> None:
    d = ReplyLimits()
    g = p.add_argument_group("budgets")
    g.add_argument(
        "-n",
        "--tokens",
        type=flag_types.int_in(1, INT_MAX),
        default=None,
        help=f"generation budget per case, at most {MAX_CASE_TOKENS}; given, it overrides "
        f"the cases' own max_tokens (default: a case's max_tokens, else {DEFAULT_TOKENS})",
    )
    g.add_argument(
        "--soft-limit-reply-budget",
        type=flag_types.int_in(1, INT_MAX),
        default=d.soft,
        metavar="N",
        help="with N tokens left and still thinking, close the reasoning when </think> is "
        "among the top --soft-limit-think-close-rank tokens; must be >= the hard limit",
    )
    g.add_argument(
        "--hard-limit-reply-budget",
        type=flag_types.int_in(1, INT_MAX),
        default=d.hard,
        metavar="N",
        help="with N tokens left and still thinking, force </think>; must be below --tokens",
    )
    g.add_argument(
        "--soft-limit-think-close-rank",
        type=flag_types.int_in(1, MAX_TOP_K),
        default=d.rank,
        metavar="N",
        help=f"rank (1..{MAX_TOP_K}) </think> must reach for a soft close",
    )
    g.add_argument(
        "-c",
        "--ctx",
        type=flag_types.int_in(2, MAX_CTX),
        default=None,
        help=f"session context, 2..{MAX_CTX} (default: auto, the largest prompt plus its "
        "budget; cases that do not fit a smaller one are skipped)",
    )
    g.add_argument(
        "--retry-incomplete",
        action="store_true",
        help="run a case once more with twice the budget when it ran out of tokens before "
        "writing its Answer: line",
    )
    g.add_argument(
        "--prefill-chunk",
        type=flag_types.int_in(0, MAX_CTX),
        default=DEFAULT_PREFILL_CHUNK,
        help=f"prefill chunk in tokens, 0..{MAX_CTX}; pause, quit and switch take effect "
        "between chunks (0: one pass)",
    )


def _sampling(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("sampling and thinking")
    add_sampling_flags(g, temp=0.0, seed_note=", written to the trace")
    think = g.add_mutually_exclusive_group()
    think.add_argument(
        "--think",
        dest="think_mode",
        action="store_const",
        const="high",
        help="thinking mode (the default)",
    )
    think.add_argument(
        "--nothink", dest="think_mode", action="store_const", const="none", help="no thinking"
    )


def _cases(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("cases")
    g.add_argument(
        "--cases",
        action="append",
        type=flag_types.input_file,
        metavar="FILE",
        help="a case file (repeatable): our JSONL, GPQA CSV, AIME-style JSONL or MMLU-Pro "
        "JSONL/CSV (default: evals/sample.jsonl)",
    )
    g.add_argument(
        "--cases-format",
        choices=FORMAT_NAMES,
        default=AUTO,
        help="the format of every --cases file (auto: told from its name and first record)",
    )
    g.add_argument(
        "--suite",
        default=DEFAULT_SUITE,
        metavar="NAME",
        help="core, hard, hard-smoke, a case file's own suite name, or all",
    )
    g.add_argument(
        "--source",
        action="append",
        default=[],
        metavar="NAME",
        help="only this source, repeatable (default: every source)",
    )
    g.add_argument(
        "--domain",
        action="append",
        default=[],
        metavar="NAME",
        help="only this domain, repeatable; physics also takes physics/optics (default: every "
        "domain)",
    )
    g.add_argument(
        "--case-id",
        action="append",
        default=[],
        metavar="ID",
        help="only this case id, repeatable (default: every case)",
    )
    g.add_argument(
        "--case-sequence",
        type=_case_sequence,
        metavar="LIST",
        help="1-based case numbers of the filtered list, comma-separated, run in that order",
    )
    g.add_argument(
        "--questions",
        type=flag_types.int_in(1, INT_MAX),
        metavar="N",
        help="only the first N selected cases (default: all)",
    )


def _outputs(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("outputs")
    g.add_argument(
        "--trace",
        type=flag_types.output_file,
        metavar="FILE",
        help="write every case's prompts and raw output (docs/reference/eval.md §6)",
    )
    g.add_argument(
        "--json",
        type=flag_types.output_file,
        metavar="FILE",
        help="write the report as JSON (a cases list with id, state, answer_given, correct)",
    )
    g.add_argument(
        "--plain", action="store_true", help="plain streamed output instead of the full screen"
    )
    g.add_argument(
        "--pause-ms",
        type=flag_types.int_in(0, 60_000),
        default=350,
        help="full screen: pause after each result, 0..60000 ms",
    )


def _modes(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("modes without a model").add_mutually_exclusive_group()
    g.add_argument(
        "--self-test-extractors",
        action="store_true",
        help="check the answer extractors and trace parser against their table, then exit",
    )
    g.add_argument(
        "--regrade-trace",
        type=flag_types.input_file,
        metavar="FILE",
        help="grade a trace's outputs again with today's extractors (cases from --cases)",
    )
    g.add_argument(
        "--compare",
        nargs=2,
        type=flag_types.input_file,
        metavar=("A.trace", "B.trace"),
        help="put two traces of the same cases side by side",
    )
    g.add_argument("--list-cases", action="store_true", help="list the selected cases and exit")
    g.add_argument(
        "--validate-cases",
        action="store_true",
        help="check every line of the case files (all problems, not only the first), exit",
    )


def _endpoint(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("another server (instead of the in-process engine)")
    g.add_argument(
        "--endpoint",
        metavar="URL",
        help="an OpenAI-compatible server (http://host:port, .../v1 or the full "
        ".../v1/chat/completions): the same cases and prompts, graded the same way",
    )
    g.add_argument(
        "--api-key", type=flag_types.api_key, help="with --endpoint: sent as a Bearer token"
    )
    g.add_argument(
        "--endpoint-model",
        default=DEFAULT_ENDPOINT_MODEL,
        metavar="NAME",
        help="with --endpoint: the request's model field",
    )
    g.add_argument(
        "--endpoint-timeout",
        type=flag_types.float_in(1, 86_400),
        default=600.0,
        metavar="SECONDS",
        help="with --endpoint: longest wait for the next streamed bytes (1..86400)",
    )
