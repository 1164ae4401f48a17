"""`--layer-split`: explicit ranges must cover the model in order; `auto` balances weight
bytes against each worker's memory."""

from __future__ import annotations

import pytest

from ds4.domain.distributed import (
    auto_split,
    check_split,
    layer_bytes,
    parse_layer_split,
    range_text,
)
from ds4.domain.errors import Ds4Error


def test_explicit_ranges_are_inclusive() -> None:
    assert parse_layer_split("auto") is None
    ranges = parse_layer_split("0-20, 21-42")
    assert ranges == [range(0, 21), range(21, 43)]
    assert [range_text(r) for r in ranges] == ["0-20", "21-42"]
    check_split(ranges, 43)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0:20", "expected A-B"),
        ("0-20,", "expected A-B"),
        ("a-b", "expected A-B"),
        ("5-3", "last layer precedes the first"),
        ("", "expected A-B"),
    ],
)
def test_malformed_splits_name_the_range(text: str, message: str) -> None:
    with pytest.raises(Ds4Error, match=message):
        parse_layer_split(text)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1-3", "skips layer 0"),
        ("0-1,3-3", "skips layer 2"),
        ("0-2,2-3", "overlaps the one before"),
        ("0-2", "stops at layer 2; the model has 0-3"),
        ("0-1,2-4", "the model has layers 0-3"),
    ],
)
def test_a_split_must_cover_the_model_in_order(text: str, message: str) -> None:
    ranges = parse_layer_split(text)
    assert ranges is not None
    with pytest.raises(Ds4Error, match=message):
        check_split(ranges, 4)


def test_layer_bytes_sum_each_layers_tensors() -> None:
    tensors = [("blk.0.a", 10), ("blk.0.b", 5), ("blk.1.a", 7), ("output.weight", 100),
               ("blk.12.a", 1)]  # fmt: skip
    assert layer_bytes(tensors, 2) == [15, 7]


def test_equal_capacities_split_evenly_by_bytes() -> None:
    assert auto_split([1] * 8, [1.0, 1.0]) == [range(0, 4), range(4, 8)]
    assert auto_split([1] * 9, [1.0, 1.0, 1.0]) == [range(0, 3), range(3, 6), range(6, 9)]
    # a heavy first layer takes a range of its own
    assert auto_split([10, 1, 1, 1, 1, 1, 1], [1.0, 1.0]) == [range(0, 1), range(1, 7)]


def test_capacities_weight_the_split() -> None:
    # a machine with three times the memory takes three quarters of the layers
    assert auto_split([1] * 8, [3.0, 1.0]) == [range(0, 6), range(6, 8)]
    ranges = auto_split([2, 3, 1, 4, 2, 2, 5, 1], [1.0, 2.0, 1.0])
    assert [r.start for r in ranges] == [0, 2, 6] and ranges[-1].stop == 8


def test_every_worker_needs_a_layer() -> None:
    assert auto_split([1, 1], [1.0, 1.0]) == [range(0, 1), range(1, 2)]
    with pytest.raises(Ds4Error, match="3 workers for 2 layers"):
        auto_split([1, 1], [1.0, 1.0, 1.0])
    with pytest.raises(Ds4Error, match="positive memory"):
        auto_split([1, 1], [1.0, 0.0])
