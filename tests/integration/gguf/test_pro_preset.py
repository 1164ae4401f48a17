"""`ds4 gguf inspect --preset pro`: the shape of DeepSeek V4 PRO's release config.json,
shipped with ds4 and read by the converter's config reader (docs/model-presets.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.sparse_gguf import inspect, write_sparse

from ds4.apps.gguf_command import release_config


@pytest.fixture(scope="module")
def pro_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sparse(tmp_path_factory.mktemp("pro") / "pro.gguf", release_config("pro"))


def test_a_pro_shaped_sparse_file_validates_as_preset_pro(pro_file: Path) -> None:
    result = inspect(str(pro_file), "--json", "--preset", "pro")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["valid"] is True and report["preset"] == "pro"
    hp = report["hparams"]
    assert (hp["n_layer"], hp["n_embd"], hp["n_expert"], hp["n_ff_exp"], hp["n_head"]) == (
        61, 7168, 384, 3072, 128,
    )  # fmt: skip


def test_a_mutated_pro_file_is_rejected_naming_the_tensor(tmp_path: Path) -> None:
    bad = write_sparse(tmp_path / "bad.gguf", release_config("pro"),
                       wrong="blk.0.attn_compressor_kv.weight")  # fmt: skip
    result = inspect(str(bad), "--preset", "pro")
    assert result.returncode == 1
    assert "error: blk.0.attn_compressor_kv.weight: dims" in result.stdout


def test_the_pro_file_is_not_flash_and_a_flash_shape_is_not_pro(
    pro_file: Path, tmp_path: Path
) -> None:
    result = inspect(str(pro_file), "--preset", "flash")
    assert result.returncode == 1
    assert "preset flash" in result.stdout and "7168 (preset has 4096)" in result.stdout
    flash_like = release_config("pro") | {"n_routed_experts": 256}
    other = write_sparse(tmp_path / "other.gguf", flash_like)
    result = inspect(str(other), "--preset", "pro")
    assert result.returncode == 1
    assert "preset pro" in result.stdout and "256 (preset has 384)" in result.stdout


def test_preset_and_preset_config_together_are_refused(pro_file: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(release_config("pro")), encoding="utf-8")
    result = inspect(str(pro_file), "--preset", "pro", "--preset-config", str(cfg))
    assert result.returncode != 0
    assert "give one" in result.stderr and "Traceback" not in result.stderr
