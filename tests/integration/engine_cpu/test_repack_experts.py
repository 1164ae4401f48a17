"""--repack-experts (docs/adr/0067-q2k-row-interleaved-repack.md): the routed Q2_K down
projections copied at load into rows interleaved by 8 for the AVX-512 group kernel.
Its results are within the f32 bound of the GGUF layout's (not bit-identical), the same
bits for a token alone or in a chunk and for any thread count; exact numerics and SSD
streaming never use it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from ds4.adapters.compute import cpu_kernels
from ds4.adapters.compute.cpu import open_cpu_runner
from ds4.domain.errors import Ds4Error
from ds4.domain.expert_cache import StreamingOptions

AVX512 = "avx512" in cpu_kernels.available_impls()
needs_avx512 = pytest.mark.skipif(not AVX512, reason="no AVX-512 kernel set on this CPU")


def _greedy(
    path: Path, prompt: list[int], steps: int, **kw: object
) -> tuple[list[int], npt.NDArray[np.float32]]:
    runner = open_cpu_runner(str(path), **kw)  # type: ignore[arg-type]
    session = runner.new_session(len(prompt) + steps + 1)
    rows = [session.prefill(prompt)]
    tokens = [int(rows[0].argmax())]
    for _ in range(steps - 1):
        rows.append(session.eval(tokens[-1]))
        tokens.append(int(rows[-1].argmax()))
    return tokens, np.stack(rows)


@needs_avx512
def test_repacked_logits_are_within_the_bound_and_greedy_agrees(
    tiny_q2: Path, prompt: list[int]
) -> None:
    on = open_cpu_runner(str(tiny_q2), threads=2)
    assert on.repack.tensors == 2 and on.repack.nbytes > 0 and on.repack.skipped is None
    got_tokens, got = _greedy(tiny_q2, prompt, 6, threads=2)
    want_tokens, want = _greedy(tiny_q2, prompt, 6, threads=2, repack_experts="off")
    assert got_tokens == want_tokens
    # different accumulation order of the down products: not the same bits, but close
    # (each product within 1e-5 * sum|w * x| of the scalar kernel's, docs/performance.md)
    assert not np.array_equal(got, want)
    assert float(np.abs(got - want).max()) <= 1e-4 * float(np.abs(want).max())


@needs_avx512
@pytest.mark.parametrize("threads", [1, 3])
def test_repacked_results_do_not_depend_on_threads(
    tiny_q2: Path, prompt: list[int], threads: int
) -> None:
    _, two = _greedy(tiny_q2, prompt, 4, threads=2)
    _, other = _greedy(tiny_q2, prompt, 4, threads=threads)
    assert np.array_equal(two, other)


def test_exact_numerics_never_repack(tiny_q2: Path, prompt: list[int]) -> None:
    runner = open_cpu_runner(str(tiny_q2), numerics="exact", threads=2)
    assert runner.repack.tensors == 0 and "--numerics exact" in (runner.repack.skipped or "")
    _, auto = _greedy(tiny_q2, prompt, 3, numerics="exact", threads=2)
    _, off = _greedy(tiny_q2, prompt, 3, numerics="exact", threads=2, repack_experts="off")
    assert np.array_equal(auto, off)


def test_ssd_streaming_never_repacks(tiny_q2: Path) -> None:
    options = StreamingOptions()
    runner = open_cpu_runner(str(tiny_q2), threads=2, streaming=options)
    assert runner.repack.tensors == 0 and "--ssd-streaming" in (runner.repack.skipped or "")


@pytest.mark.parametrize("command", ["cli", "server", "bench"])
def test_help_explains_the_flag(command: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ds4", command, "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "--repack-experts" in out and "default" in out.split("--repack-experts", 1)[1]


def test_a_bad_choice_is_refused() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ds4", "bench", "--repack-experts", "on"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 2 and "--repack-experts" in result.stderr


@needs_avx512
def test_repacked_rows_are_refused_by_other_kernel_sets(tiny_q2: Path, prompt: list[int]) -> None:
    """The native side never reads interleaved bytes as GGUF rows: a repacked layout run
    with another kernel set is an error, in decode and in a chunk."""
    runner = open_cpu_runner(str(tiny_q2), threads=2)
    runner.forward.opts.impl = cpu_kernels.IMPLS["avx2"]
    for tokens in (prompt[:1], prompt):
        with pytest.raises(Ds4Error, match="not available"):
            runner.new_session(64).prefill(tokens)
