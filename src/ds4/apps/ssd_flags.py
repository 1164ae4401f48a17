"""The SSD-streaming flags of `ds4 cli`, `bench` and `server` (docs/ssd-streaming.md),
declared once here so names, ranges and help agree; `streaming_options` turns them into
the cpu backend's StreamingOptions (None without --ssd-streaming)."""

from __future__ import annotations

import argparse

from ds4.apps import flag_types
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


def add_ssd_streaming_flags(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("SSD streaming (cpu backend; docs/ssd-streaming.md)")
    g.add_argument(
        "--ssd-streaming",
        action="store_true",
        help="keep non-routed weights resident and read routed experts from the model file "
        "into a budgeted expert cache on demand, bypassing the page cache (default: off, "
        "the whole file is mapped and paged by the kernel)",
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
                raise Ds4Error(f"{flag} needs --ssd-streaming")
        return None
    if getattr(args, "backend", "cpu") != "cpu":
        raise Ds4Error(f"--ssd-streaming needs --backend cpu (not {args.backend})")
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
    )
