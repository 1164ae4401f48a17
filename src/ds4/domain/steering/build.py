"""Building a direction from contrast prompts (docs/steering.md): the activations it is
built from, captured per layer at each prompt's last position, and per layer the
normalised difference of the target and contrast means.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from ds4.domain.errors import Ds4Error
from ds4.ports.compute import Component, ModelRunner, Steerable
from ds4.ports.tokenizer import Tokenizer

# --- build ---
# Building a direction from contrast prompts (docs/steering.md): per layer the
# normalised difference of the mean activation of the target ("good") prompts and of the
# contrast ("bad") prompts, optionally pair by pair, optionally made orthogonal to the
# contrast mean; and the metadata JSON written beside the direction file.

F32 = npt.NDArray[np.float32]
FORMAT = "ds4-directional-steering-v1"
COMPONENTS = ("ffn_out", "attn_out")


def prompt_lines(text: str, path: str) -> list[str]:
    """One prompt per non-empty line; lines starting with # are comments."""
    lines = [ln.strip() for ln in text.splitlines()]
    prompts = [ln for ln in lines if ln and not ln.startswith("#")]
    if not prompts:
        raise Ds4Error(f"{path}: no prompts (one per line, # starts a comment)")
    return prompts


def _unit(v: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    norm = float(np.linalg.norm(v))
    if norm == 0.0 or not np.isfinite(norm):
        raise Ds4Error("a layer's direction is zero: the two prompt sets do not differ there")
    out: npt.NDArray[np.float64] = v / norm
    return out


def build_directions(
    good: Sequence[F32],
    bad: Sequence[F32],
    *,
    pair_normalize: bool = False,
    orthogonalize: bool = True,
) -> F32:
    """good[i], bad[i]: (n_layer, n_embd) captures of pair i (the first min(len) pairs).
    Returns (n_layer, n_embd) unit rows, computed in f64."""
    n = min(len(good), len(bad))
    if n == 0:
        raise Ds4Error("building a direction needs at least one good and one bad prompt")
    g = np.stack([np.asarray(x, np.float64) for x in good[:n]])
    b = np.stack([np.asarray(x, np.float64) for x in bad[:n]])
    out = np.empty(g.shape[1:], dtype=np.float64)
    for layer in range(g.shape[1]):
        if pair_normalize:
            diffs = [_unit(g[i, layer] - b[i, layer]) for i in range(n)]
            d = _unit(np.mean(diffs, axis=0))
        else:
            d = _unit(g[:, layer].mean(axis=0) - b[:, layer].mean(axis=0))
        if orthogonalize:
            c = _unit(b[:, layer].mean(axis=0))
            d = _unit(d - c * float(d @ c))
        out[layer] = d
    return out.astype(np.float32)


@dataclass(frozen=True)
class DirectionInfo:
    shape: tuple[int, int]
    component: str
    thinking: bool
    pair_normalize: bool
    orthogonalize: bool
    good_file: str
    bad_file: str
    model: str
    pairs: int

    def json(self) -> str:
        return json.dumps(
            {
                "format": FORMAT,
                "shape": list(self.shape),
                "component": self.component,
                "thinking": self.thinking,
                "pair_normalize": self.pair_normalize,
                "orthogonalize_control_mean": self.orthogonalize,
                "good_file": self.good_file,
                "bad_file": self.bad_file,
                "model": self.model,
                "pairs": self.pairs,
                "note": "runtime positive scale suppresses this direction; negative scale "
                "amplifies it",
            },
            indent=2,
        )


# --- capture ---
# The activations a direction is built from (docs/steering.md): each prompt rendered as
# one chat turn, prefilled into a fresh session with the runner capturing one
# component's output per layer at the last prompt position.


def capture_prompts(
    runner: ModelRunner,
    tokenizer: Tokenizer,
    prompts: Sequence[str],
    render: Callable[[str], str],
    *,
    ctx: int,
    component: Component,
    done: Callable[[], object] = lambda: None,
) -> list[F32]:
    """One (n_layer, n_embd) capture per prompt; `done()` after each."""
    if not isinstance(runner, Steerable):
        raise Ds4Error("activation capture needs --backend cpu or reference")
    out = []
    runner.capture(component)
    try:
        for prompt in prompts:
            ids = tokenizer.encode(render(prompt))
            if len(ids) > ctx:
                raise Ds4Error(f"a prompt has {len(ids)} tokens, more than --ctx {ctx}")
            runner.new_session(ctx).prefill(ids)
            out.append(runner.captured())
            done()
    finally:
        runner.capture(None)
    return out
