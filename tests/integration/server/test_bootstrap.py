"""The composition root on a real tiny GGUF: the model file is opened (and parsed) once,
and tokenizer, runner and KV model tag all come from that one opening."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import pytest

from ds4.adapters.gguf.reader import GGUFFile
from ds4.apps import backends, wiring
from ds4.apps.bootstrap import load_engine
from ds4.apps.gguf_tiny import run_tiny
from ds4.apps.options import EngineOptions, ServerOptions
from ds4.apps.server_bootstrap import bootstrap_server
from ds4.domain.kvcache.kv_file import model_tag_for


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("bootstrap") / "tiny.gguf"
    args = argparse.Namespace(out=str(out), seed=3, preset="tiny-2layer", quant="q2",
                              q4_last_layers=None, tokenizer=None, quiet=True)  # fmt: skip
    run_tiny(args)
    return out


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every GGUFFile constructed from now on (whoever opens it), by path."""
    paths: list[str] = []
    real_init = GGUFFile.__init__

    def counting_init(self: GGUFFile, path: str | os.PathLike[str], **kwargs: Any) -> None:
        paths.append(str(path))
        real_init(self, path, **kwargs)

    monkeypatch.setattr(GGUFFile, "__init__", counting_init)
    return paths


def test_the_server_opens_its_model_file_once(
    tiny_model: Path, tmp_path: Path, opened: list[str]
) -> None:
    options = ServerOptions(
        model=str(tiny_model),
        backend=backends.default_backend(),
        ctx=256,
        kv_disk_dir=str(tmp_path / "kv"),  # the KV model tag is needed too
    )
    built = bootstrap_server(options)
    assert opened == [str(tiny_model)]
    (worker,) = built.workers
    assert worker.kv is not None
    model = wiring.open_model(str(tiny_model))  # a second, independent opening to compare
    file = model.file
    assert worker.kv.disk.model_tag == model_tag_for(
        model.hparams, file.metadata, file.tensors.values()
    )
    assert built.state.tokenizer.encode("Hello") == wiring.tokenizer_from_model(file).encode(
        "Hello"
    )


def test_the_cli_engine_opens_its_model_file_once(tiny_model: Path, opened: list[str]) -> None:
    engine = load_engine(EngineOptions(str(tiny_model), backend=backends.default_backend()))
    assert opened == [str(tiny_model)]
    assert engine.model is not None and engine.runner.hparams == engine.model.hparams
    session = engine.runner.new_session(32)
    logits = session.prefill(engine.tokenizer.encode("Hello"))
    assert logits.shape == (engine.tokenizer.vocab_size,)
