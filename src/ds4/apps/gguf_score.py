"""`ds4 gguf score`: the negative log-likelihood a model gives to recorded continuations
(a vector directory) or to a text, token by token, as a TSV; `--compare A.tsv B.tsv`
puts two such tables side by side, so two quantizations of one model can be compared
(docs/test-vectors.md "Scoring")."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Never, TextIO

from tqdm import tqdm

from ds4.apps import flag_types
from ds4.apps.bootstrap import Engine, default_model_path, load_engine
from ds4.apps.cli_generate import write_atomically
from ds4.apps.engine_flags import add_engine_flags, engine_options
from ds4.apps.flag_types import MAX_CTX, DefaultsHelpFormatter, read_utf8
from ds4.apps.vectors_command import selected_vectors
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.vectors.local_run import TokenIndex, prompt_ids
from ds4.domain.vectors.nll import (
    ScoreComparison,
    ScoredToken,
    compare_tables,
    header,
    parse_table,
    row,
    score_case,
    score_text,
    summarize,
    text_budget,
)

DEFAULT_WARMUP = 32  # context-only tokens before a text is scored (as ds4's perplexity rule)
DEFAULT_CHUNK = 256


def register(tools: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = tools.add_parser(
        "score",
        formatter_class=DefaultsHelpFormatter,
        help="token-by-token NLL of recorded continuations or a text (TSV); compare two",
        description="Score how much probability a model gives to known tokens: the recorded "
        "continuations of a vector directory (each prompt rendered as `ds4 test-vectors` "
        "does, then every recorded token fed in turn) or a text (no chat markers; the "
        "first --warmup tokens are context only). Writes one TSV row per token "
        "(case, index, token_id, token_hex, nll) and prints "
        "`tokens= nll= avg_nll= ppl=`; lower avg_nll is better. --compare A.tsv B.tsv "
        "prints the mean NLL of each, the difference and the per-case means.",
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--vectors",
        type=flag_types.existing_dir,
        metavar="DIR",
        help="score the recorded steps of this vector directory (tests/test-vectors: "
        "DeepSeek's official API outputs)",
    )
    what.add_argument(
        "--text", type=flag_types.input_file, metavar="FILE", help="score this UTF-8 text"
    )
    what.add_argument(
        "--compare",
        nargs=2,
        type=flag_types.input_file,
        metavar=("A.tsv", "B.tsv"),
        help="compare two score tables of the same tokens (no model is loaded)",
    )
    add_engine_flags(p)
    p.add_argument(
        "--out",
        type=flag_types.output_file,
        metavar="FILE.tsv",
        help="write the table here, atomically, and the summary to stdout (default: the "
        "table on stdout, the summary on stderr)",
    )
    p.add_argument(
        "--only",
        action="append",
        metavar="ID",
        help="with --vectors: score only this case; repeatable (default: every case)",
    )
    p.add_argument(
        "--skip", action="append", metavar="ID", help="with --vectors: leave this case out"
    )
    p.add_argument(
        "--chunk",
        type=flag_types.int_in(1, MAX_CTX),
        default=DEFAULT_CHUNK,
        help=f"prefill chunk in tokens, 1..{MAX_CTX}; with --text also the rows of logits "
        "held at once (chunk x vocabulary x 4 bytes: 132 MB at 256 for DeepSeek V4)",
    )
    p.add_argument(
        "--warmup",
        type=flag_types.int_in(1, MAX_CTX),
        default=DEFAULT_WARMUP,
        help=f"with --text: tokens given as context before scoring starts, 1..{MAX_CTX}",
    )
    p.add_argument(
        "-c",
        "--ctx",
        type=flag_types.int_in(2, MAX_CTX),
        default=32768,
        help=f"with --text: session size, 2..{MAX_CTX}; tokens past it are not scored",
    )
    p.add_argument(
        "--quiet",
        action="store_true",
        help="no progress bar (default: a bar on stderr when it is a terminal)",
    )
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if args.compare is not None:
        return run_compare(args.compare[0], args.compare[1], sys.stdout)
    if args.text is not None and (args.only or args.skip):
        raise Ds4Error("--only and --skip apply to --vectors")
    model = default_model_path(args.model)
    # stderr is the score's summary here: the plan is not said (a refusal still is)
    engine = load_engine(engine_options(args, model), plan_log=None)
    info = {"model": model, "backend": args.backend, "numerics": args.numerics}
    if args.vectors is not None:
        rows = _score_vectors(args, engine)
        info["source"] = f"vectors {args.vectors}"
    else:
        rows = _score_text(args, engine)
        info["source"] = f"text {args.text} (warmup {args.warmup})"
    table = header(info) + "".join(row(r) for r in rows)
    summary = summarize(rows).line()
    if args.out is not None:
        write_atomically(args.out, table.encode())
        print(summary)
    else:
        sys.stdout.write(table)
        print(summary, file=sys.stderr)
    return 0


def _bar(args: argparse.Namespace, total: int) -> tqdm[Never]:
    return flag_types.progress_bar(total, quiet=args.quiet, unit="tok", leave=False)


def _advance(bar: tqdm[Never]) -> Callable[[int], None]:
    def advance(tokens: int) -> None:
        bar.update(tokens)

    return advance


def _score_vectors(args: argparse.Namespace, engine: Engine) -> list[ScoredToken]:
    _vectors, cases = selected_vectors(args.vectors, args.only, args.skip)
    index = TokenIndex(engine.tokenizer)
    total = sum(len(prompt_ids(engine.tokenizer, c.prompt)) + len(c.steps) for c in cases)
    rows: list[ScoredToken] = []
    with _bar(args, total) as bar:
        for case in cases:
            bar.set_description(case.id)
            session = EngineSession.over(engine.runner.new_session(case.ctx), chunk=args.chunk)
            rows += score_case(session, engine.tokenizer, index, case, progress=_advance(bar))
    return rows


def _score_text(args: argparse.Namespace, engine: Engine) -> list[ScoredToken]:
    path = Path(args.text)
    text = read_utf8(path)
    ids = engine.tokenizer.encode(text)
    budget = text_budget(len(ids), args.warmup, args.ctx)
    ctx = args.warmup + budget  # room for every evaluated token (the last is not evaluated)
    compute = engine.runner.new_session(ctx)
    with _bar(args, args.warmup + budget - 1) as bar:
        return list(
            score_text(
                compute,
                engine.tokenizer,
                ids,
                name="text",
                warmup=args.warmup,
                chunk=args.chunk,
                progress=_advance(bar),
            )
        )


def _read_table(path: str) -> list[ScoredToken]:
    text = read_utf8(path)
    return parse_table(text, path)


def run_compare(a: str, b: str, out: TextIO) -> int:
    comparison = compare_tables(_read_table(a), _read_table(b), (a, b))
    out.write(comparison_text(comparison, a, b))
    return 0


def comparison_text(comparison: ScoreComparison, a: str, b: str) -> str:
    width = max(len(c.case) for c in (comparison.total, *comparison.cases)) + 2
    lines = [
        f"A: {a}",
        f"B: {b}",
        f"{'case':<{width}}{'tokens':>7}  {'avg_nll A':>12}  {'avg_nll B':>12}  {'B - A':>12}",
    ]
    for item in (comparison.total, *comparison.cases):
        delta = item.b.avg_nll - item.a.avg_nll
        lines.append(
            f"{item.case:<{width}}{item.a.tokens:>7}  {item.a.avg_nll:>12.6f}  "
            f"{item.b.avg_nll:>12.6f}  {delta:>+12.6f}"
        )
    total = comparison.total
    same = total.a.tokens - comparison.b_worse - comparison.b_better
    verdict = "higher (worse)" if total.b.avg_nll > total.a.avg_nll else "lower or equal"
    lines += [
        f"ppl A {total.a.ppl:.6f}, ppl B {total.b.ppl:.6f}",
        f"B's mean NLL is {verdict} than A's; per token B is worse on {comparison.b_worse}, "
        f"better on {comparison.b_better}, equal on {same}",
    ]
    return "\n".join(lines) + "\n"
