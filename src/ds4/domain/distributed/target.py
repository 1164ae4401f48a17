"""Where the layers run: `--distributed ray://ADDRESS` (an existing Ray cluster) or
`--distributed local:N` (a Ray cluster of N worker processes started on this machine)."""

from __future__ import annotations

from dataclasses import dataclass

from ds4.domain.errors import Ds4Error

MAX_LOCAL_WORKERS = 64


@dataclass(frozen=True)
class DistributedTarget:
    address: str | None  # "ray://host:port" of a running cluster; None: start one here
    local_workers: int = 0  # local:N -> N worker processes (0 with an address)

    def __str__(self) -> str:
        return self.address if self.address is not None else f"local:{self.local_workers}"


def parse_target(text: str) -> DistributedTarget:
    if text.startswith("ray://"):
        rest = text[len("ray://") :]
        host, _, port = rest.rpartition(":")
        if not host or not port.isdigit() or not 1 <= int(port) <= 65535:
            raise Ds4Error(
                f"{text!r}: expected ray://HOST:PORT (the Ray client port of the head node, "
                "10001 unless `ray start --ray-client-server-port` says otherwise)"
            )
        return DistributedTarget(address=text)
    if text.startswith("local:"):
        count = text[len("local:") :]
        if not count.isdigit() or not 1 <= int(count) <= MAX_LOCAL_WORKERS:
            raise Ds4Error(f"{text!r}: expected local:N with N in 1..{MAX_LOCAL_WORKERS} workers")
        return DistributedTarget(address=None, local_workers=int(count))
    raise Ds4Error(f"{text!r}: expected ray://HOST:PORT or local:N")


@dataclass(frozen=True)
class DistributedOptions:
    """What `--distributed` and its companion flags ask for (docs/distributed.md)."""

    target: DistributedTarget
    layer_split: str = "auto"  # `auto` or `A-B,C-D,...` (layer_split.parse_layer_split)
    piece: int = 256  # tokens per pipelined prefill piece
    transport: str = "refs"  # how hidden states move between ranges: refs | values
