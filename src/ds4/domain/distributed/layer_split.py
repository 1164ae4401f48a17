"""Layer ranges of a split model: parsing `--layer-split`, checking a split covers the
model, and the automatic split that balances weight bytes against each worker's
memory (docs/distributed.md §"Memory planning").

A range is written inclusively, `A-B` (layers A..B); inside the code it is a Python
range, stop exclusive.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from ds4.domain.errors import Ds4Error

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
