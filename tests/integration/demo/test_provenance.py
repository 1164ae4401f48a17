"""The shipped demo model says where it comes from (docs/demo-model.md)."""

from __future__ import annotations

import pytest
from tools.demo.files import DEMO, DEMO_MTP, NOVEL, REPO, sha256

from ds4.apps import wiring
from ds4.domain.model.validation import validate_model_file

KEYS = ("train_script", "train_seed", "train_data", "train_tokens_sha256", "train_steps",
        "train_software", "train_rows", "heldout_ce")  # fmt: skip


def metadata(path: str) -> dict[str, object]:
    return {k: v.value for k, v in wiring.open_model_file(path).metadata.items()}


@pytest.mark.parametrize("path", [DEMO, DEMO_MTP], ids=["main", "mtp"])
def test_provenance_keys(path: object) -> None:
    meta = metadata(str(path))
    for key in KEYS:
        assert isinstance(meta.get(f"ds4.convert.{key}"), str), key
    assert meta["ds4.convert.train_script"] == "tools/train_demo.py"
    assert (REPO / "tools" / "train_demo.py").is_file()
    assert int(str(meta["ds4.convert.train_seed"])) >= 0
    assert meta["ds4.convert.quant_preset"] == "q8"
    assert meta["ds4.convert.source"] == "official:ds4-demo"


def test_data_hash_is_the_novel() -> None:
    data = str(metadata(str(DEMO))["ds4.convert.train_data"])
    assert data == f"promessi_sposi.txt sha256:{sha256(NOVEL)}"


def test_both_files_validate() -> None:
    main = wiring.open_model(str(DEMO))
    assert main.hparams.compress_ratios == (0, 4, 128, 4)  # every layer kind
    assert main.hparams.n_hash_layer == 2
    mtp = validate_model_file(wiring.open_model_file(str(DEMO_MTP)))
    assert (mtp.kind, mtp.ok) == ("mtp", True), mtp.errors
