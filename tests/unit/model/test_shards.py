"""Layer-shard rules (ds4.domain.model.shards): the `--layers` syntax, which tensors a
shard holds, its ds4.split.* keys with their range checks, and a set covering a model."""

from __future__ import annotations

import re

import pytest

from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.records import MetaValue, ValueType
from ds4.domain.model.shards import (
    FIRST_KEY,
    HEAD_KEY,
    LAST_KEY,
    Shard,
    check_shard_set,
    infer_shard,
    parse_shard_layers,
    read_shard,
    shard_file_name,
    shards_for,
    stray_tensors,
)


def test_the_published_pro_split_parses() -> None:
    assert parse_shard_layers("0-30,31-output", 61) == [range(0, 31), range(31, 61)]
    assert parse_shard_layers("0-output", 4) == [range(0, 4)]
    assert parse_shard_layers("0-1, 2-3", 4) == [range(0, 2), range(2, 4)]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("0-1,3-output", "skips layer 2"),
        ("0-2,2-output", "overlaps the range before"),
        ("1-output", "skips layer 0"),
        ("0-1,2-2", "end the last range at output"),
        ("0-output,1-3", "only the last range can end at output"),
        ("0-1,2-9", "the model has layers 0-3"),
        ("0-1;2-output", "expected A-B or A-output"),
        ("2-1,2-output", "precedes the first"),
        ("", "expected A-B or A-output"),
    ],
)
def test_bad_ranges_are_named(text: str, message: str) -> None:
    with pytest.raises(Ds4Error, match=message):
        parse_shard_layers(text, 4)


def test_the_first_shard_holds_the_embedding_and_the_last_the_head() -> None:
    low, high = shards_for([range(0, 2), range(2, 4)], 4, 77)
    assert (low.embedding, low.head, high.embedding, high.head) == (True, False, False, True)
    assert low.holds("token_embd.weight") and not high.holds("token_embd.weight")
    assert high.holds("output.weight") and high.holds("output_hc_fn.weight")
    assert low.holds("blk.1.attn_q_a.weight") and not low.holds("blk.2.attn_q_a.weight")
    assert stray_tensors(low, ["blk.0.ffn_norm.weight", "blk.3.ffn_norm.weight", "x"]) == [
        "blk.3.ffn_norm.weight"
    ]
    assert shard_file_name("pro-q4", shards_for([range(0, 31), range(31, 61)], 61, 1)[0]) == (
        "pro-q4-layers00-30.gguf"
    )
    assert shard_file_name("pro-q4", shards_for([range(0, 31), range(31, 61)], 61, 1)[1]) == (
        "pro-q4-layers31-output.gguf"
    )


def test_metadata_round_trips_and_is_range_checked() -> None:
    shard = Shard(range(2, 4), embedding=False, head=True, model_tag=123)
    meta = shard.metadata()
    assert read_shard(meta, 4) == shard
    assert read_shard({}, 4) is None
    with pytest.raises(Ds4Error, match=re.escape("ds4.split.last_layer: 9 is outside 0..3")):
        read_shard({**meta, LAST_KEY: MetaValue(ValueType.UINT32, 9)}, 4)
    with pytest.raises(
        Ds4Error, match=re.escape("ds4.split.first_layer: expected an unsigned integer")
    ):
        read_shard({**meta, FIRST_KEY: MetaValue(ValueType.STRING, "2")}, 4)
    with pytest.raises(
        Ds4Error, match=re.escape("ds4.split.head: the head goes with the last layer")
    ):
        read_shard({**meta, HEAD_KEY: MetaValue(ValueType.BOOL, False)}, 4)
    with pytest.raises(Ds4Error, match="precedes"):
        read_shard({**meta, FIRST_KEY: MetaValue(ValueType.UINT32, 3),
                    LAST_KEY: MetaValue(ValueType.UINT32, 2)}, 4)  # fmt: skip
    partial = {k: v for k, v in meta.items() if k != HEAD_KEY}
    with pytest.raises(Ds4Error, match=re.escape("ds4.split.head: expected a bool")):
        read_shard(partial, 4)


def test_a_set_must_cover_the_model_once_in_order() -> None:
    low, high = shards_for([range(0, 2), range(2, 4)], 4, 5)
    check_shard_set([("a", low), ("b", high)], 4)
    with pytest.raises(Ds4Error, match=re.escape("b (layers 0-1) overlaps the file before")):
        check_shard_set([("a", low), ("b", low)], 4)
    with pytest.raises(Ds4Error, match=re.escape("a (layers 2-output) leaves layer 0 to no file")):
        check_shard_set([("a", high), ("b", low)], 4)
    with pytest.raises(Ds4Error, match="stop at layer 1"):
        check_shard_set([("a", low)], 4)
    other = Shard(range(2, 4), False, True, 6)
    with pytest.raises(Ds4Error, match="b is a shard of another model than a"):
        check_shard_set([("a", low), ("b", other)], 4)


def test_a_part_without_keys_is_told_by_its_tensors() -> None:
    def names(layers: range, embd: bool, head: bool) -> list[str]:
        out = [f"blk.{i}.attn_norm.weight" for i in layers]
        return out + (["token_embd.weight"] if embd else []) + (["output.weight"] if head else [])

    assert infer_shard(names(range(0, 31), True, False), 61) == Shard(range(0, 31), True, False, 0)
    assert infer_shard(names(range(31, 61), False, True), 61) == Shard(
        range(31, 61), False, True, 0
    )
    assert infer_shard(names(range(0, 61), True, True), 61) is None  # the whole model
    assert infer_shard(names(range(0, 31), False, False), 61) is None  # embedding missing
    assert infer_shard(names(range(31, 61), True, True), 61) is None
    gap = [n for n in names(range(0, 31), True, False) if not n.startswith("blk.5.")]
    assert infer_shard(gap, 61) is None  # not one range
