"""Pure rules of what crosses a range boundary of a layer-split model
(docs/distributed.md §"What crosses the network per token"): the hidden-state encodings
of `--dist-activation-bits`, the bytes they take, and the per-hop telemetry records of
`--dist-trace` with their one-line text form.

Only the transport changes with the bits: a worker decodes its input to float32, runs
its layers in float32, and encodes its output for the next hop. 32 bits sends the
float32 rows as they are (bit-identical to one process); 16 sends each value as
bfloat16 (the top 16 bits of the float32, rounded to nearest, ties to even); 8 sends
each row of n_embd values (one hyper-connection stream of one token) as int8 times one
float32 scale, the row's largest magnitude over 127, rounded to nearest (ties to even).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.domain.errors import Ds4Error

F32 = npt.NDArray[np.float32]

ACTIVATION_BITS = (32, 16, 8)
DEFAULT_ACTIVATION_BITS = 32
_INT8_MAX = 127


def check_bits(bits: int) -> int:
    if bits not in ACTIVATION_BITS:
        raise Ds4Error(f"activation bits {bits}: use 32, 16 or 8")
    return bits


def bytes_per_token(n_hc: int, n_embd: int, bits: int) -> int:
    """Hidden-state bytes one token takes across one boundary: n_hc * n_embd * 4 at 32
    bits, * 2 at 16, and n_hc * (n_embd + 4) at 8 (one int8 per value and one float32
    scale per stream)."""
    check_bits(bits)
    if bits == 8:
        return n_hc * (n_embd + 4)
    return n_hc * n_embd * bits // 8


@dataclass(frozen=True)
class PackedRows:
    """Hidden streams (tokens, n_hc, n_embd) as they travel: `data` float32 (32 bits),
    uint16 bfloat16 patterns (16), or int8 with one float32 scale per row in `scales`
    (8)."""

    bits: int
    data: npt.NDArray[np.generic]
    scales: F32 | None = None

    @property
    def nbytes(self) -> int:
        return int(self.data.nbytes) + (0 if self.scales is None else int(self.scales.nbytes))

    @property
    def rows(self) -> int:
        """Tokens carried."""
        return int(self.data.shape[0])


def encode(streams: F32, bits: int) -> PackedRows:
    """streams (..., n_embd) float32 in the encoding of `bits`; finite values only at 8
    bits (a row's scale comes from its largest magnitude)."""
    check_bits(bits)
    x = np.asarray(streams, dtype=np.float32)
    if bits == 32:
        return PackedRows(32, x)
    if bits == 16:
        u = np.ascontiguousarray(x).view(np.uint32)
        # round to nearest even on the 16 bits dropped; NaN stays a quiet NaN
        rounded = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
        top = np.where(np.isnan(x), np.uint32(0x7FC0), rounded).astype(np.uint16)
        return PackedRows(16, top)
    amax = np.max(np.abs(x), axis=-1) if x.shape[-1] else np.zeros(x.shape[:-1], np.float32)
    scales = (amax / np.float32(_INT8_MAX)).astype(np.float32)
    safe = np.where(scales > 0, scales, np.float32(1))
    q = np.clip(np.rint(x / safe[..., None]), -_INT8_MAX, _INT8_MAX).astype(np.int8)
    return PackedRows(8, q, scales)


def decode(packed: PackedRows) -> F32:
    """The float32 streams a packed payload stands for (a new array)."""
    if packed.bits == 32:
        return np.array(packed.data, dtype=np.float32, order="C")
    if packed.bits == 16:
        wide = np.asarray(packed.data, dtype=np.uint16).astype(np.uint32) << np.uint32(16)
        return np.ascontiguousarray(wide.view(np.float32))
    if packed.bits == 8 and packed.scales is not None:
        q = np.asarray(packed.data, dtype=np.int8).astype(np.float32)
        return np.ascontiguousarray(q * packed.scales[..., None])
    raise Ds4Error(f"packed hidden states of {packed.bits} bits cannot be decoded")


# --- telemetry ---
# One record per hop of a pass through the chain: coordinator -> range 0 -> ... ->
# range R-1 (-> coordinator when the output is wanted). Times in seconds; the worker
# measures eval, the rest comes from wall-clock timestamps of the workers and the
# coordinator (exact on one machine, as good as the clocks' agreement across machines;
# clamped at 0).


@dataclass(frozen=True)
class HopRecord:
    pass_id: int  # the pipeline's pass counter
    op: str  # prefill | decode | batch | replay
    piece: int  # the piece's index within its operation (0 for decode and batch)
    pos: int  # first position of the pass (of its first session)
    tokens: int  # rows in the pass
    hop: int  # 0..R-1: into range hop; R: back to the coordinator
    to: str  # "layers A-B" or "coordinator"
    eval_s: float  # the range's forward (decode, layers, encode); 0 for the coordinator
    wait_s: float  # from this hop's end to the pass being done at the coordinator
    transfer_s: float  # from its input being ready (and the worker free) to its start
    bytes_in: int  # hidden-state payload bytes received on this hop
    bytes_out: int  # payload bytes sent on (0 for the coordinator)


_FIELDS = ("pass", "op", "piece", "pos", "tokens", "hop", "to", "eval_ms", "wait_ms",
           "transfer_ms", "bytes_in", "bytes_out")  # fmt: skip
TRACE_PREFIX = "ds4 dist-trace:"


def trace_line(r: HopRecord) -> str:
    """`ds4 dist-trace: pass=3 op=decode piece=0 pos=45 tokens=1 hop=1 to=layers:2-3
    eval_ms=0.412 wait_ms=0.120 transfer_ms=0.301 bytes_in=2048 bytes_out=2048`"""
    to = r.to.replace(" ", ":")
    return (
        f"{TRACE_PREFIX} pass={r.pass_id} op={r.op} piece={r.piece} pos={r.pos} "
        f"tokens={r.tokens} hop={r.hop} to={to} eval_ms={r.eval_s * 1e3:.3f} "
        f"wait_ms={r.wait_s * 1e3:.3f} transfer_ms={r.transfer_s * 1e3:.3f} "
        f"bytes_in={r.bytes_in} bytes_out={r.bytes_out}"
    )


_PAIR = re.compile(r"(\w+)=(\S+)")


def parse_trace_line(line: str) -> dict[str, str]:
    """The fields of a trace line by name (values as text); Ds4Error if it is not one."""
    if not line.startswith(TRACE_PREFIX):
        raise Ds4Error(f"not a dist-trace line: {line[:60]!r}")
    fields = dict(_PAIR.findall(line[len(TRACE_PREFIX) :]))
    missing = [f for f in _FIELDS if f not in fields]
    if missing:
        raise Ds4Error(f"dist-trace line lacks {', '.join(missing)}")
    return fields


def hop_gaps(
    submitted: float,
    starts: list[float],
    ends: list[float],
    idle_since: list[float],
) -> list[float]:
    """Each range's transfer time: from its input being ready (the coordinator's submit
    for range 0, the previous range's end otherwise) and the worker being free (the end
    of its previous call) to its start; clamped at 0 against clock skew."""
    out = []
    ready = submitted
    for start, end, idle in zip(starts, ends, idle_since, strict=True):
        out.append(max(0.0, start - max(ready, idle)))
        ready = end
    return out


@dataclass
class HopTotals:
    passes: int = 0
    tokens: int = 0
    eval_s: float = 0.0
    wait_s: float = 0.0
    transfer_s: float = 0.0
    bytes_in: int = 0


class HopSummary:
    """Hop records summed per hop and operation (`ds4 bench`'s per-range report)."""

    def __init__(self) -> None:
        self.totals: dict[tuple[int, str, str], HopTotals] = {}

    def add(self, r: HopRecord) -> None:
        t = self.totals.setdefault((r.hop, r.to, r.op), HopTotals())
        t.passes += 1
        t.tokens += r.tokens
        t.eval_s += r.eval_s
        t.wait_s += r.wait_s
        t.transfer_s += r.transfer_s
        t.bytes_in += r.bytes_in

    def lines(self) -> list[str]:
        """One `to=... op=... passes=N tokens=T eval_ms_per_pass=... wait_ms_per_pass=...
        transfer_ms_per_pass=... bytes_in_per_token=B` line per hop and operation, in
        hop order (the ranges in layer order, then the way back to the coordinator)."""
        out = []
        for key in sorted(self.totals):
            _, to, op = key
            t = self.totals[key]
            n = max(t.passes, 1)
            out.append(
                f"to={to.replace(' ', ':')} op={op} passes={t.passes} tokens={t.tokens} "
                f"eval_ms_per_pass={t.eval_s * 1e3 / n:.3f} "
                f"wait_ms_per_pass={t.wait_s * 1e3 / n:.3f} "
                f"transfer_ms_per_pass={t.transfer_s * 1e3 / n:.3f} "
                f"bytes_in_per_token={t.bytes_in // max(t.tokens, 1)}"
            )
        return out
