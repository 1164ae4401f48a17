"""`ds4 gguf inspect --preset-config config.json` on a PRO-shaped sparse file.

TEST FIXTURE: a config.json written for this test (61 layers, hidden 7168, 384 routed
experts, 6 used, expert hidden 3072, every other field Flash's), so the command is
tested on a config that is not the shipped one. The release's own PRO config ships with
ds4 and is tested through `--preset pro` (test_pro_preset.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.support.sparse_gguf import inspect, write_sparse

N_LAYER = 61


def pro_shaped_config() -> dict[str, object]:
    """A release-style config.json for the test only (see the module docstring)."""
    ratios = [0, 0] + [4 if n % 2 == 0 else 128 for n in range(2, N_LAYER)] + [0]  # + MTP
    return {
        "num_hidden_layers": N_LAYER, "hidden_size": 7168, "vocab_size": 129280,
        "num_attention_heads": 64, "num_key_value_heads": 1, "head_dim": 512,
        "qk_rope_head_dim": 64, "q_lora_rank": 1024, "o_lora_rank": 1024, "o_groups": 8,
        "n_routed_experts": 384, "num_experts_per_tok": 6, "moe_intermediate_size": 3072,
        "n_shared_experts": 1, "num_hash_layers": 3, "sliding_window": 128,
        "index_n_heads": 64, "index_head_dim": 128, "index_topk": 512, "hc_mult": 4,
        "hc_sinkhorn_iters": 20, "rope_theta": 10000.0, "compress_rope_theta": 160000.0,
        "rope_scaling": {"type": "yarn", "factor": 16.0, "original_max_position_embeddings":
                         65536, "beta_fast": 32.0, "beta_slow": 1.0},
        "routed_scaling_factor": 1.5, "rms_norm_eps": 1e-6, "hc_eps": 1e-6,
        "norm_topk_prob": True, "swiglu_limit": 10.0, "compress_ratios": ratios,
        "num_nextn_predict_layers": 1,
    }  # fmt: skip


@pytest.fixture(scope="module")
def config_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("pro_cfg") / "config.json"
    path.write_text(json.dumps(pro_shaped_config()), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def pro_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sparse(tmp_path_factory.mktemp("pro") / "pro.gguf", pro_shaped_config())


def test_the_pro_shaped_file_validates_against_its_config(
    pro_file: Path, config_file: Path
) -> None:
    result = inspect(str(pro_file), "--json", "--preset-config", str(config_file))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["valid"] is True
    hp = report["hparams"]
    assert (hp["n_layer"], hp["n_embd"], hp["n_expert"], hp["n_ff_exp"]) == (61, 7168, 384, 3072)


def test_a_mutated_tensor_is_rejected_by_name(tmp_path: Path, config_file: Path) -> None:
    bad = write_sparse(tmp_path / "bad.gguf", pro_shaped_config(),
                       wrong="blk.60.ffn_down_exps.weight")  # fmt: skip
    result = inspect(str(bad), "--preset-config", str(config_file))
    assert result.returncode == 1
    assert "error: blk.60.ffn_down_exps.weight: dims" in result.stdout


def test_a_file_of_another_shape_is_rejected_naming_the_key(pro_file: Path, tmp_path: Path) -> None:
    other = pro_shaped_config() | {"n_routed_experts": 256}
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(other), encoding="utf-8")
    result = inspect(str(pro_file), "--preset-config", str(cfg))
    assert result.returncode == 1
    assert "config config.json" in result.stdout and "384 (preset has 256)" in result.stdout


@pytest.mark.parametrize(
    ("text", "says"),
    [("{", "not JSON"), ("[]", "not a JSON object"), (json.dumps({"hidden_size": 1}),
                                                      "missing 'num_hidden_layers'")],
)  # fmt: skip
def test_bad_configs_are_refused(pro_file: Path, tmp_path: Path, text: str, says: str) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text(text, encoding="utf-8")
    result = inspect(str(pro_file), "--preset-config", str(cfg))
    assert result.returncode != 0
    assert says in result.stderr and "Traceback" not in result.stderr
