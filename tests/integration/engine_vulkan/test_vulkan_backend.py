"""--backend vulkan (the device-resident forward) against the reference backend on the
tiny q2 model (lavapipe here).

Stated agreement: --numerics fp32 logits within 1e-4 of the largest reference logit per
call (the products differ only in f32 summation order), identical greedy picks, payloads
moving between the two backends both ways; --numerics ds4 within the cpu fast path's
noise statistics.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from tests.integration.engine_cpu.conftest import make_tiny

from ds4.adapters.compute.reference import open_reference_runner
from ds4.adapters.compute.reference.runner import ReferenceRunner
from ds4.adapters.compute.reference.state import LayerState
from ds4.adapters.compute.vulkan.runner import VulkanRunner, vulkan_runner
from ds4.adapters.gguf.model_files import load_model
from ds4.apps import backends
from ds4.apps.options import EngineOptions
from ds4.domain.errors import Ds4Error
from ds4.ports.compute import ModelRunner

REL = 1e-4
ROOT = Path(__file__).resolve().parents[3]


def _close(got: npt.NDArray[np.float32], want: npt.NDArray[np.float32]) -> bool:
    return bool(np.abs(got - want).max() <= REL * float(np.abs(want).max()))


def _vulkan(path: Path) -> ModelRunner:
    model, hparams = load_model(str(path))
    return vulkan_runner(model, hparams, numerics="fp32")


@pytest.fixture(scope="module")
def runners(tiny_q2: Path) -> tuple[ModelRunner, ModelRunner]:
    return _vulkan(tiny_q2), open_reference_runner(str(tiny_q2), numerics="fp32")


def test_prefill_eval_and_rewind_agree(
    runners: tuple[ModelRunner, ModelRunner], prompt: list[int]
) -> None:
    vk, ref = (r.new_session(16) for r in runners)
    a, b = vk.prefill(prompt, all_logits=True), ref.prefill(prompt, all_logits=True)
    assert _close(a, b)
    assert np.array_equal(a.argmax(axis=1), b.argmax(axis=1))
    nxt = int(b[-1].argmax())
    step = vk.eval(nxt)
    assert _close(step, ref.eval(nxt))
    n = vk.rewind_floor(len(prompt))
    assert n > 0
    vk.rewind(n)
    replay = vk.prefill([*prompt, nxt][n:], all_logits=False)
    assert np.array_equal(replay, step)  # rewind is exact on the device path too


def test_payloads_move_between_backends(
    runners: tuple[ModelRunner, ModelRunner], prompt: list[int]
) -> None:
    vk_runner, ref_runner = runners
    vk = vk_runner.new_session(16)
    vk.prefill(prompt)
    ref = ref_runner.new_session(16)
    ref.load_payload(vk.payload())
    assert list(ref.tokens) == prompt
    nxt = int(vk.logits().argmax())
    assert _close(vk.eval(nxt), ref.eval(nxt))
    back = vk_runner.new_session(16)
    back.load_payload(ref.payload())
    assert list(back.tokens) == [*prompt, nxt]
    assert _close(back.eval(5), ref.eval(5))


def test_ds4_numerics_stay_within_the_fast_path_noise(tiny_q2: Path) -> None:
    """The cpu-vs-reference statistics and design (engine_cpu/test_agreement.py):
    teacher-forced over the reference's own greedy continuation, median <= 0.1 and max
    <= 1.0 logit per position, >= 90% equal argmax. 40 prompt tokens put the indexer's
    top-k to work; with only a few positions 90% would demand every argmax, and the tiny
    random model has near ties (top two 0.003 apart) that any other summation order flips."""
    prompt = [int(t) for t in np.random.default_rng(7).integers(0, 129_280, 40)]
    ref = open_reference_runner(str(tiny_q2), numerics="ds4").new_session(64)
    want = [ref.prefill(prompt, all_logits=True)]
    tokens = list(prompt)
    for _ in range(6):
        tokens.append(int(want[-1][-1].argmax()))
        want.append(ref.eval(tokens[-1])[None])
    model, hparams = load_model(str(tiny_q2))
    runner = vulkan_runner(model, hparams, numerics="ds4")
    got = runner.new_session(64).prefill(tokens[:-1], all_logits=True)
    want_all = np.concatenate(want[:-1])
    per_position = np.abs(got - want_all).max(axis=1)
    assert float(np.median(per_position)) <= 0.1
    assert float(per_position.max()) <= 1.0
    assert np.mean(got.argmax(axis=1) == want_all.argmax(axis=1)) >= 0.9
    session = runner.new_session(64)
    session.prefill(tokens[:8])
    assert np.array_equal(session.eval(tokens[8]), got[8])  # decode kernels = chunk kernels
    assert _one_submission(runner)


def _one_submission(runner: ModelRunner) -> bool:
    """The last step went to the device as one command buffer, with no host detour."""
    assert isinstance(runner, VulkanRunner)
    last = runner.device_forward.last
    return last.tokens == 1 and last.submissions == 1 and not last.fallbacks


def test_device_state_decodes_rewinds_and_replays_exactly(
    runners: tuple[ModelRunner, ModelRunner],
) -> None:
    """A prefill chunk, decode steps across compressor emissions with the indexer
    choosing rows (40 + steps positions, top-k 8 of ratio-4 rows), each step one
    submission; a rewind into the decoded span and a replay as one chunk give the same
    bits; every logit within the fp32 contract of the reference."""
    vk_runner, ref_runner = runners
    prompt = [int(t) for t in np.random.default_rng(11).integers(0, 129_280, 40)]
    vk, ref = vk_runner.new_session(64), ref_runner.new_session(64)
    assert _close(vk.prefill(prompt, all_logits=True), ref.prefill(prompt, all_logits=True))
    steps, tokens = [], list(prompt)
    for _ in range(5):  # positions 40..44: emissions at 43
        tokens.append(int(ref.logits().argmax()))
        steps.append(vk.eval(tokens[-1]))
        assert _one_submission(vk_runner)
        assert _close(steps[-1], ref.eval(tokens[-1]))
    report = backends.device_step_report(vk_runner)  # what ds4 bench prints
    assert report is not None and "1 submission(s), host fallbacks: none" in report
    assert backends.device_step_report(ref_runner) is None
    vk.rewind(42)
    replay = vk.prefill(tokens[42:], all_logits=True)
    assert np.array_equal(replay, np.stack(steps[-3:]))


def test_payload_round_trip_after_device_decode(
    runners: tuple[ModelRunner, ModelRunner], prompt: list[int]
) -> None:
    """State decoded on the device, exported, loaded by the reference and by a fresh
    vulkan session: both continue as the original does."""
    vk_runner, ref_runner = runners
    vk = vk_runner.new_session(32)
    vk.prefill(prompt)
    for t in (3, 141, 59):  # positions 8..10 decoded on the device
        vk.eval(t)
    data = vk.payload()
    twin, ref = vk_runner.new_session(32), ref_runner.new_session(32)
    twin.load_payload(data)
    ref.load_payload(data)
    want = vk.eval(26)  # position 11: a ratio-4 emission from restored frontier state
    assert np.array_equal(twin.eval(26), want)
    assert _close(ref.eval(26), want)


def test_exact_numerics_and_missing_models_are_refused(vulkan_ok: None) -> None:
    with pytest.raises(Ds4Error, match="exact runs on the native CPU backend"):
        backends.check_backend("vulkan", "exact")
    backends.check_backend("vulkan", "ds4")
    with pytest.raises(Ds4Error, match="needs a model"):
        backends.model_runner(None, EngineOptions(None, backend="vulkan", numerics="fp32"))


@pytest.mark.slow
def test_greedy_continuation_is_identical(
    runners: tuple[ModelRunner, ModelRunner], prompt: list[int]
) -> None:
    picks = []
    for runner in runners:
        session, tokens = runner.new_session(32), []
        last = session.prefill(prompt)
        for _ in range(8):
            tokens.append(int(last.argmax()))
            last = session.eval(tokens[-1])
        picks.append(tokens)
    assert picks[0] == picks[1]


@pytest.mark.slow
def test_cli_runs_end_to_end_on_the_demo_model(vulkan_ok: None) -> None:
    def run(backend: str) -> str:
        result = subprocess.run(
            [sys.executable, "-m", "ds4", "cli", "-m", str(ROOT / "models/demo.gguf"),
             "--backend", backend, "--numerics", "fp32", "-p", "Hello", "-n", "6", "--temp", "0"],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout

    out = run("vulkan")
    assert out.strip()
    assert out == run("reference")


def test_chunk_forward_over_host_layer_states(
    runners: tuple[ModelRunner, ModelRunner], prompt: list[int]
) -> None:
    """VulkanForward as the reference's ChunkForward: host LayerStates go up, come back
    holding the chunk's rows (within the fp32 contract of the reference's)."""
    vk_runner, ref_runner = runners
    assert isinstance(vk_runner, VulkanRunner) and isinstance(ref_runner, ReferenceRunner)
    hp = ref_runner.forward.hp
    tokens, positions = np.array(prompt), np.arange(len(prompt))
    mine = [LayerState(hp, il) for il in range(hp.n_layer)]
    theirs = [LayerState(hp, il) for il in range(hp.n_layer)]
    got = vk_runner.device_forward.run(tokens, positions, mine)
    want = ref_runner.forward.run(tokens, positions, theirs)
    assert _close(got, want)
    for a, b in zip(mine, theirs, strict=True):
        assert a.raw.n == b.raw.n == len(prompt)
        assert _close(a.raw.view(), b.raw.view())
        for ca, cb in zip(a.compressors(), b.compressors(), strict=True):
            assert ca.rows.n == cb.rows.n == len(prompt) // ca.ratio
            assert _close(ca.rows.view(), cb.rows.view())


@pytest.mark.slow
def test_every_layer_kind_past_a_ratio_128_emission(
    tmp_path_factory: pytest.TempPathFactory, vulkan_ok: None
) -> None:
    """The 6-layer tiny model (dense, ratio 4 + indexer, ratio 128; hash and top-k
    routing) over 130 positions: a ratio-128 row is emitted and the indexer chooses;
    fp32 logits within the contract, a decode step one submission, a payload continued
    bit-identically."""
    path = make_tiny(tmp_path_factory.mktemp("vk_tiny6") / "t6.gguf", "q2", "--preset", "tiny")
    vk_runner = _vulkan(path)
    prompt = [int(t) for t in np.random.default_rng(3).integers(0, 129_280, 130)]
    vk = vk_runner.new_session(160)
    ref = open_reference_runner(str(path), numerics="fp32").new_session(160)
    assert _close(vk.prefill(prompt, all_logits=True), ref.prefill(prompt, all_logits=True))
    assert _close(vk.eval(5), ref.eval(5))
    assert _one_submission(vk_runner)
    twin = vk_runner.new_session(160)
    twin.load_payload(vk.payload())
    assert np.array_equal(twin.eval(9), vk.eval(9))


def test_trimmed_device_history_rewinds_exactly(
    runners: tuple[ModelRunner, ModelRunner],
) -> None:
    """With a short rewind history the session trims: the device drops old rows (moving
    the kept ones down), still rebuilds every position of the kept history exactly, and
    no longer claims positions it dropped."""
    vk_runner, ref_runner = runners
    prompt = [int(t) for t in np.random.default_rng(13).integers(0, 129_280, 40)]
    assert isinstance(vk_runner, VulkanRunner) and isinstance(ref_runner, ReferenceRunner)
    vk = vk_runner.new_session(64, rewind_history=6)
    ref = ref_runner.new_session(64, rewind_history=6)
    vk.prefill(prompt)  # 40 tokens: a trim at 32 keeps the last 6 (and what reads need)
    ref.prefill(prompt)
    steps = [vk.eval(t) for t in (7, 8, 9)]
    for t in (7, 8, 9):
        ref.eval(t)
    assert _close(steps[-1], ref.logits())
    assert [vk.rewind_floor(m) for m in (41, 42)] == [41, 42]  # within the kept history
    assert vk.rewind_floor(30) == 0  # the raw rows before 24 are gone from the device
    vk.rewind(41)
    replay = vk.prefill([*prompt, 7, 8, 9][41:], all_logits=True)
    assert np.array_equal(replay[-1], steps[-1])


def test_capture_runs_on_the_host_view_and_the_device_resumes(
    runners: tuple[ModelRunner, ModelRunner],
) -> None:
    """Activation capture (a per-sublayer host hook) takes the reference forward over the
    downloaded state; the next step uploads it and runs on the device again."""
    vk_runner, ref_runner = runners
    assert isinstance(vk_runner, VulkanRunner) and isinstance(ref_runner, ReferenceRunner)
    got = []
    for runner in (vk_runner, ref_runner):
        session = runner.new_session(32)
        session.prefill([1, 2, 3, 4, 5])
        runner.capture("ffn_out")
        step = session.eval(6)
        captured = runner.captured()
        runner.capture(None)
        got.append((step, captured, session.eval(7)))
    for mine, theirs in zip(got[0], got[1], strict=True):
        assert _close(mine, theirs)
    assert _one_submission(vk_runner)


def test_a_refused_step_leaves_the_device_state_as_it_was(
    runners: tuple[ModelRunner, ModelRunner], prompt: list[int]
) -> None:
    vk_runner, _ = runners
    vk, twin = vk_runner.new_session(32), vk_runner.new_session(32)
    vk.prefill(prompt)
    twin.prefill(prompt)
    with pytest.raises(Ds4Error):
        vk.eval(10**7)  # outside the vocabulary
    assert list(vk.tokens) == prompt
    assert np.array_equal(vk.eval(5), twin.eval(5))


def test_a_bf16_model_runs_on_the_device(
    tmp_path_factory: pytest.TempPathFactory, vulkan_ok: None, prompt: list[int]
) -> None:
    """`--quant bf16` (every float tensor BF16, as llama.cpp's converter writes the
    embedding, compressor and indexer): matvec_bf16 and the BF16 embedding gather, within
    the fp32 contract of the reference, each decode step one submission."""
    path = make_tiny(tmp_path_factory.mktemp("vk_bf16") / "bf16.gguf", "bf16")
    vk = _vulkan(path)
    got = vk.new_session(16).prefill(prompt, all_logits=True)
    want = open_reference_runner(str(path), numerics="fp32").new_session(16)
    expected = want.prefill(prompt, all_logits=True)
    assert _close(got, expected)
    assert np.array_equal(got.argmax(axis=1), expected.argmax(axis=1))
    session = vk.new_session(16)
    session.prefill(prompt[:-1])
    assert _close(session.eval(prompt[-1]), expected[-1])
    assert _one_submission(vk)
