"""fp32 numerics on f32 GGUFs converted from HF's tiny models match HF's logits (issue 6.3)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.integration.engine.conftest import converted

from ds4.adapters.compute.reference import open_reference_runner

TOL = 1e-4  # x max(1, max|logit|) per position

# (schedule, sequence index); the longest sequences of two schedules are slow.
CASES = [
    pytest.param("mixed", 2, id="mixed-64"),
    pytest.param("mixed", 3, id="mixed-300", marks=pytest.mark.slow),
    pytest.param("hca128", 1, id="hca128-130"),
    pytest.param("hca128", 2, id="hca128-300", marks=pytest.mark.slow),
    pytest.param("compressed_first", 1, id="compressed_first-40"),
    pytest.param("compressed_first", 2, id="compressed_first-200"),
]


def vocab_columns() -> np.ndarray:
    from tools.oracle.reference_logits import vocab_columns as cols

    return cols()


@pytest.mark.parametrize(("schedule", "index"), CASES)
def test_logits_match_hf(schedule: str, index: int, schedule_dirs: dict[str, Path]) -> None:
    fixture = schedule_dirs[schedule]
    ref = np.load(fixture / "reference_logits.npz")
    tokens = [int(t) for t in ref[f"tokens_{index}"]]
    runner = open_reference_runner(str(converted(fixture)), numerics="fp32")
    logits = runner.new_session(len(tokens)).prefill(tokens, all_logits=True)

    scale = np.maximum(1.0, ref[f"max_abs_{index}"])[:, None]
    cols_err = np.abs(logits[:, vocab_columns()] - ref[f"logits_cols_{index}"]) / scale
    assert cols_err.max() <= TOL, f"max rel |dlogit| {cols_err.max():.3g} at {cols_err.argmax()}"
    last_err = np.abs(logits[-1] - ref[f"logits_last_{index}"]).max() / scale[-1, 0]
    assert last_err <= TOL
    greedy = logits.argmax(axis=1)
    assert np.array_equal(greedy, ref[f"topk_ids_{index}"][:, 0])
