"""Fuzzed model files: every one either loads and runs, or is refused with a Ds4Error.

Hypothesis changes metadata values of the micro model (any key, any type, extreme
numbers, NaN, broken tokenizer tables) or flips header bytes, then goes the way a
file goes: open, the shared validation, vocabulary, tokenizers and (when validation
says valid) the native CPU engine for a prefill past the sliding window. Nothing may
raise anything but Ds4Error, and nothing validation calls valid may fail later (issue 14).
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tests.support.micro_model import MICRO, micro_metadata, write_micro_model

from ds4.adapters.compute.cpu.runner import open_cpu_runner
from ds4.adapters.gguf.reader import GGUFFile, parse_gguf
from ds4.adapters.tokenizer.vocabulary import build_tokenizer, vocabulary_from_gguf_metadata
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.records import MetaValue, ValueType
from ds4.domain.model.hparams import FIELD_TO_KEY, FLOAT_BOUNDS, INT_BOUNDS, KEY_TYPES
from ds4.domain.model.validation import validate_model_file

BASE = micro_metadata()
EXAMPLES = 150  # per test: reaches every key; a few seconds a run
INT_RANGES = {
    ValueType.UINT8: (0, 2**8 - 1), ValueType.INT8: (-(2**7), 2**7 - 1),
    ValueType.UINT16: (0, 2**16 - 1), ValueType.INT16: (-(2**15), 2**15 - 1),
    ValueType.UINT32: (0, 2**32 - 1), ValueType.INT32: (-(2**31), 2**31 - 1),
    ValueType.UINT64: (0, 2**64 - 1), ValueType.INT64: (-(2**63), 2**63 - 1),
}  # fmt: skip
SCALAR_TYPES = [*INT_RANGES, ValueType.FLOAT32, ValueType.FLOAT64, ValueType.BOOL]
TEXT = st.text(st.characters(exclude_categories=["Cs"]), max_size=12)  # no lone surrogates


def scalars(vtype: ValueType) -> st.SearchStrategy[Any]:
    """Values of one GGUF type, biased to the edges where sizes and loops go wrong."""
    if vtype in INT_RANGES:
        lo, hi = INT_RANGES[vtype]
        edges = [v for v in (0, 1, 2, 4, 128, 2**31 - 1, 2**32 - 1, lo, hi) if lo <= v <= hi]
        return st.one_of(st.sampled_from(edges), st.integers(lo, hi))
    if vtype is ValueType.BOOL:
        return st.booleans()
    if vtype is ValueType.STRING:
        return TEXT
    edges_f = [0.0, -1.0, 1.0, math.inf, math.nan, 1e-45, 3e38]
    floats = st.floats(width=32) if vtype is ValueType.FLOAT32 else st.floats()
    return st.one_of(st.sampled_from(edges_f), floats)


@st.composite
def any_value(draw: st.DrawFn) -> MetaValue:
    vtype = draw(st.sampled_from([*SCALAR_TYPES, ValueType.STRING, ValueType.ARRAY]))
    if vtype is not ValueType.ARRAY:
        return MetaValue(vtype, draw(scalars(vtype)))
    item_type = draw(st.sampled_from([*SCALAR_TYPES, ValueType.STRING]))
    return MetaValue(vtype, draw(st.lists(scalars(item_type), max_size=6)), item_type)


@st.composite
def changed_value(draw: st.DrawFn, key: str) -> MetaValue | None:
    old = BASE[key]
    how = draw(st.sampled_from(["same type", "any type", "remove", "one array item"]))
    if how == "remove":
        return None
    if how == "any type":
        return draw(any_value())
    items = old.items()
    if items is None or old.item_type is None:
        return MetaValue(old.vtype, draw(scalars(old.vtype)))
    values = list(items)
    if how == "one array item" and values:
        at = draw(st.integers(0, len(values) - 1))
        values[at] = draw(scalars(old.item_type))
    else:  # the same item type, another length
        values = values[: draw(st.integers(0, len(values)))]
    return MetaValue(ValueType.ARRAY, values, old.item_type)


# Keys that size loops and buffers but not tensors: a file can be valid at their edges.
LOOP_FIELDS = ["sinkhorn_iters", "n_swa", "indexer_top_k", "rope_orig_ctx", *FLOAT_BOUNDS]


@st.composite
def edge_of_range(draw: st.DrawFn) -> tuple[str, MetaValue]:
    """A loop-sizing key at (or just past) an end of its allowed range."""
    field = draw(st.sampled_from(LOOP_FIELDS))
    key = FIELD_TO_KEY[field]
    if field in INT_BOUNDS:
        low, high = int(INT_BOUNDS[field].low), int(INT_BOUNDS[field].high)
        value: float = draw(st.sampled_from([low, low + 1, high - 1, high, high + 1]))
    else:
        low_f, high_f = FLOAT_BOUNDS[field].low, FLOAT_BOUNDS[field].high
        value = draw(st.sampled_from([low_f, math.nextafter(low_f, math.inf), high_f, high_f * 2]))
    vtype = KEY_TYPES[key]
    return key, MetaValue(vtype, float(value) if vtype is ValueType.FLOAT32 else int(value))


@st.composite
def metadata_changes(draw: st.DrawFn) -> dict[str, MetaValue | None]:
    keys = draw(st.lists(st.sampled_from(sorted(BASE)), max_size=3, unique=True))
    changes = {key: draw(changed_value(key)) for key in keys}
    edges = draw(st.lists(edge_of_range(), min_size=0 if keys else 1, max_size=3))
    return {**changes, **dict(edges)}


def load_like_the_engine(path: Path) -> None:
    """Open, validate, load the vocabulary and, for a valid file, run the engine."""
    try:
        model = GGUFFile(path)
    except Ds4Error:
        event("unreadable")
        return  # inspect and every loader say so (exit 2)
    with model:
        report = validate_model_file(model)
        if not report.ok:
            event("invalid")
            with contextlib.suppress(Ds4Error):  # the loaders refuse it too, one way or another
                vocabulary_from_gguf_metadata(model.metadata)
            return
        vocab = vocabulary_from_gguf_metadata(model.metadata)  # valid: must load
    for backend in ("native", "reference"):
        build_tokenizer(vocab, backend)
    session = open_cpu_runner(str(path), threads=1).new_session(64)
    n = MICRO.n_swa + 24  # past the window, enough compressed rows to need the indexer
    session.prefill([i % len(vocab.tokens) for i in range(n)])
    event("valid, ran")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(changes=metadata_changes())
def test_changed_metadata_loads_or_is_refused(workdir: Path, changes: dict[str, Any]) -> None:
    path = write_micro_model(workdir / "m.gguf", metadata=changes)
    load_like_the_engine(path)


@pytest.fixture(scope="module")
def valid_blob(workdir: Path) -> bytes:
    return write_micro_model(workdir / "valid.gguf").read_bytes()


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_flipped_header_bytes_load_or_are_refused(
    workdir: Path, valid_blob: bytes, data: st.DataObject
) -> None:
    header_end = parse_gguf(memoryview(valid_blob), len(valid_blob)).data_start
    blob = bytearray(valid_blob)
    for _ in range(data.draw(st.integers(1, 3))):
        blob[data.draw(st.integers(0, header_end - 1))] ^= data.draw(st.integers(1, 255))
    path = workdir / "flipped.gguf"
    path.write_bytes(bytes(blob))
    load_like_the_engine(path)
