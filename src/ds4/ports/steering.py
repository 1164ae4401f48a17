"""Steerable: directional steering and the activation capture it is built from
(docs/steering.md). The cpu and reference runners implement it."""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from ds4.domain.steering.directions import Steering

Component = Literal["attn_out", "ffn_out"]


@runtime_checkable
class Steerable(Protocol):
    def steer(self, steering: Steering | None) -> None:
        """Directional steering on every layer of every session from now on (None: off)."""
        ...

    def capture(self, component: Component | None) -> None:
        """From now on keep, per layer, the component's output (after steering) at the
        last position of each evaluation (None: stop). For single-session runs."""
        ...

    def captured(self) -> npt.NDArray[np.float32]:
        """(n_layer, n_embd): the captured rows of the latest evaluation."""
        ...
