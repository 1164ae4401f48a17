"""Field rules shared by the POST endpoints: sampling clamps, stop lists, limits.

Limits (docs/reference/server.md §1.2; ADR 0040): a request may carry at most
MAX_STOPS stop strings of at most MAX_STOP_BYTES each and MAX_TOOLS tools;
max_tokens and top_k are clamped rather than refused (the worker clamps max_tokens
to the free context anyway, and the sampler caps top_k at 1024).
"""

from __future__ import annotations

from ds4.domain.errors import RequestError
from ds4.domain.serving.exchange import Sampling

INT_MAX = 2**31 - 1
MAX_STOPS = 16
MAX_STOP_BYTES = 1024
MAX_TOOLS = 512


def clamp_int(value: int | None) -> int | None:
    """Integers from JSON clamp to [0, INT_MAX] (docs/reference/server.md §2.3)."""
    return None if value is None else min(max(value, 0), INT_MAX)


def sampling(
    temperature: float | None = None,
    top_p: float | None = None,
    top_k: int | None = None,
    min_p: float | None = None,
    seed: int | None = None,
) -> Sampling:
    base = Sampling()
    return Sampling(
        temperature=base.temperature if temperature is None else temperature,
        top_p=base.top_p if top_p is None else top_p,
        top_k=base.top_k if top_k is None else min(clamp_int(top_k) or 0, 1024),
        min_p=base.min_p if min_p is None else min_p,
        seed=base.seed if seed is None else max(seed, 0),
    )


def stop_list(value: object) -> tuple[str, ...]:
    """A string or array; non-strings and empty strings are ignored."""
    items = [value] if isinstance(value, str) else value if isinstance(value, list) else []
    stops = tuple(s for s in items if isinstance(s, str) and s)
    if len(stops) > MAX_STOPS:
        raise RequestError(f"too many stop sequences (at most {MAX_STOPS})")
    if any(len(s.encode()) > MAX_STOP_BYTES for s in stops):
        raise RequestError(f"stop sequence longer than {MAX_STOP_BYTES} bytes")
    return stops


def check_tool_count(count: int) -> None:
    if count > MAX_TOOLS:
        raise RequestError(f"too many tools (at most {MAX_TOOLS})")
