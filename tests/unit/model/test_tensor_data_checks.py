"""tid2eid entries must name real experts; validation reads them (issue 14)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
import pytest

from ds4.domain.gguf.ggml_types import GGMLType
from ds4.domain.gguf.records import MetaValue, TensorInfo
from ds4.domain.model.catalog import model_tensors
from ds4.domain.model.hparams import Problem, hparams_metadata
from ds4.domain.model.presets import TINY_SHAPES
from ds4.domain.model.validation import check_tensor_data, tid2eid_name, validate_model_file

HP = dataclasses.replace(TINY_SHAPES["tiny"], n_vocab=1000)  # three hash layers


class TablesOnly:
    """A ModelFile holding just the tid2eid tables (the data check reads nothing else)."""

    path, version, alignment, file_size = "mem.gguf", 3, 32, 0

    def __init__(self, tables: Mapping[str, npt.NDArray[np.int32]]) -> None:
        self._raw = {name: t.astype("<i4").view(np.uint8) for name, t in tables.items()}
        self.tensors = {
            name: TensorInfo(name, tuple(reversed(t.shape)), GGMLType.I32, 0, t.size * 4)
            for name, t in tables.items()
        }
        self.metadata: Mapping[str, MetaValue] = {}

    def raw(self, name: str) -> npt.NDArray[np.uint8]:
        return self._raw[name]

    def close(self) -> None:
        pass


def tables(bad: dict[int, tuple[int, int, int]] | None = None) -> TablesOnly:
    """Every hash layer's table routes token t to experts (t + k) % n_expert; `bad` puts
    one value at (token, slot) in some layers."""
    out = {}
    for layer in range(HP.n_hash_layer):
        tokens = np.arange(HP.n_vocab)[:, None] + np.arange(HP.n_expert_used)[None, :]
        table = (tokens % HP.n_expert).astype(np.int32)
        if bad and layer in bad:
            token, slot, value = bad[layer]
            table[token, slot] = value
        out[tid2eid_name(layer)] = table
    return TablesOnly(out)


def test_tables_within_the_experts_pass() -> None:
    assert check_tensor_data(HP, tables()) == []


@pytest.mark.parametrize("value", [-1, HP.n_expert, 2**31 - 1, -(2**31)])
def test_an_entry_outside_the_experts_is_named(value: int) -> None:
    problems = check_tensor_data(HP, tables({2: (999, 1, value)}))
    assert problems == [
        Problem(tid2eid_name(2), f"token 999 routes to expert {value}, outside 0..7")
    ]


def test_every_bad_layer_is_reported_and_skipped_ones_are_not_read() -> None:
    model = tables({0: (3, 0, 99), 1: (4, 1, -5)})
    assert [p.subject for p in check_tensor_data(HP, model)] == [
        tid2eid_name(0),
        tid2eid_name(1),
    ]
    assert [p.subject for p in check_tensor_data(HP, model, skip={tid2eid_name(0)})] == [
        tid2eid_name(1)
    ]


def test_validate_model_file_adds_the_data_check_to_the_directory_check() -> None:
    """The one validation `ds4 gguf inspect` and the engine loaders both run."""
    model = tables({1: (7, 0, 8)})
    model.metadata = hparams_metadata(HP)
    report = validate_model_file(model)
    assert Problem(tid2eid_name(1), "token 7 routes to expert 8, outside 0..7") in report.errors
    # the tables are all the file has: the rest of the catalog is reported missing too
    required = {t.name for t in model_tensors(HP) if not t.optional}
    assert {p.subject for p in report.errors} >= required - set(model.tensors)
