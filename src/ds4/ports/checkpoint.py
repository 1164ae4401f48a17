"""Checkpoint: the tensors of a source checkpoint directory (config + safetensors)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt


@dataclass(frozen=True)
class CheckpointTensor:
    name: str
    dtype: str  # safetensors dtype name: F32, BF16, F16, F8_E4M3, F8_E8M0, I8, I32, I64, ...
    shape: tuple[int, ...]


class Checkpoint(Protocol):
    @property
    def config(self) -> Mapping[str, Any]:
        """The parsed config.json."""
        ...

    @property
    def tensors(self) -> Mapping[str, CheckpointTensor]: ...

    def raw(self, name: str) -> npt.NDArray[np.generic]:
        """The tensor as a read-only numpy view (no copy) in its stored dtype.

        BF16 comes back as uint16 bits, FP8 codes as uint8.
        """
        ...

    def close(self) -> None: ...
