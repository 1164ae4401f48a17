"""Engine knobs shared by the apps: --mtp FILE and --mtp-draft N (`ds4 cli`, `ds4
server`, `ds4 bench`), --power PERCENT and the --dir-steering-* flags (`ds4 cli`,
`ds4 server`)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from ds4.apps import flag_types
from ds4.domain.engine.duty_cycle import MAX_POWER, MIN_POWER
from ds4.domain.steering.directions import MAX_SCALE


@dataclass(frozen=True)
class SteeringRequest:
    """The --dir-steering-* flags as given (None: not given)."""

    file: str | None = None
    attn: float | None = None
    ffn: float | None = None


def steering_request(args: argparse.Namespace) -> SteeringRequest:
    return SteeringRequest(args.dir_steering_file, args.dir_steering_attn, args.dir_steering_ffn)


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


def add_steering_flags(parser: argparse.ArgumentParser) -> None:
    """--dir-steering-file/-ffn/-attn (docs/steering.md)."""
    parser.add_argument(
        "--dir-steering-file",
        type=flag_types.input_file,
        metavar="FILE",
        help="directional steering: raw f32 directions, one n_embd row per layer "
        "(docs/steering.md; default: none)",
    )
    scale = flag_types.float_in(-MAX_SCALE, MAX_SCALE)
    parser.add_argument(
        "--dir-steering-ffn",
        type=scale,
        default=None,
        metavar="F",
        help="scale on the FFN outputs, -100..100: positive removes the direction, negative "
        "amplifies it (default: 1 with a file when neither scale is given, else 0)",
    )
    parser.add_argument(
        "--dir-steering-attn",
        type=scale,
        default=None,
        metavar="F",
        help="scale on the attention outputs, -100..100 (default: 0)",
    )
