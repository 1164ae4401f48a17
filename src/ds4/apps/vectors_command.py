"""`ds4 test-vectors`: does this engine, with this model file, reproduce the recorded
next-token vectors? By default DeepSeek's official API vectors in tests/test-vectors;
--write-vectors records a model's own (docs/test-vectors.md)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Never

from tqdm import tqdm

from ds4.apps import flag_types
from ds4.apps.bootstrap import Engine, default_model_path, load_engine, shipped_test_vectors
from ds4.apps.cli_dumps import write_atomically
from ds4.apps.engine_flags import add_engine_flags
from ds4.apps.flag_types import MAX_CTX
from ds4.apps.help_format import DefaultsHelpFormatter
from ds4.apps.vectors_files import RecordedCase, load_vectors, write_vectors
from ds4.apps.vectors_report import case_text, report_json, summary_text
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.vectors.judge import DEFAULT_TOLERANCE
from ds4.domain.vectors.local_run import CaseReport, check_case, prompt_ids, record_case
from ds4.domain.vectors.official_json import RecordHeader
from ds4.domain.vectors.records import MAX_STEPS, VectorCase, VectorSet
from ds4.domain.vectors.token_index import TokenIndex

EXIT_FAILED = 1
OFFICIAL_CHUNK = 2048  # the prefill chunk the official comparison was pinned to


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "test-vectors",
        formatter_class=DefaultsHelpFormatter,
        help="check a model against DeepSeek's official API next-token vectors",
        description="For each case: render the prompt as one user message (empty system "
        "text, thinking disabled), prefill a session of the case's size, then per step "
        "compare the local top-k logprobs with the recorded ones: the argmax token's bytes "
        "must equal the recorded token's, and every ranked recorded alternative must be "
        "in the local top-k with a logprob within --tolerance; the next step continues "
        "from the local argmax. Exit status: 0 every case passed, 1 a case failed, "
        "2 bad flags or vector files. See docs/test-vectors.md.",
    )
    add_engine_flags(p)
    p.add_argument(
        "--vectors",
        type=flag_types.existing_dir,
        metavar="DIR",
        help="vector directory: manifest.json, official.vec, prompts/, official/ "
        "(default: tests/test-vectors, DeepSeek's official API outputs)",
    )
    p.add_argument(
        "--only",
        action="append",
        metavar="ID",
        help="run only this case; repeat for several (default: every case)",
    )
    p.add_argument("--skip", action="append", metavar="ID", help="leave this case out; repeatable")
    p.add_argument(
        "--tolerance",
        type=flag_types.float_in(0, 1000),
        default=DEFAULT_TOLERANCE,
        help="largest allowed |local - recorded| logprob of a recorded alternative, 0..1000",
    )
    p.add_argument(
        "--chunk",
        type=flag_types.int_in(1, MAX_CTX),
        default=OFFICIAL_CHUNK,
        help=f"prefill chunk in tokens, 1..{MAX_CTX} (2048: what the official comparison pins)",
    )
    p.add_argument(
        "--json",
        type=flag_types.output_file,
        metavar="FILE",
        help="also write the whole report, every step and alternative, as JSON (default: "
        "the text report only)",
    )
    p.add_argument(
        "--write-vectors",
        type=flag_types.output_dir,
        metavar="DIR",
        help="instead of checking, record this model's greedy steps on the cases' prompts "
        "and write them to DIR in the same format (a model checked against its own "
        "recording passes; record with --numerics fp32 for a reference; default: check)",
    )
    p.add_argument(
        "--steps",
        type=flag_types.int_in(1, MAX_STEPS),
        default=None,
        help=f"with --write-vectors: steps per case, 1..{MAX_STEPS} (default: each case's "
        "own count)",
    )
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar (default: a bar on stderr when it is a terminal)",
    )
    p.set_defaults(run=run)


def vectors_dir(flag: str | None) -> str:
    return flag if flag is not None else str(shipped_test_vectors())


def selected_vectors(
    directory: str | None, only: list[str] | None, skip_ids: list[str] | None
) -> tuple[VectorSet, list[VectorCase]]:
    """The vector set (validated) and the cases --only/--skip leave."""
    vectors = load_vectors(vectors_dir(directory), only)
    skip = set(skip_ids or ())
    unknown = sorted(skip - set(vectors.case_ids()))
    if unknown:
        raise Ds4Error(f"--skip {unknown[0]}: no such case among {', '.join(vectors.case_ids())}")
    cases = [c for c in vectors.cases if c.id not in skip]
    if not cases:
        raise Ds4Error("--only/--skip leave no case to run")
    return vectors, cases


def run(args: argparse.Namespace) -> int:
    if args.steps is not None and args.write_vectors is None:
        raise Ds4Error("--steps only applies with --write-vectors")
    if args.write_vectors is not None:
        if args.json is not None:
            raise Ds4Error("--json reports a check; --write-vectors records instead")
        if Path(args.write_vectors).resolve() == Path(vectors_dir(args.vectors)).resolve():
            raise Ds4Error(
                f"--write-vectors {args.write_vectors} is the directory being read; "
                "write a local recording elsewhere"
            )
    vectors, cases = selected_vectors(args.vectors, args.only, args.skip)
    model = default_model_path(args.model)
    engine = load_engine(model, backend=args.backend, numerics=args.numerics, threads=args.threads)
    directory = vectors_dir(args.vectors)
    print(
        f"ds4 test-vectors: {model} ({args.backend} backend, numerics {args.numerics}) "
        f"against {directory}: {len(cases)} case(s) recorded by {vectors.source} "
        f"({vectors.model})",
        flush=True,
    )
    if args.write_vectors is not None:
        return _record(args, engine, vectors, cases, model)
    return _check(args, engine, vectors, cases, directory, model)


def _bar(
    args: argparse.Namespace, engine: Engine, cases: list[VectorCase], steps: int | None
) -> tqdm[Never]:
    total = sum(
        len(prompt_ids(engine.tokenizer, c.prompt)) + (steps or len(c.steps)) for c in cases
    )
    return tqdm(
        total=total, unit="tok", file=sys.stderr, disable=True if args.quiet else None, leave=False
    )


def _advance(bar: tqdm[Never]) -> Callable[[int], None]:
    def advance(tokens: int) -> None:
        bar.update(tokens)

    return advance


def _session(engine: Engine, case: VectorCase, chunk: int) -> EngineSession:
    return EngineSession.over(engine.runner.new_session(case.ctx), chunk=chunk)


def _check(
    args: argparse.Namespace,
    engine: Engine,
    vectors: VectorSet,
    cases: list[VectorCase],
    directory: str,
    model: str,
) -> int:
    index = TokenIndex(engine.tokenizer)
    top_k = vectors.top_logprobs
    reports: list[CaseReport] = []
    with _bar(args, engine, cases, None) as bar:
        for case in cases:
            bar.set_description(case.id)
            started = time.monotonic()
            report = check_case(
                _session(engine, case, args.chunk),
                engine.tokenizer,
                index,
                case,
                top_k=top_k,
                tolerance=args.tolerance,
                progress=_advance(bar),
            )
            seconds = time.monotonic() - started
            reports.append(report)
            bar.write(case_text(report, top_k, args.tolerance, seconds), file=sys.stdout)
    print(summary_text(reports), flush=True)
    if args.json is not None:
        run_info = {
            "model": model,
            "backend": args.backend,
            "numerics": args.numerics,
            "chunk": args.chunk,
            "vectors": directory,
            "source": vectors.source,
            "recorded_model": vectors.model,
        }
        write_atomically(args.json, report_json(reports, run_info, top_k, args.tolerance))
    return 0 if all(r.passed for r in reports) else EXIT_FAILED


def _record(
    args: argparse.Namespace,
    engine: Engine,
    vectors: VectorSet,
    cases: list[VectorCase],
    model: str,
) -> int:
    recorded = []
    with _bar(args, engine, cases, args.steps) as bar:
        for case in cases:
            bar.set_description(case.id)
            prompt_tokens, steps = record_case(
                _session(engine, case, args.chunk),
                engine.tokenizer,
                case,
                args.steps or len(case.steps),
                top_k=vectors.top_logprobs,
                progress=_advance(bar),
            )
            recorded.append(RecordedCase(case, prompt_tokens, steps))
    header = RecordHeader(
        source="ds4 test-vectors --write-vectors",
        model=Path(model).name,
        endpoint=f"local {args.backend} backend, numerics {args.numerics}",
        created_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    out = write_vectors(args.write_vectors, header, vectors.top_logprobs, recorded)
    print(f"wrote {len(recorded)} case(s) to {out}")
    return 0
