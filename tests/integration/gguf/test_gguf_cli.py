"""`ds4 gguf inspect|dump` as a user runs them: real files, a real subprocess."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import gguf
import gguf.quants
import numpy as np
import pytest
from gguf import GGMLQuantizationType as Q
from tests.support.flash_fixture import flash_ratio, write_flash_sparse
from tests.support.sample_gguf import write_sample

DS4 = [sys.executable, "-m", "ds4"]


def ds4(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*DS4, *args], capture_output=True, text=True, timeout=120)


@pytest.fixture(scope="module")
def flash_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_flash_sparse(tmp_path_factory.mktemp("flash") / "flash.gguf")


def test_inspect_reports_flash_valid_with_its_schedule(flash_file: Path) -> None:
    result = ds4("gguf", "inspect", str(flash_file), "--json", "--preset", "flash")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["valid"] is True
    assert report["preset"] == "flash"
    assert report["hparams"]["n_layer"] == 43
    assert [row["compress_ratio"] for row in report["layers"]] == [
        flash_ratio(n) for n in range(43)
    ]
    assert [row["indexer"] for row in report["layers"]].count(True) == 21
    assert report["tokenizer"]["special_token_ids"]["<｜begin▁of▁sentence｜>"] == 0
    assert report["tensor_count"] == 1328


def test_inspect_text_output(flash_file: Path) -> None:
    result = ds4("gguf", "inspect", str(flash_file))
    assert result.returncode == 0, result.stderr
    assert "preset:       flash" in result.stdout
    assert "layer 42: ratio 4, indexer, top-k routing" in result.stdout
    assert result.stdout.rstrip().endswith("validation:   OK")


@pytest.mark.parametrize(
    ("override", "fragment"),
    [
        ({"blk.7.attn_norm.weight": ([4096], Q.Q4_K)}, "type Q4_K"),
        ({"blk.5.attn_sinks.weight": ([32], Q.F32)}, "dims [32], expected [64]"),
    ],
)
def test_inspect_names_the_bad_tensor(
    tmp_path: Path, override: dict[str, tuple[list[int], Q]], fragment: str
) -> None:
    path = write_flash_sparse(tmp_path / "bad.gguf", overrides=override)
    result = ds4("gguf", "inspect", str(path))
    assert result.returncode == 1
    (name,) = override
    assert f"error: {name}: {fragment}" in result.stdout


def test_missing_tensors_are_all_listed(tmp_path: Path) -> None:
    gone = ("blk.3.ffn_norm.weight", "output.weight", "blk.2.indexer.proj.weight")
    path = write_flash_sparse(tmp_path / "bad.gguf", drop=gone)
    result = ds4("gguf", "inspect", str(path), "--json")
    assert result.returncode == 1
    problems = {(p["subject"], p["message"]) for p in json.loads(result.stdout)["problems"]}
    assert {(name, "missing") for name in gone} <= problems


def test_full_shape_file_maps_every_tensor_in_bounded_memory(flash_file: Path) -> None:
    script = f"""
import re, time
t0 = time.perf_counter()
from ds4.adapters.gguf.reader import GGUFFile
from ds4.domain.model.validation import validate
f = GGUFFile({str(flash_file)!r})
report = validate(f.metadata, f.tensors, require_preset="flash")
assert report.ok, report.problems
total = sum(f.raw(name).nbytes for name in f.tensors)
# VmHWM is this process image's peak RSS (ru_maxrss would carry over the forking
# parent's pages across exec).
status = open("/proc/self/status").read()
peak_kib = int(re.search(r"VmHWM:\\s+(\\d+) kB", status).group(1))
print(total, peak_kib, time.perf_counter() - t0)
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    total, max_rss_kib, seconds = result.stdout.split()
    assert int(total) > 80 * 2**30  # every tensor's bytes are addressable
    assert int(max_rss_kib) < 1024 * 1024  # < 1 GiB resident
    print(f"mapped {int(total) / 2**30:.1f} GiB in {float(seconds):.2f}s, rss {max_rss_kib} KiB")


@pytest.fixture(scope="module")
def sample_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("sample") / "sample.gguf"
    write_sample(path)
    return path


@pytest.mark.parametrize("dequant", ["native", "numpy"])
@pytest.mark.parametrize("type_name", ["f32", "f16", "bf16", "q8_0", "q2_k", "q4_k", "iq2_xxs"])
def test_dump_equals_gguf_py_dequantize(
    sample_file: Path, tmp_path: Path, type_name: str, dequant: str
) -> None:
    name = f"tensor.{type_name}"
    out = tmp_path / "x.npy"
    result = ds4("gguf", "dump", str(sample_file), name, "--out", str(out), "--dequant", dequant)
    assert result.returncode == 0, result.stderr
    ours = np.load(out)
    tensor = next(t for t in gguf.GGUFReader(str(sample_file)).tensors if t.name == name)
    theirs = gguf.quants.dequantize(np.asarray(tensor.data), tensor.tensor_type)
    assert ours.dtype == np.float32
    assert ours.shape == (3, 512)
    np.testing.assert_array_equal(ours.view(np.uint32), theirs.astype(np.float32).view(np.uint32))


def test_dump_int32_and_unknown_tensor(sample_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "ids.npy"
    assert ds4("gguf", "dump", str(sample_file), "tensor.i32", "--out", str(out)).returncode == 0
    assert np.load(out).dtype == np.int32
    result = ds4("gguf", "dump", str(sample_file), "nope", "--out", str(tmp_path / "n.npy"))
    assert result.returncode == 2
    assert "no tensor named 'nope'" in result.stderr
    assert not (tmp_path / "n.npy").exists()


def corrupt_copies(src: Path, dst: Path) -> list[Path]:
    blob = src.read_bytes()
    paths = []
    for i, cut in enumerate([0, 3, 20, 31, 100, 700, len(blob) // 2, len(blob) - 1]):
        p = dst / f"cut{i}.gguf"
        p.write_bytes(blob[:cut])
        paths.append(p)
    rng = np.random.default_rng(7)
    for i in range(12):
        flipped = bytearray(blob)
        for pos in rng.integers(0, 900, 3):
            flipped[pos] ^= 0xFF
        p = dst / f"flip{i}.gguf"
        p.write_bytes(bytes(flipped))
        paths.append(p)
    return paths


def test_corrupt_files_give_one_line_and_exit_2(sample_file: Path, tmp_path: Path) -> None:
    for path in corrupt_copies(sample_file, tmp_path):
        result = ds4("gguf", "inspect", str(path))
        assert "Traceback" not in result.stderr, (path.name, result.stderr)
        if result.returncode in {0, 1}:
            # The flip landed in a value: the file parses; the verdict says what is wrong.
            assert "validation:" in result.stdout and result.stderr == ""
            continue
        assert result.returncode == 2, (path.name, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("ds4: error: "), result.stderr


def test_cli_rejects_bad_flags_without_traceback(sample_file: Path) -> None:
    result = ds4("gguf", "inspect", str(sample_file), "--bogus")
    assert result.returncode == 2
    assert "unrecognized arguments: --bogus" in result.stderr
    assert "Traceback" not in result.stderr


def test_console_script_is_installed() -> None:
    exe = shutil.which("ds4", path=str(Path(sys.executable).parent))
    assert exe is not None
    result = subprocess.run([exe, "--help"], capture_output=True, text=True)
    assert result.returncode == 0
    assert "gguf" in result.stdout


DEMO = Path(__file__).resolve().parents[3] / "models" / "demo.gguf"


def test_inspect_refusing_a_preset_says_so_on_stderr() -> None:
    result = ds4("gguf", "inspect", str(DEMO), "--preset", "flash")
    assert result.returncode == 1
    assert "validation:   INVALID" in result.stdout  # the report itself is unchanged
    assert result.stderr.startswith(
        f"ds4 gguf inspect: {DEMO} is not a valid model against preset flash: "
    )
    assert "first: preset flash: deepseek4.block_count: 4 (preset has 43)" in result.stderr
    assert result.stderr.count("\n") == 1
    valid = ds4("gguf", "inspect", str(DEMO))
    assert valid.returncode == 0 and valid.stderr == ""


def test_gguf_tiny_draws_no_bar_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    result = ds4("gguf", "tiny", "--out", str(tmp_path / "t.gguf"), "--preset", "tiny-2layer")
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stderr and "tensor/s" not in result.stderr, result.stderr
