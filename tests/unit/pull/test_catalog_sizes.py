"""The sizes docs/pull.md gives for each `ds4 pull` name are the tensor bytes of the
file its name describes: Flash's or PRO's shapes (docs/model-presets.md) in the types the
name states, through our own quant plans (domain/convert/plan.py). The q2 figure equals
the 80.76 GiB a third-party note gives for the published q2-imatrix file, so the plans
reproduce the release's layout; a drift in the catalog, the plans or the table fails
here. The PRO Q4 halves are assumed split as `ds4 gguf split --layers 0-30,31-output`
splits: the embedding with layers 0..30, the head with 31..output."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from ds4.apps.gguf_command import preset_shape
from ds4.domain.convert.plan import quant_plan
from ds4.domain.gguf.ggml_types import tensor_nbytes
from ds4.domain.model.catalog import TensorSpec, model_tensors, mtp_tensors
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.model_catalog import MODEL_CATALOG

DOC = Path(__file__).resolve().parents[3] / "docs" / "pull.md"
Pick = Callable[[TensorSpec], bool]


def _gib(hp: DeepSeekV4HParams, quant: str, specs: list[TensorSpec], pick: Pick) -> float:
    plan = quant_plan(quant, hp)
    total = 0
    for spec in specs:
        hashed_optional = spec.optional and spec.layer is not None and hp.is_hash_layer(spec.layer)
        if pick(spec) and not hashed_optional:
            total += tensor_nbytes(plan.tensor_type(spec, hp), math.prod(spec.dims))
    return total / 2**30


def _low_half(spec: TensorSpec) -> bool:
    return spec.name == "token_embd.weight" if spec.layer is None else spec.layer <= 30


def _computed() -> dict[str, float]:
    flash, pro = preset_shape("flash"), preset_shape("pro")
    every: Pick = lambda _spec: True  # noqa: E731
    low = _gib(pro, "q4", model_tensors(pro), _low_half)
    high = _gib(pro, "q4", model_tensors(pro), lambda s: not _low_half(s))
    return {
        "q2-imatrix": _gib(flash, "q2", model_tensors(flash), every),
        "q2-q4-imatrix": _gib(flash, "q2-q4", model_tensors(flash), every),
        "q4-imatrix": _gib(flash, "q4", model_tensors(flash), every),
        "pro-q2-imatrix": _gib(pro, "q2", model_tensors(pro), every),
        "mtp": _gib(flash, "q4", mtp_tensors(flash), every),
        "pro-q4-layers00-30": low,
        "pro-q4-layers31-output": high,
        "pro-q4-split": low + high,
    }


def _doc_sizes() -> dict[str, float]:
    rows = re.findall(
        r"^\| `([a-z0-9-]+)` \|[^|]*\|[^|]*\| ([0-9.]+) GiB \|", DOC.read_text(), re.M
    )
    return {name: float(size) for name, size in rows}


def test_the_doc_gives_every_catalog_name_a_computed_size() -> None:
    assert set(_doc_sizes()) == {entry.name for entry in MODEL_CATALOG}


@pytest.mark.parametrize("name", sorted(_computed()))
def test_the_doc_size_is_the_computed_tensor_bytes(name: str) -> None:
    assert _doc_sizes()[name] == pytest.approx(_computed()[name], abs=0.006)


def test_q2_matches_the_published_file_size() -> None:
    assert _computed()["q2-imatrix"] == pytest.approx(80.76, abs=0.005)
