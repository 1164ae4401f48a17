"""Joining or starting the Ray cluster the layer ranges run on, and where ranges go.

`local:N` starts a Ray instance in this process's session with N logical worker slots
and a small object store (only in-flight hidden states live there); `ray://HOST:PORT`
connects to a running cluster through Ray Client. A process that already called
ray.init (the tests, a notebook) keeps its cluster.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from ds4.domain.distributed import DistributedTarget
from ds4.domain.errors import Ds4Error

_MIN_OBJECT_STORE = 100 << 20  # Ray's floor is 75 MiB


@dataclass(frozen=True)
class Slot:
    node: str | None  # Ray node id to pin a range to (None: anywhere)
    memory: float  # bytes it offers (relative weights with local:N)
    label: str


def ray_available() -> bool:
    try:
        import ray  # noqa: F401
    except ImportError:
        return False
    return True


def connect(target: DistributedTarget, *, object_store_bytes: int) -> None:
    """ray.init for the target, unless this process is already connected."""
    if target.address is not None:
        _client_token_auth()  # before Ray is imported: it reads the mode once
    if not ray_available():
        raise Ds4Error(
            "--distributed needs Ray: pip install 'ds4[distributed]' (or ray) on the "
            "coordinator and every worker machine"
        )
    import ray

    # A pass that fails leaves the later pieces' results unread: the pipeline has
    # handled the failure, so Ray need not print each as an unhandled error.
    os.environ.setdefault("RAY_IGNORE_UNHANDLED_ERRORS", "1")
    if ray.is_initialized():
        return
    if target.address is not None:
        try:
            ray.init(address=target.address, logging_level=logging.WARNING, log_to_driver=False)
        except Exception as exc:  # Ray raises ConnectionError, RuntimeError, ...
            raise Ds4Error(
                f"cannot join the Ray cluster at {target.address}: {exc} (a cluster with token "
                "authentication needs its token here: RAY_AUTH_TOKEN or ~/.ray/auth_token)"
            ) from None
        return
    _export_source_dir()
    ray.init(
        num_cpus=target.local_workers,
        object_store_memory=max(_MIN_OBJECT_STORE, object_store_bytes),
        include_dashboard=False,
        logging_level=logging.WARNING,
        log_to_driver=False,
    )


def _client_token_auth() -> None:
    """Ray Client sends the cluster's token only in token mode, which a plain ray.init
    turns on by itself when a token exists; do the same for ray:// (a cluster without
    authentication ignores the token)."""
    has_token = "RAY_AUTH_TOKEN" in os.environ or (Path.home() / ".ray" / "auth_token").exists()
    if has_token and "RAY_AUTH_MODE" not in os.environ:
        os.environ["RAY_AUTH_MODE"] = "token"


def _export_source_dir() -> None:
    """Local workers are new Python processes: let them import this very ds4 (a source
    checkout run with PYTHONPATH=src included) before the cluster starts them."""
    import ds4

    source = str(Path(ds4.__file__).resolve().parents[1])
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if source not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([source, *paths])


def slots(target: DistributedTarget) -> list[Slot]:
    """Where ranges can go: N equal local slots, or each alive node of the cluster with
    the memory Ray lets tasks use there."""
    if target.address is None:
        return [Slot(None, 1.0, f"local worker {k}") for k in range(target.local_workers)]
    import ray

    found = []
    for node in ray.nodes():  # type: ignore[no-untyped-call]
        if node.get("Alive"):
            memory = float(node.get("Resources", {}).get("memory", 0.0))
            found.append(Slot(str(node["NodeID"]), memory, str(node.get("NodeManagerAddress"))))
    if not found:
        raise Ds4Error(f"the Ray cluster at {target.address} has no live node")
    return sorted(found, key=lambda s: s.label)
