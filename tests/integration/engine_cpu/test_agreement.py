"""--backend cpu against --backend reference on tiny models.

Stated agreement (measured values in docs/performance.md):
- Weight products, scalar kernels: bit-identical to the reference's (integer dots for
  Q8_0/Q2_K/IQ2_XXS, f64 sums for F32, index-order f32 sums for F16); SIMD kernels within
  1e-5 of the largest output (accumulation order only).
- Whole model, ds4 numerics (native layers, SIMD kernels) vs the numpy reference (numpy's
  own reduction order and transcendentals): docs/reference/model.md §4.5's fast-math-build noise
  (median ≤ 0.1, max ≤ 1.0 logit per position). The bit-exact comparison of the native
  path is `--numerics exact` against the strict reference (test_exact_numerics.py).
- fp32 numerics on an F32 model (SIMD kernels): logits within 1e-5 relative, identical
  64-token greedy continuations.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tests.integration.engine_cpu.greedy import GreedyRun, greedy_run

from ds4.adapters.compute import cpu_kernels
from ds4.adapters.compute.cpu import open_cpu_runner
from ds4.adapters.compute.reference import open_reference_runner
from ds4.adapters.compute.reference.forward import WeightStore
from ds4.adapters.gguf.model_files import load_model
from ds4.adapters.quant.native_codec import NativeDequantizer
from ds4.domain.engine_math.lowprec import numerics_named


def product_tensors(path: Path) -> dict[str, str]:
    """One weight tensor per (role, type) of the file: role -> name."""
    model, _ = load_model(str(path))
    picked: dict[str, str] = {}
    for name, info in model.tensors.items():
        if len(info.numpy_shape) < 2 or name.endswith(("_ape.weight", "tid2eid.weight")):
            continue
        if name == "token_embd.weight":
            continue
        role = name.split(".", 2)[-1] if name.startswith("blk.") else name
        picked.setdefault(f"{role}:{info.ggml_type.name}", name)
    return picked


@pytest.mark.parametrize(("model", "numerics"), [("q2", "ds4"), ("f32", "ds4"), ("f32", "fp32")])
def test_every_weight_product_agrees(
    model: str, numerics: str, tiny_q2: Path, tiny_f32: Path
) -> None:
    path = tiny_q2 if model == "q2" else tiny_f32
    gguf, _ = load_model(str(path))
    chosen, deq = numerics_named(numerics), NativeDequantizer()
    ref = WeightStore(gguf, deq, chosen)

    def native(name: str, x: np.ndarray, expert: int | None, impl: str) -> np.ndarray:
        raw = gguf.raw(name)
        raw = raw[expert] if expert is not None else raw
        kind = gguf.tensors[name].ggml_type
        return cpu_kernels.matmul(raw, kind, x, threads=2, impl=impl)

    rng = np.random.default_rng(3)
    for role, name in product_tensors(path).items():
        info = gguf.tensors[name]
        x = rng.standard_normal((3, info.numpy_shape[-1])).astype(np.float32)
        expert = 1 if len(info.numpy_shape) == 3 else None
        want = ref.matmul(name, x, expert=expert)
        scale = float(np.abs(want).max())
        got_scalar = native(name, x, expert, "scalar")
        if numerics == "ds4":
            assert np.array_equal(got_scalar, want), role
        else:  # fp32: the reference sums F32 in f32 (BLAS order), the kernels in f64
            assert np.abs(got_scalar - want).max() <= 1e-5 * scale, role
        assert np.abs(native(name, x, expert, "auto") - want).max() <= 1e-5 * scale, role


@pytest.fixture(scope="module")
def q2_reference_run(tiny_q2: Path, prompt: list[int]) -> GreedyRun:
    return greedy_run(open_reference_runner(str(tiny_q2), numerics="ds4"), prompt)


@pytest.mark.parametrize("impl", ["scalar", "auto"])
def test_native_layers_stay_within_fast_math_noise(
    impl: str, tiny_q2: Path, prompt: list[int], q2_reference_run: GreedyRun
) -> None:
    """Teacher-forced over the reference's own continuation, so both see the same tokens."""
    tokens = prompt + q2_reference_run.tokens[:-1]
    want = np.concatenate([q2_reference_run.prompt_logits, q2_reference_run.step_logits[:-1]])
    runner = open_cpu_runner(str(tiny_q2), numerics="ds4", impl=impl)
    got = runner.new_session(len(tokens)).prefill(tokens, all_logits=True)
    per_position = np.abs(got - want).max(axis=1)
    assert float(np.median(per_position)) <= 0.1
    assert float(per_position.max()) <= 1.0
    assert np.mean(got.argmax(axis=1) == want.argmax(axis=1)) >= 0.9


def test_fp32_prompt_logits_agree(tiny_f32: Path, prompt: list[int]) -> None:
    want = open_reference_runner(str(tiny_f32), numerics="fp32").new_session(32)
    got = open_cpu_runner(str(tiny_f32), numerics="fp32").new_session(32)
    a, b = want.prefill(prompt, all_logits=True), got.prefill(prompt, all_logits=True)
    assert np.abs(b - a).max() <= 1e-5 * float(np.abs(a).max())


def test_fp32_greedy_continuations_are_identical(tiny_f32: Path, prompt: list[int]) -> None:
    want = greedy_run(open_reference_runner(str(tiny_f32), numerics="fp32"), prompt)
    got = greedy_run(open_cpu_runner(str(tiny_f32), numerics="fp32"), prompt)
    assert got.tokens == want.tokens
    scale = float(np.abs(want.step_logits).max())
    assert np.abs(got.prompt_logits - want.prompt_logits).max() <= 1e-5 * scale
    assert np.abs(got.step_logits - want.step_logits).max() <= 1e-5 * scale
