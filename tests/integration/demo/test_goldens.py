"""Pinned greedy continuations of the shipped demo model, per backend and numerics.

The openings are held-out passages of the novel; goldens.json (tools/demo/make_goldens.py)
holds each configuration's tokens and the step where any two configurations part, which
docs/demo-model.md explains: the configurations differ in rounding (int8 activations,
FP8/FP4 caches, summation order), and a greedy path follows the first flipped arg-max.
"""

from __future__ import annotations

import json

import pytest
from tools.demo.files import DEMO, GOLDENS, sha256
from tools.demo.make_goldens import CONFIGS, parting, run_config

PINNED = json.loads(GOLDENS.read_text(encoding="utf-8"))


def test_goldens_are_for_the_shipped_model() -> None:
    assert PINNED["model_sha256"] == sha256(DEMO), (
        "models/demo.gguf changed: regenerate with python -m tools.demo.make_goldens"
    )


@pytest.mark.parametrize("config", CONFIGS)
def test_greedy_continuations(config: str) -> None:
    assert run_config(config, PINNED["openings"]) == PINNED["runs"][config]


def test_parting_points_match_the_pinned_runs() -> None:
    assert parting(PINNED["runs"]) == PINNED["parting"]


def test_continuations_are_text_that_ends() -> None:
    """On the exact numerics every held-out opening gets Italian words and a stop."""
    texts = PINNED["text"]["cpu/exact"]
    assert all(len(t.split()) >= 3 for t in texts)
