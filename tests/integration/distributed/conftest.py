"""The demo model, its single-process cpu runner under exact numerics (what the split
model must equal bit for bit), and a prompt that fills several pipelined pieces."""

from __future__ import annotations

import numpy as np
import pytest
from tools.demo.files import DEMO

from ds4.adapters.compute.cpu import cpu_runner
from ds4.adapters.gguf.model_files import load_model
from ds4.adapters.gguf.reader import GGUFFile
from ds4.domain.model.hparams import DeepSeekV4HParams
from ds4.ports.compute import ModelRunner


@pytest.fixture(scope="session")
def demo() -> tuple[GGUFFile, DeepSeekV4HParams]:
    return load_model(str(DEMO))


@pytest.fixture(scope="session")
def local_exact(demo: tuple[GGUFFile, DeepSeekV4HParams]) -> ModelRunner:
    return cpu_runner(*demo, numerics="exact", threads=1)


@pytest.fixture(scope="session")
def prompt() -> list[int]:
    # ids with trained rows in the demo model, so the logits are far from uniform
    return [int(t) for t in np.random.default_rng(5).integers(100, 6000, 45)]
