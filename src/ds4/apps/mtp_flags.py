"""Engine knobs shared by the apps: --mtp FILE and --mtp-draft N (`ds4 cli`, `ds4
server`, `ds4 bench`), --power PERCENT (`ds4 cli`, `ds4 server`)."""

from __future__ import annotations

import argparse

from ds4.apps import flag_types
from ds4.domain.engine.duty_cycle import MAX_POWER, MIN_POWER

DEFAULT_MTP_DRAFT = 2  # tokens drafted per step (docs/mtp.md: measured, and why)
MAX_MTP_DRAFT = 16


def add_mtp_flags(parser: argparse.ArgumentParser) -> None:
    """--mtp FILE and --mtp-draft N: speculative decoding with the MTP block."""
    parser.add_argument(
        "--mtp",
        type=flag_types.model_file,
        metavar="GGUF",
        help="the MTP block (the separate mtp.0.* GGUF `ds4 gguf convert` writes beside the "
        "model) for speculative decoding: it drafts tokens the model then checks in one "
        "batched pass; greedy output is unchanged, sampled output keeps its distribution "
        "(docs/mtp.md). cpu and reference backends (default: off)",
    )
    parser.add_argument(
        "--mtp-draft",
        type=flag_types.int_in(1, MAX_MTP_DRAFT),
        default=DEFAULT_MTP_DRAFT,
        metavar="N",
        help=f"tokens drafted per step with --mtp, 1..{MAX_MTP_DRAFT}",
    )


def add_power_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--power",
        type=flag_types.int_in(MIN_POWER, MAX_POWER),
        default=MAX_POWER,
        metavar="PERCENT",
        help=f"duty cycle, {MIN_POWER}..{MAX_POWER}: pause after each evaluation so the engine "
        "computes about this share of the time (output unchanged; docs/power-and-prefix.md)",
    )
