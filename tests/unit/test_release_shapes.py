"""The named presets: PRO read from its shipped release config.json, Flash from ds4's
constants (src/ds4/apps/gguf_command.py)."""

from __future__ import annotations

import pytest

from ds4.apps.gguf_command import PRESET_NAMES, preset_shape, release_config
from ds4.domain.model.presets import FLASH


def test_pro_is_the_shape_its_release_config_describes() -> None:
    hp = preset_shape("pro")
    assert (hp.n_layer, hp.n_embd, hp.n_vocab, hp.n_head, hp.head_dim) == (
        61, 7168, 129280, 128, 512,
    )  # fmt: skip
    assert (hp.n_expert, hp.n_expert_used, hp.n_ff_exp, hp.n_hash_layer) == (384, 6, 3072, 3)
    assert (hp.q_lora_rank, hp.o_lora_rank, hp.n_out_group) == (1536, 1024, 16)
    assert (hp.n_indexer_head, hp.indexer_head_dim, hp.indexer_top_k) == (64, 128, 1024)
    assert hp.expert_weights_scale == 2.5
    # PRO opens with two ratio-128 layers (Flash with two dense ones) and ends on ratio 4;
    # the config's 62nd entry belongs to the MTP block and is not a layer
    assert hp.compress_ratios[:3] == (128, 128, 4) and hp.compress_ratios[-1] == 4
    assert len(hp.compress_ratios) == 61
    assert release_config("pro")["num_nextn_predict_layers"] == 1


def test_flash_is_ds4s_constants_and_the_names_are_listed() -> None:
    assert preset_shape("flash") is FLASH
    assert PRESET_NAMES == ("flash", "pro")
    with pytest.raises(KeyError):
        preset_shape("ultra")
