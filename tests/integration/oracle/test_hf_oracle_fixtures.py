"""The HF oracle fixture maker: finite, byte-reproducible, decisive, and naming-consistent."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from safetensors.numpy import load_file  # noqa: E402
from safetensors.torch import load_file as load_torch  # noqa: E402
from tools.oracle import make_fixtures  # noqa: E402
from tools.oracle.margins import MIN_RELATIVE_MARGIN  # noqa: E402
from tools.oracle.naming import official_to_hf  # noqa: E402
from transformers import DeepseekV4ForCausalLM  # noqa: E402

# ~30 s on one busy core, most of it importing torch and transformers.
pytestmark = pytest.mark.slow

SCHEDULE = "compressed_first"  # the fastest schedule; it still has every layer kind but hash


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    torch.set_num_threads(1)
    a = tmp_path_factory.mktemp("oracle_a")
    b = tmp_path_factory.mktemp("oracle_b")
    for out in (a, b):
        assert make_fixtures.main(["--out", str(out), "--schedule", SCHEDULE]) == 0
    return a / SCHEDULE, b / SCHEDULE


def test_logits_are_finite_and_cover_every_sequence(runs: tuple[Path, Path]) -> None:
    ref = np.load(runs[0] / "reference_logits.npz", allow_pickle=False)
    n = int(ref["n_sequences"])
    assert n >= 3
    n_cols = ref["vocab_cols"].shape[0]
    for i in range(n):
        length = ref[f"tokens_{i}"].shape[0]
        assert ref[f"logits_cols_{i}"].shape == (length, n_cols)
        assert ref[f"logits_cols_{i}"].dtype == np.float32
        for key in ("logits_cols", "logits_last", "topk_vals", "max_abs"):
            assert np.isfinite(ref[f"{key}_{i}"]).all(), key
        # the stored full-vocab statistics agree with the stored full last row
        last = ref[f"logits_last_{i}"]
        assert int(ref[f"topk_ids_{i}"][-1, 0]) == int(np.argmax(last))
        assert float(ref[f"max_abs_{i}"][-1]) == float(np.abs(last).max())
    assert json.loads(str(ref["config_json"]))["model_type"] == "deepseek_v4"


def test_two_runs_write_identical_bytes(runs: tuple[Path, Path]) -> None:
    for rel in ("reference_logits.npz", "hf/model.safetensors", "official/model.safetensors"):
        assert (runs[0] / rel).read_bytes() == (runs[1] / rel).read_bytes(), rel


def test_every_topk_choice_beats_the_runner_up(runs: tuple[Path, Path]) -> None:
    meta = json.loads(str(np.load(runs[0] / "reference_logits.npz")["meta_json"]))
    assert meta["router_decisions"] > 0 and meta["indexer_decisions"] > 0
    assert meta["router_min_margin"] >= MIN_RELATIVE_MARGIN
    assert meta["indexer_min_margin"] >= MIN_RELATIVE_MARGIN


def test_both_namings_hold_the_same_tensors(runs: tuple[Path, Path]) -> None:
    hf_model = DeepseekV4ForCausalLM.from_pretrained(runs[0] / "hf")
    hf_state = {
        k: v.float() if v.is_floating_point() else v for k, v in hf_model.state_dict().items()
    }
    hub = load_torch(runs[0] / "official" / "model.safetensors")
    assert hub["embed.weight"].dtype == torch.bfloat16  # BF16 where the release uses it
    assert hub["layers.0.attn.compressor.wkv.weight"].dtype == torch.bfloat16
    hub_np = {k: (v.float() if v.is_floating_point() else v).numpy() for k, v in hub.items()}
    mapped = official_to_hf(hub_np)
    assert set(mapped) == set(hf_state)
    for name, value in mapped.items():
        np.testing.assert_array_equal(value, hf_state[name].numpy(), err_msg=name)
    # transformers' own loader reads the hub-named copy (its checkpoint conversion) alike
    hub_model = DeepseekV4ForCausalLM.from_pretrained(runs[0] / "official")
    for name, value in hub_model.state_dict().items():
        assert torch.equal(value.float() if value.is_floating_point() else value, hf_state[name]), (
            name
        )


def test_saved_hf_checkpoint_reproduces_the_reference(runs: tuple[Path, Path]) -> None:
    ref = np.load(runs[0] / "reference_logits.npz")
    model = DeepseekV4ForCausalLM.from_pretrained(runs[0] / "hf")
    model.train(False)
    ids = torch.from_numpy(ref["tokens_1"])[None]
    with torch.no_grad():
        logits = model(input_ids=ids, use_cache=False).logits[0]
    cols = torch.from_numpy(ref["vocab_cols"])
    np.testing.assert_array_equal(logits[:, cols].numpy(), ref["logits_cols_1"])
    saved = load_file(runs[0] / "hf" / "model.safetensors")
    assert saved["head.weight"].shape == (129280, 64)
