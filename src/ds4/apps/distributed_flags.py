"""`--distributed` and its companions, shared by `ds4 server` and `ds4 cli`: where the
model's layer ranges run and how they are split (docs/distributed.md)."""

from __future__ import annotations

import argparse

from ds4.apps import flag_types
from ds4.apps.flag_types import MAX_CTX
from ds4.domain.distributed import (
    MAX_LOCAL_WORKERS,
    DistributedOptions,
    DistributedTarget,
    parse_layer_split,
    parse_target,
)
from ds4.domain.errors import Ds4Error

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
        "--dist-transport",
        choices=("refs", "values"),
        default="refs",
        help="with --distributed: refs hands each range's output to the next as a Ray object "
        "ref (the chain is submitted at once); values fetches every output to this process "
        "first (docs/distributed.md compares them)",
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
            )
            if value != default
        ]
        if given:
            raise Ds4Error(f"{', '.join(given)} need --distributed")
        return None
    if args.backend != "cpu":
        raise Ds4Error(
            f"--distributed runs the cpu backend's kernels, not --backend {args.backend}"
        )
    return DistributedOptions(
        target, args.layer_split, args.dist_prefill_piece, args.dist_transport
    )
