"""Pure rules of layer-split (pipeline) inference (docs/distributed.md): the session
invariant's prefix hash, where the layers run, and layer ranges with how to split a model
across workers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ds4.domain.dist_transport import DEFAULT_ACTIVATION_BITS
from ds4.domain.errors import Ds4Error

# --- layer split ---
# Layer ranges of a split model: parsing `--layer-split`, checking a split covers the
# model, and the automatic split that balances weight bytes against each worker's
# memory (docs/distributed.md §"Memory planning").
#
# A range is written inclusively, `A-B` (layers A..B); inside the code it is a Python
# range, stop exclusive.

_RANGE = re.compile(r"(\d+)-(\d+)")
_LAYER_TENSOR = re.compile(r"blk\.(\d+)\.")


def range_text(r: range) -> str:
    """`A-B`, the inclusive form users write."""
    return f"{r.start}-{r.stop - 1}"


def parse_layer_split(text: str) -> list[range] | None:
    """`auto` -> None; `A-B,C-D,...` -> the ranges (syntax only: see check_split)."""
    if text == "auto":
        return None
    ranges = []
    for part in text.split(","):
        m = _RANGE.fullmatch(part.strip())
        if m is None:
            raise Ds4Error(f"layer range {part!r}: expected A-B (first and last layer, e.g. 0-20)")
        first, last = int(m.group(1)), int(m.group(2))
        if last < first:
            raise Ds4Error(f"layer range {part!r}: the last layer precedes the first")
        ranges.append(range(first, last + 1))
    return ranges


def check_split(ranges: Sequence[range], n_layer: int) -> None:
    """Ds4Error unless the ranges cover layers 0..n_layer-1 in order, without gaps or
    overlaps."""
    if not ranges:
        raise Ds4Error("a layer split needs at least one range")
    expected = 0
    for r in ranges:
        if r.start != expected:
            what = "overlaps the one before" if r.start < expected else f"skips layer {expected}"
            raise Ds4Error(f"layer range {range_text(r)} {what}; cover 0-{n_layer - 1} in order")
        expected = r.stop
    if expected != n_layer:
        last = ranges[-1]
        if expected > n_layer:
            raise Ds4Error(f"layer range {range_text(last)}: the model has layers 0-{n_layer - 1}")
        raise Ds4Error(
            f"the layer split stops at layer {expected - 1}; the model has 0-{n_layer - 1}"
        )


def layer_bytes(tensors: Iterable[tuple[str, int]], n_layer: int) -> list[int]:
    """Weight bytes of each layer from (tensor name, bytes) pairs (`blk.N.*` tensors)."""
    out = [0] * n_layer
    for name, nbytes in tensors:
        m = _LAYER_TENSOR.match(name)
        if m is not None and int(m.group(1)) < n_layer:
            out[int(m.group(1))] += nbytes
    return out


def auto_split(weights: Sequence[int], capacities: Sequence[float]) -> list[range]:
    """Contiguous ranges, one per worker in order, whose weight bytes fit the workers'
    capacities as evenly as possible: the largest bytes/capacity ratio is minimal (ties:
    the smallest sum of squared ratios). Equal capacities give an even split by bytes."""
    n, k = len(weights), len(capacities)
    if k < 1 or k > n:
        raise Ds4Error(f"{k} workers for {n} layers: each worker needs at least one layer")
    if min(capacities) <= 0:
        raise Ds4Error("every worker needs a positive memory capacity")
    prefix = [0]
    for w in weights:
        prefix.append(prefix[-1] + w)
    total = max(prefix[-1], 1)
    inf = (float("inf"), float("inf"))
    # best[j][i]: cost of layers [0, i) on workers [0, j); cut[j][i]: where worker j-1 starts
    best = [[inf] * (n + 1) for _ in range(k + 1)]
    cut = [[0] * (n + 1) for _ in range(k + 1)]
    best[0][0] = (0.0, 0.0)
    for j in range(1, k + 1):
        share = capacities[j - 1] / sum(capacities) * total
        for i in range(j, n - (k - j) + 1):
            for s in range(j - 1, i):
                before = best[j - 1][s]
                if before == inf:
                    continue
                ratio = (prefix[i] - prefix[s]) / share
                cost = (max(before[0], ratio), before[1] + ratio * ratio)
                if cost < best[j][i]:
                    best[j][i], cut[j][i] = cost, s
    ranges, i = [], n
    for j in range(k, 0, -1):
        s = cut[j][i]
        ranges.append(range(s, i))
        i = s
    return ranges[::-1]


# --- prefix hash ---
# The session invariant of layer-split inference: a rolling hash of the token prefix
# a worker's state holds (docs/distributed.md §"The session invariant").
#
# 64-bit FNV-1a over the token ids, each id as 4 little-endian bytes. Every piece of
# work names the hash of the prefix it continues and the hash after it; a worker whose
# state holds another prefix (it restarted, or holds another session's tokens) refuses
# instead of computing on the wrong state. It detects accidents, it is no security
# primitive.

# The hash of no tokens: FNV-1a's 64-bit offset basis. (The reference's page drops its
# last digit; nothing here has to match the reference's wire, so the real basis it is.)
EMPTY = 14695981039346656037
_PRIME = 1099511628211
_MASK = (1 << 64) - 1


def extend_hash(h: int, tokens: Iterable[int]) -> int:
    """The hash of prefix + tokens, given h = the hash of the prefix."""
    for t in tokens:
        for shift in (0, 8, 16, 24):
            h = ((h ^ ((t >> shift) & 0xFF)) * _PRIME) & _MASK
    return h


def rolling_hashes(h: int, tokens: Iterable[int]) -> list[int]:
    """The hash after each token of `tokens` (prefix hash h before the first)."""
    out = []
    for t in tokens:
        for shift in (0, 8, 16, 24):
            h = ((h ^ ((t >> shift) & 0xFF)) * _PRIME) & _MASK
        out.append(h)
    return out


def prefix_hash(tokens: Iterable[int]) -> int:
    return extend_hash(EMPTY, tokens)


# --- target ---
# Where the layers run: `--distributed ray://ADDRESS` (an existing Ray cluster) or
# `--distributed local:N` (a Ray cluster of N worker processes started on this machine).

MAX_LOCAL_WORKERS = 64


@dataclass(frozen=True)
class DistributedTarget:
    address: str | None  # "ray://host:port" of a running cluster; None: start one here
    local_workers: int = 0  # local:N -> N worker processes (0 with an address)

    def __str__(self) -> str:
        return self.address if self.address is not None else f"local:{self.local_workers}"


def parse_target(text: str) -> DistributedTarget:
    if text.startswith("ray://"):
        rest = text[len("ray://") :]
        host, _, port = rest.rpartition(":")
        if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise Ds4Error(
                f"{text!r}: expected ray://HOST:PORT (the Ray client port of the head node, "
                "10001 unless `ray start --ray-client-server-port` says otherwise)"
            )
        return DistributedTarget(address=text)
    if text.startswith("local:"):
        count = text[len("local:") :]
        if not count.isdigit() or not 1 <= int(count) <= MAX_LOCAL_WORKERS:
            raise Ds4Error(f"{text!r}: expected local:N with N in 1..{MAX_LOCAL_WORKERS} workers")
        return DistributedTarget(address=None, local_workers=int(count))
    raise Ds4Error(f"{text!r}: expected ray://HOST:PORT or local:N")


@dataclass(frozen=True)
class DistributedOptions:
    """What `--distributed` and its companion flags ask for (docs/distributed.md)."""

    target: DistributedTarget
    layer_split: str = "auto"  # `auto` or `A-B,C-D,...` (layer_split.parse_layer_split)
    piece: int = 256  # tokens per pipelined prefill piece
    transport: str = "refs"  # how hidden states move between ranges: refs | values
    # --layer-files: one layer-shard file per range, in order (domain/model/shards.py);
    # empty: every worker opens the whole model (-m)
    layer_files: tuple[str, ...] = ()
    activation_bits: int = DEFAULT_ACTIVATION_BITS  # across a boundary: 32, 16 or 8
    trace: bool = False  # one telemetry line per hop of every pass (--dist-trace)
