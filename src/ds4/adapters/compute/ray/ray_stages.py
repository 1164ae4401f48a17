"""The layer-range workers as Ray actors (the `Stages` of pipeline.py).

One actor per range runs a LayerStage; it is pinned to its node when the cluster has
several (node affinity, not soft: a range never moves silently to a machine that
lacks the model file). Ray's own restarts are off: a dead worker is reported to the
pipeline, which fails the request and, on the next operation, asks for a new actor
here. Results pass between actors as object refs, so a range's output goes to the
next range without a stop at the coordinator when Ray keeps it in its object store.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Sequence
from typing import Any

from ds4.adapters.compute.ray.pipeline import StageLostError
from ds4.adapters.compute.ray.stage import LayerStage, StageRefusedError, StageSpec
from ds4.domain.distributed import range_text
from ds4.domain.errors import Ds4Error


@functools.cache
def _remote_stage() -> Any:
    """ray.remote(LayerStage), made once."""
    import ray

    return ray.remote(LayerStage)


class RayStages:
    def __init__(
        self,
        specs: Sequence[StageSpec],
        nodes: Sequence[str | None],
        *,
        start_timeout: float = 300.0,
        call_timeout: float | None = 900.0,
    ) -> None:
        """specs[k] is range k's worker, started on nodes[k] (None: wherever Ray likes).
        Every worker is started before any is waited for; Ds4Error names the first
        that cannot open its range."""
        import ray

        self._ray = ray
        self._specs = list(specs)
        self._nodes = list(nodes)
        self._start_timeout = start_timeout
        self._call_timeout = call_timeout
        self.info: list[dict[str, Any]] = [{} for _ in self._specs]
        self._actors: list[Any] = [self._launch(k) for k in range(len(self._specs))]
        try:
            for k in range(len(self._specs)):
                self._wait_ready(k)
        except BaseException:
            self.close()
            raise

    @property
    def ranges(self) -> Sequence[range]:
        return [s.layers for s in self._specs]

    def actor(self, k: int) -> Any:
        """Range k's actor handle (the tests kill it to inject a failure)."""
        return self._actors[k]

    # ---- starting ----------------------------------------------------------

    def _launch(self, k: int) -> Any:
        options: dict[str, Any] = {"num_cpus": 0, "max_restarts": 0, "max_concurrency": 1}
        node = self._nodes[k]
        if node is not None:
            from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(node, soft=False)
        return _remote_stage().options(**options).remote(self._specs[k])

    def _wait_ready(self, k: int) -> None:
        where = f"layers {range_text(self._specs[k].layers)}"
        try:
            info = self._ray.get(self._actors[k].info.remote(), timeout=self._start_timeout)
        except self._ray.exceptions.GetTimeoutError:
            raise Ds4Error(
                f"the worker for {where} did not start within {self._start_timeout:.0f} s "
                "(`ray status` shows what the cluster is waiting for)"
            ) from None
        except self._ray.exceptions.RayError as exc:
            raise Ds4Error(f"the worker for {where} could not start: {_first_line(exc)}") from None
        if info.get("error"):
            raise Ds4Error(str(info["error"]))
        self.info[k] = info

    def replace(self, k: int) -> None:
        """A new worker for range k: on its node while that node lives, else wherever
        Ray can place it (every node has the model at the same path)."""
        self._kill(k)
        node = self._nodes[k]
        if node is not None and not self._node_alive(node):
            self._nodes[k] = None
        self._actors[k] = self._launch(k)
        self._wait_ready(k)

    def _node_alive(self, node: str) -> bool:
        try:
            nodes = self._ray.nodes()  # type: ignore[no-untyped-call]
        except Exception:  # the cluster cannot say: try the node we had
            return True
        return any(n.get("NodeID") == node and n.get("Alive") for n in nodes)

    def close(self) -> None:
        for k in range(len(self._actors)):
            self._kill(k)

    def _kill(self, k: int) -> None:
        # already gone, or the cluster is: nothing left to stop
        with contextlib.suppress(Exception):
            self._ray.kill(self._actors[k], no_restart=True)

    # ---- calls -------------------------------------------------------------

    def submit(self, k: int, method: str, *args: Any, num_returns: int = 1) -> Any:
        call = getattr(self._actors[k], method)
        if num_returns != 1:
            call = call.options(num_returns=num_returns)
        return call.remote(*args)

    def get(self, k: int, pending: Any) -> Any:
        ray = self._ray
        try:
            return ray.get(pending, timeout=self._call_timeout)
        except StageRefusedError as refused:  # Ray re-raises it as a subclass of the original
            raise StageRefusedError(str(refused.args[0]) if refused.args else "refused") from None
        except ray.exceptions.RayTaskError as exc:
            cause = exc.cause
            if isinstance(cause, ray.exceptions.RayActorError):
                raise StageLostError(k, "an input came from a lost worker") from None
            if isinstance(cause, Ds4Error):
                raise Ds4Error(f"layers {range_text(self._specs[k].layers)}: {cause}") from None
            raise Ds4Error(
                f"the worker for layers {range_text(self._specs[k].layers)} failed: "
                f"{type(cause).__name__}: {cause}"
            ) from None
        except ray.exceptions.GetTimeoutError:
            raise StageLostError(k, f"no answer within {self._call_timeout:.0f} s") from None
        except ray.exceptions.RayError as exc:  # actor died, object lost, node gone
            raise StageLostError(k, _first_line(exc)) from None

    def describe(self, k: int) -> str:
        info = self.info[k]
        size = int(info.get("weight_bytes") or 0)
        weights = f"{size / 2**30:.1f} GiB" if size >= 2**30 else f"{size / 2**20:.1f} MiB"
        return (
            f"layers {range_text(self._specs[k].layers)}: pid {info.get('pid')} on "
            f"{info.get('host')}, {weights} of weights"
        )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
