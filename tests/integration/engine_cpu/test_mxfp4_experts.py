"""A tiny model with MXFP4 routed experts (`ds4 gguf tiny --quant mxfp4`) runs on the cpu
backend (its MXFP4 dots over Q8_0 activations, the per-token expert path) and agrees with
the numpy reference: the same stated bounds as test_agreement.py's q2 model (median <= 0.1,
max <= 1.0 logit per position, teacher-forced, ds4 numerics)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.integration.engine_cpu.conftest import make_tiny
from tests.integration.engine_cpu.greedy import GreedyRun, greedy_run

from ds4.adapters.compute.cpu import open_cpu_runner
from ds4.adapters.compute.reference import open_reference_runner
from ds4.adapters.gguf.model_files import load_model
from ds4.domain.gguf.ggml_types import GGMLType


@pytest.fixture(scope="module")
def tiny_mxfp4(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny(tmp_path_factory.mktemp("cpu_mxfp4") / "mxfp4.gguf", "mxfp4")


@pytest.fixture(scope="module")
def mxfp4_reference_run(tiny_mxfp4: Path, prompt: list[int]) -> GreedyRun:
    return greedy_run(open_reference_runner(str(tiny_mxfp4), numerics="ds4"), prompt)


def test_the_routed_experts_are_mxfp4(tiny_mxfp4: Path) -> None:
    model, _ = load_model(str(tiny_mxfp4))
    kinds = {i.ggml_type for n, i in model.tensors.items() if "_exps." in n}
    assert kinds == {GGMLType.MXFP4}


@pytest.mark.parametrize("impl", ["scalar", "auto"])
def test_cpu_logits_agree_with_the_reference(
    impl: str, tiny_mxfp4: Path, prompt: list[int], mxfp4_reference_run: GreedyRun
) -> None:
    run = mxfp4_reference_run
    tokens = prompt + run.tokens[:-1]
    want = np.concatenate([run.prompt_logits, run.step_logits[:-1]])
    runner = open_cpu_runner(str(tiny_mxfp4), numerics="ds4", impl=impl)
    got = runner.new_session(len(tokens)).prefill(tokens, all_logits=True)
    per_position = np.abs(got - want).max(axis=1)
    assert float(np.median(per_position)) <= 0.1
    assert float(per_position.max()) <= 1.0
    assert np.mean(got.argmax(axis=1) == want.argmax(axis=1)) >= 0.9
