"""The memory this process can really have, and the plan of what a model load will use
(docs/ssd-streaming.md#the-memory-plan).

Two halves, both pure: parsers that turn the texts of /proc/meminfo, /proc/self/cgroup,
/proc/self/mountinfo, a cgroup's limit and usage files and /proc/self/status into
numbers (adapters/system.py reads the files), and `memory_plan`, the arithmetic of
weights + KV + scratch (+ the expert repack's peak) against the smallest of the limits.
Every number read is range-checked: a missing or garbled value means "no limit from
that source", never an error, so an odd container can only make the plan less strict.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from ds4.domain.engine.dsv4_payload import comp_capacity, layer_compressors, raw_window
from ds4.domain.model.hparams import DeepSeekV4HParams

GIB = 1 << 30
MAX_BYTES = 1 << 60  # an exbibyte: a larger value read from a file is garbage
# cgroup v1 writes "no limit" as LONG_MAX rounded down to a page; anything this large is
# no limit, on any page size.
V1_UNLIMITED = 1 << 62

# ---- parsing the kernel's files ---------------------------------------------------


def _bytes(text: str) -> int | None:
    """A whole number of bytes in 0..MAX_BYTES, else None."""
    t = text.strip()
    if not t.isdigit():
        return None
    n = int(t)
    return n if n <= MAX_BYTES else None


def _kib_field(text: str, key: str) -> int | None:
    """The `key:   N kB` line of a /proc file (meminfo, status) in bytes."""
    for line in text.splitlines():
        if line.startswith(key + ":"):
            parts = line[len(key) + 1 :].split()
            if len(parts) != 2 or parts[1] != "kB" or not parts[0].isdigit():
                return None
            n = int(parts[0]) * 1024
            return n if n <= MAX_BYTES else None
    return None


def parse_mem_available(meminfo: str) -> int | None:
    """MemAvailable of /proc/meminfo, in bytes."""
    return _kib_field(meminfo, "MemAvailable")


def parse_vm_size(status: str) -> int | None:
    """VmSize of /proc/self/status (the address space in use), in bytes."""
    return _kib_field(status, "VmSize")


def cgroup_v2_path(cgroup: str) -> str | None:
    """The process's cgroup v2 path: the `0::/path` line of /proc/self/cgroup."""
    for line in cgroup.splitlines():
        if line.startswith("0::"):
            path = line[3:].strip()
            return path if path.startswith("/") and ".." not in path.split("/") else None
    return None


def cgroup_v1_memory_path(cgroup: str) -> str | None:
    """The path of the v1 hierarchy holding the memory controller (`N:memory:/path`,
    possibly with other controllers on the same hierarchy: `N:cpu,memory:/path`)."""
    for line in cgroup.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and "memory" in parts[1].split(","):
            path = parts[2].strip()
            return path if path.startswith("/") and ".." not in path.split("/") else None
    return None


def cgroup_v1_memory_mount(mountinfo: str) -> tuple[str, str] | None:
    """(mount point, root inside the hierarchy) of the v1 memory controller's mount in
    /proc/self/mountinfo (a container usually mounts its own cgroup as the root)."""
    for line in mountinfo.splitlines():
        head, sep, tail = line.partition(" - ")
        fields, rest = head.split(), tail.split()
        if not sep or len(fields) < 5 or len(rest) < 3:
            continue
        if rest[0] == "cgroup" and "memory" in rest[2].split(","):
            return fields[4], fields[3]
    return None


def cgroup_v1_dir(mount: tuple[str, str], path: str) -> str:
    """The directory of cgroup `path` under the v1 mount (point, root)."""
    point, root = mount
    if root != "/" and (path == root or path.startswith(root + "/")):
        path = path[len(root) :]
    return point.rstrip("/") + "/" + path.strip("/") if path.strip("/") else point


def cgroup_room(limit: str, usage: str) -> int | None:
    """Bytes left under a cgroup limit (v2 memory.max / memory.current, v1
    memory.limit_in_bytes / memory.usage_in_bytes); None: no limit, or unreadable."""
    if limit.strip() == "max":
        return None
    cap, used = _bytes(limit), _bytes(usage)
    if cap is None or cap >= V1_UNLIMITED:
        return None
    return max(0, cap - (used or 0))


def address_space_room(soft_limit: int, vm_size: int | None) -> int | None:
    """Bytes left under RLIMIT_AS (a negative or huge soft limit is RLIM_INFINITY)."""
    if soft_limit < 0 or soft_limit > MAX_BYTES:
        return None
    return max(0, soft_limit - (vm_size or 0))


@dataclass(frozen=True)
class MemoryLimits:
    """What each source allows (None: that source sets no limit or could not be read)."""

    available: int | None = None  # MemAvailable
    cgroup: int | None = None  # limit - usage of the process's memory cgroup
    address_space: int | None = None  # RLIMIT_AS - VmSize
    physical: int = 0  # the machine's memory: the answer when nothing else is known

    def room(self) -> tuple[int, str]:
        """The smallest of the limits and which source it came from."""
        found = [
            (n, name)
            for n, name in (
                (self.cgroup, "cgroup limit"),
                (self.address_space, "RLIMIT_AS"),
                (self.available, "MemAvailable"),
            )
            if n is not None
        ]
        return min(found, key=lambda f: f[0]) if found else (self.physical, "physical memory")


# ---- the plan -----------------------------------------------------------------------

# Kernel scratch, logits, compressor frontiers, the Python heap: measured well under
# this on the demo model and the Flash-shaped file; a stated allowance, not a bound.
SCRATCH_BYTES = GIB // 2
EXPERT_PARTS = ("ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight")


def kv_bytes(hp: DeepSeekV4HParams, ctx: int) -> int:
    """One session's KV state at `ctx` tokens in f32, as the session payload holds it
    (dsv4_payload.py): per layer the raw sliding window, the compressed attention rows
    and the indexer's rows."""
    total = 0
    for il in range(hp.n_layer):
        total += raw_window(hp, ctx) * hp.head_dim
        attn, index = layer_compressors(hp, il)
        if attn:
            total += min(comp_capacity(ctx), ctx // attn + 2) * hp.head_dim
        if index:
            total += (ctx // index + 2) * hp.indexer_head_dim
    return total * 4


def routed_expert_bytes(tensors: Mapping[str, int], n_layer: int) -> int:
    """Bytes of every routed expert tensor (the part --ssd-streaming serves from disk)."""
    return sum(tensors.get(f"blk.{il}.{p}", 0) for il in range(n_layer) for p in EXPERT_PARTS)


def expert_slot_bytes(tensors: Mapping[str, int], n_layer: int, n_expert: int) -> int:
    """One expert cache slot: the largest layer's three expert slices, each 64-aligned
    (PART_ALIGN of native/cpu/expert_cache.c)."""
    if n_expert <= 0:
        return 0
    return max(
        (
            sum(-(-(tensors.get(f"blk.{il}.{p}", 0) // n_expert) // 64) * 64 for p in EXPERT_PARTS)
            for il in range(n_layer)
        ),
        default=0,
    )


@dataclass(frozen=True)
class PlanInputs:
    weights: int  # bytes of every mapped tensor
    routed: int  # of which routed experts
    expert_budget: int | None  # --ssd-streaming: the expert cache's bytes (None: no streaming)
    kv_per_session: int
    ctx: int  # 0: not chosen at load (the command sizes it later): no KV counted
    sessions: int
    repack: int  # the expert repack's anonymous bytes (0: it does not apply)
    repack_largest: int  # its largest tensor: the load's peak is one copy over the mapping
    room: int
    room_source: str
    scratch: int = SCRATCH_BYTES


@dataclass(frozen=True)
class StreamingChoice:
    """What `--ssd-streaming auto` chose: stream (with an expert cache of `budget` bytes)
    or plain mmap, and the line saying which and why."""

    stream: bool
    budget: int  # the expert cache's bytes (0 with plain mmap)
    line: str


@dataclass(frozen=True)
class MemoryPlan:
    line: str  # what will happen, said at start
    refusal: str | None  # the model does not fit: why, and the --ssd-streaming that would
    skip_repack: str | None  # only the repack does not fit: the line saying it is skipped
    streaming: StreamingChoice | None = None  # with --ssd-streaming auto: its choice


def _gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


def _size(n: int) -> str:
    return _gib(n) if n >= GIB else f"{n / (1 << 20):.2f} MiB"


def memory_plan(p: PlanInputs) -> MemoryPlan:
    """Weights resident (without streaming every mapped byte, with it the non-routed
    part plus the expert budget) + KV (ctx x sessions) + scratch against the room."""
    streaming = p.expert_budget is not None
    weights = (p.weights - p.routed + (p.expert_budget or 0)) if streaming else p.weights
    kv = p.kv_per_session * p.sessions
    total = weights + kv + p.scratch
    line = (
        f"memory plan: weights {_gib(weights)}"
        + (" (non-routed + expert cache)" if streaming else "")
        + f" + KV {_gib(kv)} "
        + (
            f"(ctx {p.ctx} x {p.sessions} session{'s' if p.sessions != 1 else ''})"
            if p.ctx
            else "(ctx chosen later, not counted)"
        )
        + f" + scratch {_gib(p.scratch)} = {_gib(total)} of {_gib(p.room)} available "
        f"({p.room_source})"
    )
    if total > p.room:
        return MemoryPlan(line, _refusal(p, weights, kv, total), None)
    skip = None
    if p.repack and total + p.repack_largest > p.room:
        skip = (
            f"repack-experts: skipped: {_gib(p.repack)} of anonymous memory would not fit "
            f"(the load peaks at {_gib(total + p.repack_largest)} of {_gib(p.room)}); "
            "the experts stay mapped"
        )
    elif p.repack:
        line += f"; the expert repack turns {_gib(p.repack)} of it into anonymous memory"
    return MemoryPlan(line, None, skip)


def _refusal(p: PlanInputs, weights: int, kv: int, total: int) -> str:
    short = f"needs {_gib(total)} but {_gib(p.room)} is available ({p.room_source})"
    budget = p.room - (p.weights - p.routed) - kv - p.scratch
    if p.expert_budget is not None:
        advice = (
            f"a smaller --ssd-streaming-cache-experts {budget / GIB:.2f}GB would fit"
            if budget > 0
            else "even the non-routed weights and the KV do not fit: lower --ctx or --sessions"
        )
    elif p.routed and budget >= GIB // 100:
        advice = (
            f"--ssd-streaming --ssd-streaming-cache-experts {budget // (GIB // 100) / 100:.2f}GB "
            "would fit (routed experts read from disk; --ssd-streaming auto chooses that "
            "by itself)"
        )
    else:
        advice = "--ssd-streaming would not fit either: lower --ctx or --sessions"
    return f"the model does not fit in memory: {short}; {advice}"


def choose_streaming(plain: PlanInputs, slot: int, total_experts: int) -> StreamingChoice | None:
    """`--ssd-streaming auto` over the plain-mmap inputs: plain mmap when the model fits
    the room; else streaming, the expert cache getting what the room leaves after the
    non-routed weights, KV and scratch (whole slots of `slot` bytes, at most every
    expert); None when not even one slot is left (the plain plan's refusal stands)."""
    kv = plain.kv_per_session * plain.sessions
    total = plain.weights + kv + plain.scratch
    where = f"{_gib(plain.room)} available ({plain.room_source})"
    if total <= plain.room:
        return StreamingChoice(
            False,
            0,
            f"ssd-streaming auto: off, plain mmap: the model needs {_gib(total)} of {where}",
        )
    left = plain.room - (plain.weights - plain.routed) - kv - plain.scratch
    if plain.routed <= 0 or slot <= 0 or total_experts <= 0 or left < slot:
        return None
    budget = min(left // slot, total_experts) * slot
    return StreamingChoice(
        True,
        budget,
        f"ssd-streaming auto: on: the model needs {_gib(total)} but {where}; the routed "
        f"experts are read from disk into a {_size(budget)} expert cache",
    )
