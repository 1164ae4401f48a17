"""The layer-range workers of the distributed backend run in this process: the same
LayerStage objects Ray would host, behind the pipeline's `Stages` protocol, with a
`kill(k)` that loses worker k as a crashed process would. The coordinator's logic
(prefix checks, replay, recovery, payload assembly) is tested here in seconds; the Ray
tests check the same contract across processes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ds4.adapters.compute.ray.pipeline import StageLostError
from ds4.adapters.compute.ray.stage import LayerStage, StageSpec
from ds4.domain.errors import Ds4Error


@dataclass
class Pending:
    value: Any = None
    error: BaseException | None = None


class InProcessStages:
    def __init__(self, specs: Sequence[StageSpec], nodes: Sequence[str | None]) -> None:
        self.specs = list(specs)
        self.stages = [self._start(spec) for spec in self.specs]
        self.dead: set[int] = set()
        # ("submit", worker, method) and ("get", worker, "") in the order they happened
        self.events: list[tuple[str, int, str]] = []
        self.replaced = 0

    @staticmethod
    def _start(spec: StageSpec) -> LayerStage:
        stage = LayerStage(spec)
        if stage.error is not None:
            raise Ds4Error(stage.error)
        return stage

    @property
    def ranges(self) -> Sequence[range]:
        return [s.layers for s in self.specs]

    def kill(self, k: int) -> None:
        """Worker k dies: its state is gone and every call to it fails."""
        self.dead.add(k)

    def submit(self, k: int, method: str, *args: Any, num_returns: int = 1) -> Any:
        self.events.append(("submit", k, method))
        inputs = []
        failed: BaseException | None = None
        for arg in args:
            if isinstance(arg, Pending):
                if arg.error is not None:
                    failed = arg.error
                inputs.append(arg.value)
            else:
                inputs.append(arg)
        if k in self.dead:
            failed = StageLostError(k, "the worker process died")
        if failed is None:
            try:
                result = getattr(self.stages[k], method)(*inputs)
            except Exception as exc:
                failed = exc
        if failed is not None:
            return (
                tuple(Pending(None, failed) for _ in range(num_returns))
                if num_returns > 1
                else (Pending(None, failed))
            )
        if num_returns > 1:
            return tuple(Pending(v) for v in result)
        return Pending(result)

    def get(self, k: int, pending: Any) -> Any:
        assert isinstance(pending, Pending)
        self.events.append(("get", k, ""))
        if pending.error is not None:
            raise pending.error
        return pending.value

    def describe(self, k: int) -> str:
        return f"layers {self.specs[k].layers} in-process"

    def replace(self, k: int) -> None:
        self.stages[k] = self._start(self.specs[k])
        self.dead.discard(k)
        self.replaced += 1
