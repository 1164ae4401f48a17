"""The model and backend flags `ds4 server` and `ds4 agent` share: one declaration,
one set of rules (-m, --backend, -t, --script, --script-token-delay)."""

from __future__ import annotations

import argparse

from ds4.apps import flag_types, wiring
from ds4.apps.flag_types import MAX_THREADS

MODEL_HELP = (
    "model file (default: $DS4_MODEL, else ./ds4flash.gguf, else models/demo.gguf, "
    "the small demo model shipped in the repository)"
)


def add_model_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-m", "--model", type=flag_types.model_file, metavar="GGUF", help=MODEL_HELP
    )


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    """--backend (cpu, reference or scripted), --threads and the scripted backend's
    --script and --script-token-delay."""
    parser.add_argument(
        "--backend",
        choices=("cpu", "reference", "scripted"),
        default=wiring.default_backend(),
        help="compute backend: cpu (native kernels), reference (numpy), or scripted, which "
        "plays back --script outputs (for client tests)",
    )
    parser.add_argument(
        "-t",
        "--threads",
        type=flag_types.int_in(1, MAX_THREADS),
        default=None,
        help=f"cpu backend threads, 1..{MAX_THREADS} (default: every core)",
    )
    parser.add_argument(
        "--script",
        type=flag_types.input_file,
        metavar="FILE",
        help="with --backend scripted: JSON list of raw model outputs, one per request "
        "(default: none)",
    )
    parser.add_argument(
        "--script-token-delay",
        type=flag_types.float_in(0, 60),
        default=0.0,
        metavar="SECONDS",
        help="with --backend scripted: pause per generated token (0..60)",
    )


def check_engine_flags(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """The scripted backend's flags go together (a usage error otherwise)."""
    if args.backend != "scripted" and (args.script is not None or args.script_token_delay):
        parser.error("--script and --script-token-delay need --backend scripted")
    if args.backend == "scripted" and args.script is None:
        parser.error("--backend scripted needs --script FILE")
