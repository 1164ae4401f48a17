"""Layer-shard files (`ds4 gguf split`, docs/distributed.md#layer-shard-files): the
demo model split in a real `ds4 gguf split` process; each shard validates as its part
and no other, a shard is refused as a whole model, a worker handed the wrong shard says
so, and the distributed backend over the shards (workers in this process, then real Ray
workers in `ds4 cli`) computes the unsplit model's logits bit for bit."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from tests.integration.distributed.sessions import CTX, greedy
from tests.support.inproc_stages import InProcessStages
from tools.demo.files import DEMO

from ds4.adapters.compute.ray import ray_runner
from ds4.adapters.compute.ray.runner import ray_available
from ds4.adapters.compute.ray.stage import LayerStage, StageSpec
from ds4.adapters.gguf.model_files import load_model
from ds4.adapters.gguf.reader import GGUFFile
from ds4.adapters.gguf.shard_set import load_shard_set
from ds4.adapters.gguf.splitter import write_shard
from ds4.domain.distributed import parse_target
from ds4.domain.errors import Ds4Error
from ds4.domain.gguf.records import MetaValue
from ds4.domain.kvcache.kv_file import model_tag_for
from ds4.domain.model.shards import Shard
from ds4.ports.compute import ModelRunner

DS4 = [sys.executable, "-m", "ds4"]


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    out = tmp_path_factory.mktemp("split")
    run = subprocess.run(
        [*DS4, "gguf", "split", "--layers", "0-1,2-output", str(DEMO), str(out / "demo")],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    names = sorted(p.name for p in out.iterdir())
    assert names == ["demo-layers00-01.gguf", "demo-layers02-output.gguf"]  # no temp left
    return [str(out / n) for n in names]


def test_each_shard_holds_its_part_and_the_whole_model_metadata(shards: list[str]) -> None:
    whole = GGUFFile(str(DEMO))
    low, high = (GGUFFile(p) for p in shards)
    assert "token_embd.weight" in low.tensors and "token_embd.weight" not in high.tensors
    assert "output.weight" in high.tensors and "output.weight" not in low.tensors
    assert {n for n in low.tensors if n.startswith("blk.")} == {
        n for n in whole.tensors if n.startswith(("blk.0.", "blk.1."))
    }
    assert set(low.tensors) | set(high.tensors) == set(whole.tensors)
    for name in whole.tensors:  # byte for byte
        part = low if name in low.tensors else high
        assert np.array_equal(part.raw(name), whole.raw(name)), name
    for key, value in whole.metadata.items():
        assert low.metadata[key] == value and high.metadata[key] == value
    assert high.metadata["ds4.split.first_layer"].value == 2
    assert high.metadata["ds4.split.last_layer"].value == 3


def test_a_shard_is_not_a_model(shards: list[str]) -> None:
    run = subprocess.run(
        [*DS4, "cli", "-m", shards[0], "-p", "hi", "-n", "1"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert run.returncode != 0 and "Traceback" not in run.stderr
    assert "is a layer-shard file" in run.stderr and "--layer-files" in run.stderr


def test_a_shard_with_another_parts_tensor_is_invalid(shards: list[str], tmp_path: Path) -> None:
    class Mislabelled(Shard):
        def metadata(self) -> dict[str, MetaValue]:  # says 0-0, holds 0-1
            return Shard(range(0, 1), True, False, self.model_tag).metadata()

    whole, hp = load_model(str(DEMO))
    tag = model_tag_for(hp, whole.metadata, whole.tensors.values())
    bad = tmp_path / "bad.gguf"
    write_shard(whole, Mislabelled(range(0, 2), True, False, tag), bad, lambda _: None)
    with pytest.raises(Ds4Error, match=re.escape("blk.1.attn_q_a.weight: belongs to another part")):
        load_model(str(bad), shard_ok=True)
    with pytest.raises(Ds4Error, match="is a whole model, not a layer shard"):
        load_shard_set([str(DEMO)])


def test_a_worker_given_a_shard_without_its_layers_says_so(shards: list[str]) -> None:
    whole, hp = load_model(str(DEMO))
    tag = model_tag_for(hp, whole.metadata, whole.tensors.values())
    stage = LayerStage(StageSpec(shards[1], range(0, 2), "exact", "scalar", 1, tag))
    assert stage.error is not None
    assert "is the layer shard of layers 2-output, it lacks layers 0-1" in stage.error
    assert "\n" not in stage.error
    fine = LayerStage(StageSpec(shards[1], range(2, 4), "exact", "scalar", 1, tag))
    assert fine.error is None  # the shard's tag is the unsplit model's


def test_the_shards_compute_the_unsplit_model_bit_for_bit(
    shards: list[str], local_exact: ModelRunner, prompt: list[int]
) -> None:
    shard_set, hp = load_shard_set(shards)
    runner = ray_runner(
        shard_set, hp, target=parse_target("local:2"), numerics="exact", threads=1, piece=8,
        make_stages=InProcessStages,
    )  # fmt: skip
    stages = runner.pipeline.stages
    assert isinstance(stages, InProcessStages)
    assert [s.path for s in stages.specs] == [str(Path(p).resolve()) for p in shards]
    assert [s.layers for s in stages.specs] == [range(0, 2), range(2, 4)]
    one, many = local_exact.new_session(CTX), runner.new_session(CTX)
    assert np.array_equal(
        many.prefill(prompt, all_logits=True), one.prefill(prompt, all_logits=True)
    )
    want_tokens, want_logits = greedy(one, 8)
    got_tokens, got_logits = greedy(many, 8)
    assert got_tokens == want_tokens
    assert all(np.array_equal(a, b) for a, b in zip(got_logits, want_logits, strict=True))
    with pytest.raises(Ds4Error, match="differs from the --layer-files' ranges"):
        ray_runner(
            shard_set, hp, target=parse_target("local:2"), layer_split="0-0,1-3",
            make_stages=InProcessStages,
        )  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(
    not ray_available(), reason="Ray is not installed (pip install 'ds4[distributed]')"
)
def test_cli_over_the_shards_on_ray_workers_equals_the_unsplit_model(shards: list[str]) -> None:
    base = ["cli", "-p", "Quel ramo del lago di Como", "-n", "16", "--temp", "0", "--nothink",
            "--numerics", "exact", "-t", "2"]  # fmt: skip
    alone = subprocess.run([*DS4, *base, "-m", str(DEMO)], capture_output=True, text=True,
                           timeout=300, check=False)  # fmt: skip
    split = subprocess.run(
        [*DS4, *base, "--distributed", "local:2", "--layer-files", ",".join(shards)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert alone.returncode == 0, alone.stderr[-2000:]
    assert split.returncode == 0, split.stderr[-2000:]
    assert split.stdout == alone.stdout and alone.stdout.strip()


def test_bad_split_and_layer_files_flags_are_one_line_errors(shards: list[str]) -> None:
    bad = subprocess.run(
        [*DS4, "gguf", "split", "--layers", "0-1,3-output", str(DEMO), shards[0] + "-x"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert bad.returncode != 0 and "skips layer 2" in bad.stderr and "Traceback" not in bad.stderr
    assert not list(Path(shards[0]).parent.glob("*-x*"))
    both = subprocess.run(
        [*DS4, "cli", "-m", str(DEMO), "-p", "hi", "--distributed", "local:2",
         "--layer-files", ",".join(shards)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert both.returncode != 0 and "-m and --layer-files each name the model" in both.stderr
    alone = subprocess.run(
        [*DS4, "cli", "-p", "hi", "--layer-files", ",".join(shards)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert alone.returncode != 0 and "--layer-files need --distributed" in alone.stderr


class Bare(Shard):
    """A shard written without ds4.split.* keys, as the published PRO Q4 halves are."""

    def metadata(self) -> dict[str, MetaValue]:
        return {}


def test_halves_without_split_keys_are_told_by_their_tensors(
    tmp_path: Path, local_exact: ModelRunner, prompt: list[int]
) -> None:
    whole, _ = load_model(str(DEMO))
    paths = [str(tmp_path / "low.gguf"), str(tmp_path / "high.gguf")]
    for path, part in zip(
        paths, (Bare(range(0, 2), True, False, 0), Bare(range(2, 4), False, True, 0)), strict=True
    ):
        write_shard(whole, part, Path(path), lambda _: None)
    with pytest.raises(Ds4Error, match="is a layer-shard file"):
        load_model(paths[1])
    shard_set, shp = load_shard_set(paths)
    assert [s.layers for s in shard_set.shards] == [range(0, 2), range(2, 4)]
    runner = ray_runner(
        shard_set, shp, target=parse_target("local:2"), numerics="exact", threads=1, piece=8,
        make_stages=InProcessStages,
    )  # fmt: skip
    want = local_exact.new_session(CTX).prefill(prompt, all_logits=True)
    assert np.array_equal(runner.new_session(CTX).prefill(prompt, all_logits=True), want)
    wrong = LayerStage(StageSpec(paths[0], range(2, 4), "exact", "scalar", 1, shard_set.model_tag))
    assert wrong.error is not None and "layers 0-1, it lacks layers 2-3" in wrong.error
