"""The model and backend flags every engine command declares (`ds4 cli`, `bench`,
`server`, `eval`, `test-vectors`, `gguf score`): one declaration, so their names, ranges
and help agree."""

from __future__ import annotations

import argparse
import os

from ds4.apps import flag_types, wiring
from ds4.apps.flag_types import MAX_THREADS

MODEL_HELP = (
    "model file (default: $DS4_MODEL, else ./ds4flash.gguf, else models/demo.gguf, the "
    "small demo model shipped in the repository)"
)


def add_model_flag(parser: argparse.ArgumentParser, help_text: str = MODEL_HELP) -> None:
    parser.add_argument("-m", "--model", type=flag_types.model_file, metavar="GGUF", help=help_text)


def add_backend_flags(parser: argparse.ArgumentParser, *, scripted: bool = False) -> None:
    """--backend (cpu by default when the native kernels are built) and --threads; with
    `scripted`, also the scripted backend and its --script / --script-token-delay."""
    choices = ["cpu", "reference", "vulkan", "scripted"] if scripted else [
        "cpu", "reference", "vulkan"]  # fmt: skip
    scripted_help = (
        ", or scripted, which plays back --script outputs (for client tests)" if scripted else ""
    )
    parser.add_argument(
        "--backend",
        choices=choices,
        default=wiring.default_backend(),
        help="compute backend: cpu (native kernels on the mapped weights), reference (the "
        "numpy engine checked against HF transformers), vulkan (the reference engine with its "
        f"weight products on a Vulkan GPU; docs/vulkan.md){scripted_help}",
    )
    parser.add_argument(
        "-t",
        "--threads",
        type=flag_types.int_in(1, MAX_THREADS),
        default=os.cpu_count() or 1,
        help=f"CPU threads for the cpu backend, 1..{MAX_THREADS} (default: every core)",
    )
    if not scripted:
        return
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


def scripted_flags_problem(args: argparse.Namespace) -> str | None:
    """Why --backend and --script/--script-token-delay do not go together, or None."""
    if args.backend != "scripted" and (args.script is not None or args.script_token_delay):
        return "--script and --script-token-delay need --backend scripted"
    if args.backend == "scripted" and args.script is None:
        return "--backend scripted needs --script FILE"
    return None


def add_numerics_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--numerics",
        choices=["ds4", "exact", "fp32"],
        default="ds4",
        help="ds4: the engine's rounding points (FP8/FP4 KV, int8 activations), fast kernels; "
        "exact: the same in strict operation order (docs/reference/model.md §4.5), bit for bit "
        "(cpu backend, scalar kernels); fp32: no low-precision simulation (HF-comparable)",
    )


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    """-m, --backend, --threads and --numerics (no scripted backend)."""
    add_model_flag(parser)
    add_backend_flags(parser)
    add_numerics_flag(parser)
