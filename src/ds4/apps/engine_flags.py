"""The engine flags every engine command declares (`ds4 cli`, `bench`, `server`, `eval`,
`test-vectors`, `gguf score`): one declaration, so their names, ranges and help agree.
Also the engine knobs of some of them: --mtp FILE and --mtp-draft N (`ds4 cli`,
`server`, `bench`), --power PERCENT and the --dir-steering-* flags (`ds4 cli`, `server`)."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass

from ds4.apps import flag_types, wiring
from ds4.apps.flag_types import MAX_THREADS
from ds4.domain.engine.duty_cycle import MAX_POWER, MIN_POWER
from ds4.domain.steering.directions import MAX_SCALE

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
        "numpy engine checked against HF transformers), vulkan (the whole forward and the KV "
        f"state on a Vulkan GPU; docs/vulkan.md){scripted_help}",
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


def add_repack_flag(parser: argparse.ArgumentParser) -> None:
    """--repack-experts (the cpu backend's weight layout at load; ADR 0067)."""
    parser.add_argument(
        "--repack-experts",
        choices=["auto", "off"],
        default="auto",
        help="cpu backend: auto (default) copies the routed experts' Q2_K down projections "
        "once at load into rows interleaved by 8 for the faster AVX-512 kernel, where it "
        "applies (avx512 kernels, --numerics ds4, not --ssd-streaming; same memory, as "
        "anonymous pages; results within the f32 bound of the GGUF layout's); off: use the "
        "GGUF layout as mapped",
    )


def add_engine_flags(parser: argparse.ArgumentParser) -> None:
    """-m, --backend, --threads and --numerics (no scripted backend)."""
    add_model_flag(parser)
    add_backend_flags(parser)
    add_numerics_flag(parser)


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
