"""A tiny q2 model (Q8_0, F16, F32, Q2_K, IQ2_XXS weights) and skips without Vulkan."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.integration.engine_cpu.conftest import make_tiny

from ds4.apps import backends


@pytest.fixture(scope="session")
def vulkan_ok() -> None:
    reason = backends.BACKENDS["vulkan"].unavailable()
    if reason is not None:
        pytest.skip(reason)


@pytest.fixture(scope="session")
def tiny_q2(tmp_path_factory: pytest.TempPathFactory, vulkan_ok: None) -> Path:
    return make_tiny(tmp_path_factory.mktemp("vk_q2") / "q2.gguf", "q2")


@pytest.fixture(scope="session")
def prompt() -> list[int]:
    return [0, 17, 4242, 99, 1000, 31337, 7, 128000]
