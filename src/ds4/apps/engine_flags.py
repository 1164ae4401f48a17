"""The engine flags every engine command declares (`ds4 cli`, `bench`, `server`, `eval`,
`agent`, `test-vectors`, `gguf score`): one declaration, so their names, ranges and help
agree, and one function, `engine_options`, that turns whichever of them a command
declares into its EngineOptions.

Also the engine knobs of some of them: --mtp FILE and --mtp-draft N (`ds4 cli`,
`server`, `bench`), --power PERCENT and the --dir-steering-* flags (`ds4 cli`,
`server`), the SSD-streaming flags (`ds4 cli`, `bench`, `server`; docs/ssd-streaming.md)
and --distributed with its companions (`ds4 cli`, `server`; docs/distributed.md).
"""

from __future__ import annotations

import argparse
import os
from dataclasses import fields
from typing import Any, TypeVar

from ds4.apps import backends, flag_types
from ds4.apps.flag_types import MAX_CTX, MAX_THREADS
from ds4.apps.options import DEFAULT_MTP_DRAFT, MAX_MTP_DRAFT, EngineOptions, SteeringRequest
from ds4.domain.dist_transport import ACTIVATION_BITS, DEFAULT_ACTIVATION_BITS
from ds4.domain.distributed import (
    MAX_LOCAL_WORKERS,
    DistributedOptions,
    DistributedTarget,
    parse_layer_split,
    parse_target,
)
from ds4.domain.engine.duty_cycle import MAX_POWER, MIN_POWER
from ds4.domain.errors import Ds4Error
from ds4.domain.expert_cache import (
    GIB,
    MAX_EXPERTS,
    MAX_GB,
    POLICIES,
    CacheSpec,
    StreamingOptions,
    parse_cache_spec,
)
from ds4.domain.steering.directions import MAX_SCALE

AppOptions = TypeVar("AppOptions", bound=EngineOptions)

MODEL_HELP = (
    "model file (default: $DS4_MODEL, else ./ds4flash.gguf, else models/demo.gguf, the "
    "small demo model shipped in the repository)"
)


def add_model_flag(parser: argparse.ArgumentParser, help_text: str = MODEL_HELP) -> None:
    parser.add_argument("-m", "--model", type=flag_types.model_file, metavar="GGUF", help=help_text)


def add_backend_flags(parser: argparse.ArgumentParser, *, scripted: bool = False) -> None:
    """--backend (cpu by default when the native kernels are built) and --threads; with
    `scripted`, also the scripted backend and its --script / --script-token-delay."""
    parser.add_argument(
        "--backend",
        choices=backends.backend_choices(scripted=scripted),
        default=backends.default_backend(),
        help=backends.backend_help(scripted=scripted),
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
    plays_script = backends.BACKENDS[args.backend].plays_script
    if not plays_script and (args.script is not None or args.script_token_delay):
        players = backends.names_where(lambda spec: spec.plays_script)
        return f"--script and --script-token-delay need --backend {players}"
    if plays_script and args.script is None:
        return f"--backend {args.backend} needs --script FILE"
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


def steering_request(args: argparse.Namespace) -> SteeringRequest:
    return SteeringRequest(args.dir_steering_file, args.dir_steering_attn, args.dir_steering_ffn)


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


# ---- SSD streaming: the cpu backend's expert cache (docs/ssd-streaming.md) ----------

_COMPANIONS = (
    ("ssd_streaming_cache_experts", "--ssd-streaming-cache-experts"),
    ("ssd_streaming_preload_experts", "--ssd-streaming-preload-experts"),
    ("ssd_streaming_cold", "--ssd-streaming-cold"),
    ("simulate_used_memory", "--simulate-used-memory"),
    ("expert_profile", "--expert-profile"),
    ("ssd_streaming_policy", "--ssd-streaming-policy"),
    ("ssd_streaming_readahead", "--ssd-streaming-readahead"),
    ("ssd_streaming_mlock", "--ssd-streaming-mlock"),
)


def cache_spec(text: str) -> CacheSpec:
    try:
        return parse_cache_spec(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


cache_spec.__name__ = "N experts or NGB"


def gigabytes(text: str) -> int:
    """A size in GiB ('12' or '12GB'), 0..2^20, as bytes."""
    body = text.strip().lower().removesuffix("gb").removesuffix("g")
    value = flag_types.float_in(0, MAX_GB)(body)
    return int(value * GIB)


gigabytes.__name__ = "size in GB"


def streaming_mode(text: str) -> str:
    """The value after --ssd-streaming: only `auto` (a bare flag means on)."""
    if text != "auto":
        raise argparse.ArgumentTypeError(f"{text!r}: --ssd-streaming takes no value or auto")
    return text


streaming_mode.__name__ = "--ssd-streaming mode"


def add_ssd_streaming_flags(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("SSD streaming (cpu backend; docs/ssd-streaming.md)")
    g.add_argument(
        "--ssd-streaming",
        nargs="?",
        type=streaming_mode,
        const=True,  # not a string: argparse would pass it through streaming_mode
        default=None,
        metavar="auto",
        help="keep non-routed weights resident and read routed experts from the model file "
        "into a budgeted expert cache on demand, bypassing the page cache; `auto`: only "
        "when the model does not fit the memory this process can have (the smallest of "
        "the cgroup limit, RLIMIT_AS and MemAvailable, less --simulate-used-memory), with "
        "the expert cache the memory plan leaves room for, else plain mmap; one line at "
        "start says which and why (default: off, the whole file is mapped and paged by the "
        "kernel)",
    )
    g.add_argument(
        "--ssd-streaming-cache-experts",
        type=cache_spec,
        metavar="N|NGB",
        help=f"expert cache budget: N whole experts (1..{MAX_EXPERTS}) or NGB gibibytes "
        "(default: automatic, available memory minus resident weights, KV and scratch; "
        "printed at start)",
    )
    g.add_argument(
        "--ssd-streaming-preload-experts",
        type=flag_types.int_in(0, MAX_EXPERTS),
        default=0,
        metavar="N",
        help="load the N hottest experts of --expert-profile at start (0..2^24)",
    )
    g.add_argument(
        "--ssd-streaming-cold",
        action="store_true",
        help="drop the model file from the page cache first, so the run starts cold (default: off)",
    )
    g.add_argument(
        "--simulate-used-memory",
        type=gigabytes,
        default=0,
        metavar="NGB",
        help=f"pretend NGB of memory are taken when sizing the automatic budget (0..{MAX_GB})",
    )
    g.add_argument(
        "--expert-profile",
        type=flag_types.output_file,
        metavar="FILE",
        help="expert use counts: read at start when FILE exists (for the preload), this "
        "run's counts added and written back at exit (default: none)",
    )
    g.add_argument(
        "--ssd-streaming-policy",
        choices=POLICIES,
        default="decayed",
        help="expert cache eviction: decayed (evict the lowest use count, counts halving "
        "every 8 tokens' worth of expert uses) or lru (least recently used)",
    )
    g.add_argument(
        "--ssd-streaming-readahead",
        type=flag_types.int_in(0, 1024),
        default=0,
        metavar="N",
        help="while a layer computes, a background thread loads up to N of the experts "
        "the next layer's router predicts from this layer's input (exact for a "
        "hash-routed layer); costs disk reads for wrong guesses (0..1024; 0: off)",
    )
    g.add_argument(
        "--ssd-streaming-mlock",
        action="store_true",
        help="lock the non-routed weights and the expert cache in memory (mlock), so "
        "memory pressure cannot page them out; needs a locked-memory limit (ulimit -l) "
        "that large (default: off, they are pre-faulted only)",
    )


def streaming_options(args: argparse.Namespace) -> StreamingOptions | None:
    """The parsed flags as StreamingOptions; Ds4Error when a companion flag comes
    without --ssd-streaming or the backend is not cpu."""
    if not args.ssd_streaming:
        for dest, flag in _COMPANIONS:
            value = getattr(args, dest)
            if value not in (None, 0, False, "decayed"):
                raise Ds4Error(f"{flag} needs --ssd-streaming (or --ssd-streaming auto)")
        return None
    backend = vars(args).get("backend")
    if backend is not None and not backends.BACKENDS[backend].ssd_streaming:
        streams = backends.names_where(lambda spec: spec.ssd_streaming)
        raise Ds4Error(f"--ssd-streaming needs --backend {streams} (not {backend})")
    if args.ssd_streaming_preload_experts and args.expert_profile is None:
        raise Ds4Error("--ssd-streaming-preload-experts needs --expert-profile FILE")
    return StreamingOptions(
        cache=args.ssd_streaming_cache_experts,
        preload=args.ssd_streaming_preload_experts,
        cold=args.ssd_streaming_cold,
        simulate_used_bytes=args.simulate_used_memory,
        profile=args.expert_profile,
        policy=args.ssd_streaming_policy,
        readahead=args.ssd_streaming_readahead,
        lock=args.ssd_streaming_mlock,
        auto=args.ssd_streaming == "auto",
    )


# ---- --distributed: the layer ranges on Ray workers (docs/distributed.md) -----------

DEFAULT_PIECE = DistributedOptions(DistributedTarget(None)).piece


def _target(text: str) -> DistributedTarget:
    try:
        return parse_target(text)
    except Ds4Error as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _split(text: str) -> str:
    try:
        parse_layer_split(text)
    except Ds4Error as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _layer_files(text: str) -> tuple[str, ...]:
    names = [part.strip() for part in text.split(",")]
    if not all(names):
        raise argparse.ArgumentTypeError(f"{text!r}: expected FILE,FILE,... (no empty names)")
    return tuple(flag_types.model_file(name) for name in names)


_layer_files.__name__ = "layer-shard files"


def add_distributed_flags(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("distributed inference (docs/distributed.md)")
    g.add_argument(
        "--distributed",
        type=_target,
        metavar="ray://HOST:PORT|local:N",
        default=None,
        help="split the model by layer ranges across Ray workers: ray://HOST:PORT joins a "
        "running cluster (the head's Ray client port; every node needs ds4 and the model at "
        f"the same path), local:N starts N worker processes here (1..{MAX_LOCAL_WORKERS}); "
        "this process keeps the embedding and the output head (default: one process)",
    )
    g.add_argument(
        "--layer-split",
        type=_split,
        default="auto",
        metavar="auto|A-B,C-D",
        help="with --distributed: the layer range of each worker, inclusive and in order "
        "(e.g. 0-21,22-42), or auto: one range per worker (per node of a ray:// cluster), "
        "weight bytes in proportion to each machine's memory",
    )
    g.add_argument(
        "--dist-prefill-piece",
        type=flag_types.int_in(1, MAX_CTX),
        default=DEFAULT_PIECE,
        metavar="TOKENS",
        help=f"with --distributed: prefill moves through the ranges in pieces of this many "
        f"tokens, one piece per range at a time (1..{MAX_CTX}); results do not depend on it",
    )
    g.add_argument(
        "--layer-files",
        type=_layer_files,
        default=(),
        metavar="FILE,FILE,...",
        help="with --distributed: the layer-shard files `ds4 gguf split` wrote, one per "
        "range and in layer order, instead of -m: each worker opens only its range's file, "
        "this process maps the embedding and the output head from theirs; the ranges are "
        "the files' (docs/distributed.md#layer-shard-files)",
    )
    g.add_argument(
        "--dist-transport",
        choices=("refs", "values"),
        default="refs",
        help="with --distributed: refs hands each range's output to the next as a Ray object "
        "ref (the chain is submitted at once); values fetches every output to this process "
        "first (docs/distributed.md compares them)",
    )
    g.add_argument(
        "--dist-activation-bits",
        type=int,
        choices=ACTIVATION_BITS,
        default=DEFAULT_ACTIVATION_BITS,
        metavar="32|16|8",
        help="with --distributed: how hidden states cross a range boundary, prefill pieces "
        "and decode alike: 32 as float32 (bit-identical to one process), 16 as bfloat16 "
        "(half the bytes), 8 as int8 with a float32 scale per row (about a quarter); the "
        "layers always compute in float32 (default: 32; measured effect on logits: "
        "docs/distributed.md)",
    )
    g.add_argument(
        "--dist-trace",
        action="store_true",
        help="with --distributed: print one line per hop of every pass (per decoded token "
        "and per prefill piece) to stderr: each range's eval time, downstream wait, "
        "transfer time and bytes in/out (docs/distributed.md#per-hop-telemetry; default: off)",
    )


def distributed_options(args: argparse.Namespace) -> DistributedOptions | None:
    """The parsed flags, or None without --distributed; a companion flag without
    --distributed, or a backend other than cpu, is a usage error."""
    target: DistributedTarget | None = args.distributed
    if target is None:
        given = [
            flag
            for flag, value, default in (
                ("--layer-split", args.layer_split, "auto"),
                ("--dist-prefill-piece", args.dist_prefill_piece, DEFAULT_PIECE),
                ("--dist-transport", args.dist_transport, "refs"),
                ("--layer-files", args.layer_files, ()),
                ("--dist-activation-bits", args.dist_activation_bits, DEFAULT_ACTIVATION_BITS),
                ("--dist-trace", args.dist_trace, False),
            )
            if value != default
        ]
        if given:
            raise Ds4Error(f"{', '.join(given)} need --distributed")
        return None
    if backends.BACKENDS[args.backend].distributed is None:
        spreads = backends.names_where(lambda spec: spec.distributed is not None)
        raise Ds4Error(
            f"--distributed runs the {spreads} backend's kernels, not --backend {args.backend}"
        )
    if args.layer_files and vars(args).get("model") is not None:
        raise Ds4Error("-m and --layer-files each name the model: give one")
    return DistributedOptions(
        target,
        args.layer_split,
        args.dist_prefill_piece,
        args.dist_transport,
        args.layer_files,
        args.dist_activation_bits,
        args.dist_trace,
    )


# ---- the options the flags build ------------------------------------------------------


def engine_options(args: argparse.Namespace, model: str | None) -> EngineOptions:
    """The engine a command's parsed flags ask for, over `model` (bootstrap.model_path);
    a flag the command does not declare keeps EngineOptions' default."""
    declared = vars(args)
    default = EngineOptions(model)
    distributed = distributed_options(args) if "distributed" in declared else None
    if distributed is not None and distributed.layer_files:
        model = distributed.layer_files[0]  # the model is the shards (bootstrap.load_engine)
    streaming = streaming_options(args) if "ssd_streaming" in declared else None
    return EngineOptions(
        model=model,
        backend=args.backend,
        numerics=declared.get("numerics", default.numerics),
        threads=args.threads,
        script=declared.get("script"),
        script_token_delay=declared.get("script_token_delay", default.script_token_delay),
        streaming=streaming,
        repack_experts=declared.get("repack_experts", default.repack_experts),
        mtp=declared.get("mtp"),
        mtp_draft=declared.get("mtp_draft", default.mtp_draft),
        power=declared.get("power"),
        steering=steering_request(args) if "dir_steering_file" in declared else None,
        distributed=distributed,
    )


def app_options(kind: type[AppOptions], engine: EngineOptions, **own: Any) -> AppOptions:
    """An app's options (ServerOptions, AgentOptions, EvalOptions): the engine's as they
    are, plus the app's own fields."""
    inherited = {f.name: getattr(engine, f.name) for f in fields(engine)}
    return kind(**inherited, **own)
