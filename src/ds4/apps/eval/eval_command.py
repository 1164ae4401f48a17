"""`ds4 eval`: the modes without a model (self-test, regrade, compare, list, validate)
and the checks between flags; a run itself is eval_run."""

from __future__ import annotations

import argparse
import sys

from ds4.apps import wiring
from ds4.apps.bootstrap import shipped_sample_suite
from ds4.apps.engine_flags import scripted_flags_problem
from ds4.apps.eval.eval_flags import DEFAULT_TOKENS
from ds4.domain.errors import Ds4Error
from ds4.domain.eval.case_schema import CaseSet
from ds4.domain.eval.cases import MAX_CASE_TOKENS, EvalCase, Selection, case_listing, select_cases
from ds4.domain.eval.readers import validation_report
from ds4.domain.eval.self_test import PASSED_LINE, run_self_tests
from ds4.domain.eval.traces import compare_traces, parse_trace, regrade


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
