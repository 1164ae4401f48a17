"""The named shapes `--preset` accepts (docs/model-presets.md).

`flash` is ds4's Flash constants (domain/model/presets.py). `pro` is DeepSeek V4 PRO as
its release's config.json describes it: the file ships as package data
(ds4/presets/deepseek-v4-pro.config.json) and is read by the converter's config reader,
so nothing about PRO is typed into the code.
"""

from __future__ import annotations

import json
from importlib import resources

from ds4.domain.convert.hf_config import hparams_from_config
from ds4.domain.errors import Ds4Error
from ds4.domain.model.hparams import DeepSeekV4HParams, check_architecture
from ds4.domain.model.presets import FLASH

RELEASE_CONFIGS = {"pro": "deepseek-v4-pro.config.json"}
PRESET_NAMES = ("flash", "pro")


def release_config(name: str) -> dict[str, object]:
    """The shipped config.json of a named release (a Ds4Error if it is damaged)."""
    try:
        text = (
            resources.files("ds4")
            .joinpath("presets", RELEASE_CONFIGS[name])
            .read_text(encoding="utf-8")
        )
        config = json.loads(text)
    except (OSError, json.JSONDecodeError) as exc:
        raise Ds4Error(f"preset {name}: the shipped config.json is unreadable: {exc}") from None
    if not isinstance(config, dict):
        raise Ds4Error(f"preset {name}: the shipped config.json is not a JSON object")
    return config


def preset_shape(name: str) -> DeepSeekV4HParams:
    """Hyperparameters of a named preset; KeyError for an unknown name."""
    if name == "flash":
        return FLASH
    hp = hparams_from_config(release_config(name))
    problems = check_architecture(hp)
    if problems:
        raise Ds4Error(f"preset {name}: " + "; ".join(str(p) for p in problems))
    return hp
