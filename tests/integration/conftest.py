"""Session-wide fixtures for integration tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.support.oracle_fixtures import make_oracle_fixtures


@pytest.fixture(scope="session")
def oracle_mixed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The `mixed` tiny HF model: hf/, official/ (F32/BF16) and reference_logits.npz."""
    return make_oracle_fixtures(tmp_path_factory.mktemp("oracle"), "mixed")
