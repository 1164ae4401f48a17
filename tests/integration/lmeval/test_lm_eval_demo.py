"""lm-evaluation-harness against `ds4 server` (docs/lm-eval.md): `lm_eval --model
local-completions` with the server's own tokenizer (`tokenizer_backend=remote`, the
/tokenize endpoints) runs the small multiple-choice task of evals/lm_eval/promessi_mc on
the demo model, offline, and every choice's log-likelihood it reports equals the one
`ds4 gguf score --text` gives the same text (the context as warmup, the choice scored).

lm_eval comes from requirements-lmeval.lock (`make build` installs it); without it the
test skips, saying so.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from tests.integration.server.live_server import LiveServer, live_server
from tools.demo.files import DEMO, REPO

TASK_DIR = REPO / "evals" / "lm_eval" / "promessi_mc"

# slow: lm_eval itself takes ~10 s, the 30 `ds4 gguf score` runs (one per choice) ~2 min
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        importlib.util.find_spec("lm_eval") is None,
        reason="lm_eval is not installed (requirements-lmeval.lock; `make build` installs it)",
    ),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(tmp_path_factory.mktemp("lm"), [], model=str(DEMO), backend="cpu") as srv:
        yield srv


def _offline_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        HF_DATASETS_OFFLINE="1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        HF_DATASETS_CACHE=str(Path(env.get("TMPDIR", "/tmp")) / "ds4-lmeval-datasets"),
        PYTHONPATH=os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")]),
    )
    return env


def _lm_eval(server: LiveServer, out: Path) -> list[dict[str, object]]:
    args = (
        f"base_url={server.base}/completions,tokenizer_backend=remote,"
        "model=deepseek-v4-flash,num_concurrent=1,max_retries=1"
    )
    done = subprocess.run(
        [sys.executable, "-m", "lm_eval", "--model", "local-completions", "--model_args", args,
         "--include_path", ".", "--tasks", "ds4_promessi_mc", "--output_path", str(out),
         "--log_samples"],
        cwd=TASK_DIR, env=_offline_env(), capture_output=True, text=True, timeout=900,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (samples,) = out.rglob("samples_ds4_promessi_mc_*.jsonl")
    return [json.loads(line) for line in samples.read_text().splitlines() if line.strip()]


def _gguf_score(text: str, warmup: int, tmp: Path) -> float:
    """-(sum of nll) of the tokens after `warmup`, from the `ds4 gguf score` command."""
    text_file, table = tmp / "text.txt", tmp / "score.tsv"
    text_file.write_text(text, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "ds4", "gguf", "score", "-m", str(DEMO), "--backend", "cpu",
         "--text", str(text_file), "--warmup", str(warmup), "-c", "512", "--quiet",
         "--out", str(table)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [line.split("\t") for line in table.read_text().splitlines()]
    nll = [float(r[4]) for r in rows if not r[0].startswith("#") and r[0] != "case"]
    return -math.fsum(nll)


def test_lm_eval_loglikelihoods_equal_gguf_score(server: LiveServer, tmp_path: Path) -> None:
    samples = _lm_eval(server, tmp_path / "out")
    assert len(samples) == 10
    for sample in samples:
        arguments = sample["arguments"]
        assert isinstance(arguments, dict)
        resps = sample["resps"]
        assert isinstance(resps, list)
        for pair, resp in zip(arguments.values(), resps, strict=True):
            context, continuation = pair["arg_0"], pair["arg_1"]
            # lm-eval's context length, as it splits context and continuation
            reply = httpx.post(server.url + "/tokenize", json={"prompt": context}, timeout=30)
            warmup = len(reply.json()["tokens"])
            expected = _gguf_score(context + continuation, warmup, tmp_path)
            assert float(resp[0][0]) == pytest.approx(expected, rel=1e-6, abs=1e-6)
