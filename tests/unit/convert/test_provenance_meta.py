"""`ds4 gguf convert --meta KEY=VALUE`: extra provenance strings, checked before writing."""

from __future__ import annotations

import pytest

from ds4.domain.convert.plan import meta_flags, provenance_metadata
from ds4.domain.errors import Ds4Error


def test_meta_flags_become_convert_keys() -> None:
    extra = meta_flags(["train_seed=4", "train_data=a.txt sha256:ab=cd"])
    assert extra == {"train_seed": "4", "train_data": "a.txt sha256:ab=cd"}
    meta = provenance_metadata("0.1.0", "official:x", "q8", **extra)
    assert meta["ds4.convert.train_data"].value == "a.txt sha256:ab=cd"


@pytest.mark.parametrize(
    "item", ["novalue", "=x", "Upper=x", "a.b=x", "source=x", "quant_preset=x", "tool=x"]
)
def test_bad_or_reserved_keys_are_refused(item: str) -> None:
    with pytest.raises(Ds4Error):
        meta_flags([item])


def test_a_key_is_given_once() -> None:
    with pytest.raises(Ds4Error, match="already"):
        meta_flags(["k=1", "k=2"])
