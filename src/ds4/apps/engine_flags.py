"""The flags every command that loads a model declares the same way: -m (the one
model-choice rule, bootstrap.default_model_path), --backend/--threads, --numerics."""

from __future__ import annotations

import argparse
import os

from ds4.apps import flag_types, wiring
from ds4.apps.flag_types import MAX_THREADS

MODEL_HELP = (
    "model file (default: $DS4_MODEL, else ./ds4flash.gguf, else models/demo.gguf, "
    "the small demo model shipped in the repository)"
)


def add_model_flag(parser: argparse.ArgumentParser, help_text: str = MODEL_HELP) -> None:
    parser.add_argument("-m", "--model", type=flag_types.model_file, metavar="GGUF", help=help_text)


def add_backend_flags(parser: argparse.ArgumentParser) -> None:
    """--backend (cpu by default when the native kernels are built) and --threads."""
    parser.add_argument(
        "--backend",
        choices=["cpu", "reference"],
        default=wiring.default_backend(),
        help="compute backend (cpu: native kernels on the mapped weights; reference: the "
        "numpy engine checked against HF transformers)",
    )
    parser.add_argument(
        "-t",
        "--threads",
        type=flag_types.int_in(1, MAX_THREADS),
        default=os.cpu_count() or 1,
        help=f"CPU threads for the cpu backend (1..{MAX_THREADS})",
    )


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
    """-m, --backend, --threads and --numerics."""
    add_model_flag(parser)
    add_backend_flags(parser)
    add_numerics_flag(parser)
