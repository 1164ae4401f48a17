"""Build every tiny HF oracle model and its reference logits.

    python -m tools.oracle.make_fixtures --out DIR [--schedule NAME ...] [--full-logits]

For each schedule, DIR/<schedule>/ gets ``hf/`` (save_pretrained output + tokenizer),
``official/`` (the same weights under DeepSeek's hub names) and ``reference_logits.npz``.
Each schedule starts from its known-good seed (or ``--seed``) and moves upwards until every
router and indexer top-k choice on the fixed sequences wins by at least MIN_RELATIVE_MARGIN.
DIR/manifest.json lists the chosen seeds and margins. Output bytes depend only on the arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from tools.oracle.margins import MIN_RELATIVE_MARGIN
from tools.oracle.reference_logits import (
    DEFAULT_TEXT,
    RunResult,
    run_sequences,
    save_reference,
    token_sequences,
)
from tools.oracle.schedules import SCHEDULES, TinySchedule
from tools.oracle.tiny_hf import build_model, save_hf, save_official, tokenizer_files

MAX_SEED_TRIES = 32


def make_schedule(
    schedule: TinySchedule, out: Path, seed: int, text: Path, full: bool
) -> dict[str, object]:
    seqs = token_sequences(schedule.seq_lengths, tokenizer_files()[0], text)
    for candidate in range(seed, seed + MAX_SEED_TRIES):
        model, state = build_model(schedule, candidate)
        result: RunResult = run_sequences(model, seqs, full=full)
        if result.margins.smallest() >= MIN_RELATIVE_MARGIN:
            break
        print(
            f"  {schedule.name}: seed {candidate} has a near-tie "
            f"({result.margins.smallest():.2e}), trying the next",
            file=sys.stderr,
        )
    else:
        raise RuntimeError(f"{schedule.name}: no seed in {MAX_SEED_TRIES} tries beat the margin")
    target = out / schedule.name
    save_hf(model, target / "hf")
    save_official(schedule, model.config, state, target / "official")
    config_json = (target / "hf" / "config.json").read_text()
    text_source = text.name if text.is_file() else "random-ids"
    save_reference(
        target / "reference_logits.npz", result, config_json, schedule.name, candidate, text_source
    )
    return {
        "seed": candidate,
        "seq_lengths": list(schedule.seq_lengths),
        **result.margins.summary(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.oracle.make_fixtures")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--schedule", action="append", choices=sorted(SCHEDULES))
    parser.add_argument("--seed", type=int, help="first seed to try (default: per schedule)")
    parser.add_argument("--text", type=Path, default=DEFAULT_TEXT)
    parser.add_argument("--full-logits", action="store_true", help="also store [L, V] logits")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)

    torch.set_num_threads(args.threads)
    torch.use_deterministic_algorithms(True)
    args.out.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, object] = {}
    for name in args.schedule or list(SCHEDULES):
        t0 = time.perf_counter()
        schedule = SCHEDULES[name]
        seed = schedule.seed if args.seed is None else args.seed
        manifest[name] = make_schedule(schedule, args.out, seed, args.text, args.full_logits)
        print(f"{name}: {manifest[name]} in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
    (args.out / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
