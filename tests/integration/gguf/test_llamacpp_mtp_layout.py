"""llama.cpp's MTP layout (`blk.N.nextn.*`, docs/llamacpp.md) read as our MTP block: the
demo model's trained block rewritten into that layout drafts exactly as our own file
does, and a full model carrying the layer serves as its own `--mtp`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.support.llamacpp_layout import write_llamacpp_mtp

from ds4.adapters.gguf.model_files import load_model, load_mtp
from ds4.adapters.gguf.reader import GGUFFile
from ds4.apps.bootstrap import load_engine
from ds4.apps.options import EngineOptions
from ds4.domain.engine.session import EngineSession
from ds4.domain.errors import Ds4Error
from ds4.domain.generation.loop import decode_tokens, prefill
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.domain.sampling import GREEDY
from ds4.domain.speculative import MtpDrafter

ROOT = Path(__file__).resolve().parents[3]
DEMO, DEMO_MTP = ROOT / "models" / "demo.gguf", ROOT / "models" / "demo-mtp.gguf"
PROMPT = "Quel ramo del lago di Como, che volge a mezzogiorno"


@pytest.fixture(scope="module")
def layouts(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("nextn")
    return {
        "mtp": write_llamacpp_mtp(DEMO, DEMO_MTP, out / "mtp.gguf", with_trunk=False),
        "full": write_llamacpp_mtp(DEMO, DEMO_MTP, out / "full.gguf", with_trunk=True),
    }


def run(model: Path, mtp: Path | None, n: int = 24) -> tuple[list[int], tuple[int, int]]:
    options = EngineOptions(str(model), threads=2, mtp=None if mtp is None else str(mtp))
    engine = load_engine(options)
    compute = engine.runner.new_session(512)
    session = engine.session_over(compute) if mtp else EngineSession(compute)
    for _ in prefill(session, engine.tokenizer.encode(PROMPT)):
        pass
    tokens = list(decode_tokens(session, GREEDY, n, eos=-1))
    if not isinstance(session.drafter, MtpDrafter):
        return tokens, (0, 0)
    return tokens, (session.drafter.stats.proposed, session.drafter.stats.accepted)


def main_hparams(path: Path) -> DeepSeekV4HParams:
    file, hp = load_model(str(path))
    file.close()
    return hp


def test_the_eh_projection_splits_into_our_e_and_h_bytes(layouts: dict[str, Path]) -> None:
    hp = main_hparams(DEMO)
    view, view_hp = load_mtp(str(layouts["mtp"]), hp)
    with GGUFFile(DEMO_MTP) as ours:
        assert set(view.tensors) == set(ours.tensors)
        for name in ("mtp.0.e_proj.weight", "mtp.0.h_proj.weight", "mtp.0.hc_head_fn.weight",
                     "mtp.0.norm.weight", "mtp.0.attn_q_a.weight"):  # fmt: skip
            assert view.tensors[name].dims == ours.tensors[name].dims, name
            np.testing.assert_array_equal(view.raw(name), ours.raw(name), err_msg=name)
    assert view_hp.n_layer == hp.n_layer  # block_count counts the MTP layer; n_layer does not
    view.close()


def test_llamacpp_mtp_file_drafts_exactly_as_ours(layouts: dict[str, Path]) -> None:
    plain, _ = run(DEMO, None)
    ours, ours_stats = run(DEMO, DEMO_MTP)
    theirs, their_stats = run(DEMO, layouts["mtp"])
    assert ours == theirs == plain
    assert their_stats == ours_stats and ours_stats[1] > 0  # same drafts, some accepted


def test_a_model_carrying_the_layer_is_its_own_mtp_file(layouts: dict[str, Path]) -> None:
    full = layouts["full"]
    assert main_hparams(full).n_layer == main_hparams(DEMO).n_layer
    plain, _ = run(DEMO, None)
    tokens, (proposed, _) = run(full, full)
    assert tokens == plain and proposed > 0


def test_a_model_without_the_layer_is_no_mtp_file() -> None:
    hp = main_hparams(DEMO)
    with pytest.raises(Ds4Error, match="not an MTP file"):
        load_mtp(str(DEMO), hp)
