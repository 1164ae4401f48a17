"""A sanity measure of the demo model: held-out cross-entropy against a unigram model.

The held-out continuations are rebuilt from data/promessi_sposi.txt with the seed recorded in the
model's provenance, and scored by our engine (cpu backend, ds4 numerics); both numbers
are printed (pytest -s) and docs/demo-model.md reports them.
"""

from __future__ import annotations

import numpy as np
import pytest
from tools.demo.dataset import build_corpus
from tools.demo.evaluate import measure
from tools.demo.files import DEMO, NOVEL

from ds4.apps import wiring
from ds4.apps.bootstrap import load_engine
from ds4.apps.options import EngineOptions


@pytest.mark.slow
def test_held_out_cross_entropy_beats_unigram() -> None:
    meta = wiring.open_model_file(str(DEMO)).metadata
    seed = int(str(meta["ds4.convert.train_seed"].value))
    engine = load_engine(EngineOptions(str(DEMO), backend="cpu", numerics="ds4"))
    corpus = build_corpus(engine.tokenizer, NOVEL, 1, seed)

    def logits_of(ids: list[int]) -> np.ndarray:
        return engine.runner.new_session(len(ids)).prefill(ids, all_logits=True)

    quality = measure(logits_of, corpus.held_out, corpus.novel_train, engine.tokenizer.vocab_size)
    print("\n" + "\n".join(quality.lines()))
    assert quality.model_ce < quality.unigram_ce - 1.0
