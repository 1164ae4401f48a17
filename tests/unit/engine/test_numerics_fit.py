"""Which model shapes each numerics can simulate (check_numerics_fit)."""

from __future__ import annotations

import dataclasses

import pytest

from ds4.domain.engine_math.lowprec import DS4, EXACT, FP32, check_numerics_fit
from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.model.presets import FLASH, TINY_SHAPES


@pytest.mark.parametrize("hp", [FLASH, *TINY_SHAPES.values()])
def test_shipped_shapes_take_every_numerics(hp: DeepSeekV4HParams) -> None:
    for numerics in (DS4, EXACT, FP32):
        check_numerics_fit(numerics, hp)


def test_indexer_width_other_than_128_needs_fp32() -> None:
    hp = dataclasses.replace(FLASH, indexer_head_dim=64)
    check_numerics_fit(FP32, hp)
    for numerics in (DS4, EXACT):
        with pytest.raises(Ds4Error, match=r"^indexer head dim 64: --numerics \w+ needs 128"):
            check_numerics_fit(numerics, hp)
    no_indexer = dataclasses.replace(hp, n_layer=2, compress_ratios=(0, 128))
    check_numerics_fit(DS4, no_indexer)  # no ratio-4 layer: no indexer to round


def test_fp8_kv_rounding_needs_whole_64_blocks() -> None:
    hp = dataclasses.replace(FLASH, head_dim=512, n_rot=32)  # 480 non-RoPE dims
    check_numerics_fit(FP32, hp)
    with pytest.raises(Ds4Error, match=r"^head dim 512 with 32 RoPE dims: --numerics ds4"):
        check_numerics_fit(DS4, hp)
