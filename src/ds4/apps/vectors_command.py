"""`ds4 test-vectors`: does this engine, with this model file, reproduce the recorded
next-token vectors? By default DeepSeek's official API vectors in tests/test-vectors;
--write-vectors records a model's own (docs/test-vectors.md)."""

from __future__ import annotations

import argparse
import json
import math
import stat
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Never

from tqdm import tqdm

from ds4.apps import flag_types, wiring
from ds4.apps.bootstrap import Engine, default_model_path, load_engine, shipped_test_vectors
from ds4.apps.cli_command import display_piece
from ds4.apps.cli_generate import write_atomically
from ds4.apps.engine_flags import add_engine_flags, engine_options
from ds4.apps.flag_types import MAX_CTX, DefaultsHelpFormatter
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.vectors.files import (
    VEC_FILE,
    RecordHeader,
    read_vector_set,
    render_official,
    render_vec,
)
from ds4.domain.vectors.local_run import (
    DEFAULT_TOLERANCE,
    AlternativeCheck,
    CaseReport,
    LocalToken,
    TokenIndex,
    VectorStepReport,
    check_case,
    prompt_ids,
    record_case,
)
from ds4.domain.vectors.records import (
    MANIFEST,
    MAX_STEPS,
    Manifest,
    ManifestEntry,
    VectorCase,
    VectorFileError,
    VectorSet,
    VectorStep,
    VectorToken,
    render_manifest,
)

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
    engine = load_engine(engine_options(args, model))
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
    return flag_types.progress_bar(total, quiet=args.quiet, unit="tok", leave=False)


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


# ---- vectors files -------------------------------------------------------------------
# A vector directory on disk: read it through the domain parsers (errors name the
# directory and file), and write a set recorded from a local model, file by file
# atomically, the manifest last (docs/test-vectors.md).


MAX_FILE_BYTES = 256 << 20  # far above any prompt a model's context holds


def load_vectors(directory: str, only: Sequence[str] | None = None) -> VectorSet:
    """The directory's cases (those in `only`, when given), validated."""
    root = Path(directory)
    if not (root / MANIFEST).exists():
        raise VectorFileError(f"{root}: no {MANIFEST} (not a test-vector directory)")

    def read(relative: str) -> bytes:
        return _read(root / relative, relative)

    try:
        return read_vector_set(read, frozenset(only) if only else None)
    except VectorFileError as exc:
        raise VectorFileError(f"{root}: {exc}") from None


def _read(path: Path, name: str) -> bytes:
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise VectorFileError(f"{name}: not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise VectorFileError(f"{name}: {info.st_size} bytes, more than a vector file holds")
        return path.read_bytes()
    except FileNotFoundError:
        raise VectorFileError(f"{name}: no such file") from None
    except OSError as exc:
        raise VectorFileError(f"{name}: {(exc.strerror or str(exc)).lower()}") from None


@dataclass(frozen=True)
class RecordedCase:
    case: VectorCase  # the case it was recorded for (prompt, kind, ctx)
    prompt_tokens: int
    steps: tuple[VectorStep, ...]


def write_vectors(
    directory: str, header: RecordHeader, top_logprobs: int, recorded: Sequence[RecordedCase]
) -> Path:
    """manifest.json, official.vec, prompts/ and official/ for the recorded cases."""
    root = Path(directory)
    entries = []
    written = []
    for item in recorded:
        case = item.case
        entry = ManifestEntry(
            id=case.id,
            kind=case.kind,
            prompt_file=f"prompts/{case.id}.txt",
            official_file=f"official/{case.id}.official.json",
            prompt_chars=len(case.prompt),
            steps=len(item.steps),
        )
        record = render_official(
            header, entry, case.prompt, item.prompt_tokens, top_logprobs, item.steps
        )
        _write(root / entry.prompt_file, case.prompt.encode("utf-8"))
        _write(root / entry.official_file, record)
        entries.append(entry)
        written.append(
            VectorCase(
                case.id,
                case.kind,
                case.prompt,
                case.ctx,
                item.steps,
                entry.prompt_file,
                entry.official_file,
                item.prompt_tokens,
            )
        )
    manifest = Manifest(
        source=header.source,
        model=header.model,
        endpoint=header.endpoint,
        top_logprobs=top_logprobs,
        max_tokens=max(len(item.steps) for item in recorded),
        entries=tuple(entries),
    )
    _write(root / VEC_FILE, render_vec(written))
    _write(root / MANIFEST, render_manifest(manifest))
    return root


def _write(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with wiring.atomic_write(path) as handle:
            handle.write(data)
    except OSError as exc:
        raise VectorFileError(f"cannot write {path}: {exc.strerror or exc}") from None


# ---- vectors report ------------------------------------------------------------------
# What `ds4 test-vectors` prints per case and step, and its --json report.


REPORT_SCHEMA = "ds4-test-vectors-report-v1"
SHOWN_PROBLEMS = 3


def _f(value: float | None, places: int = 3) -> str:
    return "-" if value is None else f"{value:.{places}f}"


def case_text(report: CaseReport, top_k: int, tolerance: float, seconds: float) -> str:
    case = report.case
    recorded = "" if case.prompt_tokens is None else f" (recorded {case.prompt_tokens})"
    verdict = "PASS" if report.passed else f"FAIL at step {report.first_failure}"
    lines = [
        f"{verdict}  {case.id}: ctx {case.ctx}, {report.prompt_tokens} prompt tokens{recorded}, "
        f"max |Δlogprob| {_f(report.max_abs_delta)}, {seconds:.2f} s"
    ]
    if case.prompt_tokens is not None and case.prompt_tokens != report.prompt_tokens:
        lines.append(
            "  note: the prompt token counts differ: this tokenizer or chat encoding is not "
            "the one the vectors were recorded with"
        )
    for step in report.steps:
        lines.append("  " + _step_text(step, top_k, tolerance))
    return "\n".join(lines)


def _step_text(step: VectorStepReport, top_k: int, tolerance: float) -> str:
    mine = step.recorded_local
    where = "absent" if mine is None else f"rank {mine.rank}, logprob {_f(mine.logprob)}"
    text = (
        f"step {step.index}: {'ok  ' if step.passed else 'FAIL'} "
        f"recorded {display_piece(step.recorded.raw)} ({_f(step.recorded_logprob)}) here {where}; "
        f"argmax {display_piece(step.chosen.raw)} ({_f(step.chosen.logprob)}); "
        f"max |Δ| {_f(step.max_abs_delta)}"
    )
    problems = step.problems(top_k, tolerance)
    if len(problems) > SHOWN_PROBLEMS:  # the --json report lists every one
        more = len(problems) - SHOWN_PROBLEMS
        problems = [*problems[:SHOWN_PROBLEMS], f"{more} more alternatives"]
    return text + (" -- " + "; ".join(problems) if problems else "")


def summary_text(reports: Sequence[CaseReport]) -> str:
    passed = sum(1 for r in reports if r.passed)
    failed = [r.case.id for r in reports if not r.passed]
    tail = f"; failed: {', '.join(failed)}" if failed else ""
    return f"test-vectors: {passed}/{len(reports)} cases passed{tail}"


def _num(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else value


def _token(token: VectorToken) -> dict[str, object]:
    return {"text": token.text, "bytes": list(token.raw)}


def _local(token: LocalToken | None) -> dict[str, object] | None:
    if token is None:
        return None
    return {
        "id": token.id,
        "text": token.raw.decode("utf-8", errors="replace"),
        "bytes": list(token.raw),
        "logprob": _num(token.logprob),
        "rank": token.rank,
    }


def _alternative(alt: AlternativeCheck) -> dict[str, object]:
    return {
        "token": _token(alt.token),
        "recorded_logprob": alt.recorded,
        "local": _local(alt.local),
        "delta": _num(alt.delta),
        "ok": alt.ok,
    }


def report_json(
    reports: Sequence[CaseReport], run: Mapping[str, object], top_k: int, tolerance: float
) -> bytes:
    """The whole run as one JSON object (schema ds4-test-vectors-report-v1)."""
    body = {
        "schema": REPORT_SCHEMA,
        **run,
        "top_k": top_k,
        "tolerance": tolerance,
        "passed": all(r.passed for r in reports),
        "cases_passed": sum(1 for r in reports if r.passed),
        "cases": [
            {
                "id": r.case.id,
                "kind": r.case.kind,
                "ctx": r.case.ctx,
                "passed": r.passed,
                "first_failing_step": r.first_failure,
                "max_abs_delta": _num(r.max_abs_delta),
                "prompt_tokens": r.prompt_tokens,
                "recorded_prompt_tokens": r.case.prompt_tokens,
                "steps": [
                    {
                        "step": s.index,
                        "passed": s.passed,
                        "argmax_ok": s.argmax_ok,
                        "recorded": _token(s.recorded),
                        "recorded_logprob": s.recorded_logprob,
                        "recorded_here": _local(s.recorded_local),
                        "argmax": _local(s.chosen),
                        "max_abs_delta": _num(s.max_abs_delta),
                        "alternatives": [_alternative(a) for a in s.alternatives],
                        "problems": s.problems(top_k, tolerance),
                    }
                    for s in r.steps
                ],
            }
            for r in reports
        ],
    }
    return (json.dumps(body, indent=1, ensure_ascii=False) + "\n").encode()
