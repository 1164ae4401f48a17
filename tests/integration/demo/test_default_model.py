"""One model-choice rule for `ds4 cli`, `ds4 bench` and `ds4 server`
(apps/bootstrap.default_model_path): -m, $DS4_MODEL, ./ds4flash.gguf, the shipped demo."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from tools.demo.files import DEMO

from ds4.apps.bootstrap import default_model_path, is_shipped_demo
from ds4.domain.errors import Ds4Error

RULE = "$DS4_MODEL, else ./ds4flash.gguf, else models/demo.gguf"


@pytest.fixture
def elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DS4_MODEL", raising=False)
    return tmp_path


def test_falls_back_to_the_shipped_demo(elsewhere: Path) -> None:
    assert Path(default_model_path(None)) == DEMO
    assert is_shipped_demo(default_model_path(None))


def test_ds4flash_in_the_working_directory_comes_first(elsewhere: Path) -> None:
    (elsewhere / "ds4flash.gguf").write_bytes(b"")
    assert default_model_path(None) == "ds4flash.gguf"


def test_explicit_choices_win_and_must_exist(
    elsewhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DS4_MODEL", str(DEMO))
    assert default_model_path(None) == str(DEMO)
    monkeypatch.setenv("DS4_MODEL", str(DEMO) + "x")  # a typo: no silent fallback
    with pytest.raises(Ds4Error, match="DS4_MODEL"):
        default_model_path(None)
    with pytest.raises(Ds4Error, match="-m"):
        default_model_path("missing.gguf")
    monkeypatch.setenv("DS4_MODEL", "")
    assert Path(default_model_path(None)) == DEMO


@pytest.mark.parametrize("command", ["cli", "server", "bench"])
def test_help_states_the_rule(command: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "ds4", command, "--help"], capture_output=True, text=True
    )
    assert result.returncode == 0
    assert RULE in " ".join(result.stdout.split())


def test_no_model_at_all_says_how_to_pass_one(
    elsewhere: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ds4.apps import bootstrap

    # an installed package: no models/ directory beside it (docs/library.md#wheels)
    monkeypatch.setattr(bootstrap, "shipped_demo_model", lambda: elsewhere / "models" / "x.gguf")
    with pytest.raises(Ds4Error, match="pass -m FILE or set DS4_MODEL") as installed:
        default_model_path(None)
    assert "an installed ds4 has none" in str(installed.value)
    assert "models" not in str(installed.value)
    # a checkout whose demo file is missing: the path it looked at is named
    (elsewhere / "models").mkdir()
    with pytest.raises(Ds4Error, match=r"x\.gguf") as checkout:
        default_model_path(None)
    assert "installed" not in str(checkout.value)
