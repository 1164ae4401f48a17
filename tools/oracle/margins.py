"""Measure how decisively every discrete choice in an HF forward pass was made.

Two places in DeepSeek V4 pick a discrete subset: the top-k MoE router (biased scores) and
the lightning indexer (top-k compressed rows, once a query sees more rows than the top-k).
If the k-th and (k+1)-th candidates are nearly tied, float noise in another implementation
can flip the choice and the logits then differ by far more than the tolerance. Forward
hooks record, for every decision, the gap between the last chosen and the first rejected
candidate, relative to the largest candidate magnitude in that row.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as hf

# Relative gap every decision must beat. HF's own prefill, chunked-prefill and decode
# paths agree to ~3e-6 of the largest logit on these models, so 3e-5 leaves a factor of
# ten; a stricter bound makes seeds with ~1000 decisions per run hard to find.
MIN_RELATIVE_MARGIN = 3e-5


@dataclass
class MarginLog:
    router: list[float] = field(default_factory=list)
    indexer: list[float] = field(default_factory=list)

    def smallest(self) -> float:
        return min(self.router + self.indexer, default=float("inf"))

    def summary(self) -> dict[str, float | int]:
        return {
            "router_decisions": len(self.router),
            "router_min_margin": min(self.router, default=float("inf")),
            "indexer_decisions": len(self.indexer),
            "indexer_min_margin": min(self.indexer, default=float("inf")),
        }


def _relative_gaps(rows: torch.Tensor, k: int) -> list[float]:
    """Per row: (k-th largest - (k+1)-th largest) / max |value|."""
    top = rows.double().topk(k + 1, dim=-1).values
    scale = rows.double().abs().amax(dim=-1).clamp_min(1e-30)
    gaps: list[float] = ((top[:, k - 1] - top[:, k]) / scale).tolist()
    return gaps


@contextmanager
def record_margins(model: torch.nn.Module) -> Iterator[MarginLog]:
    """Hook every top-k router and indexer scorer of ``model`` while the block runs.

    Assumes batch size 1 and positions starting at 0 (a fresh, uncached forward).
    """
    log = MarginLog()
    handles: list[Any] = []

    def on_router(module: Any, _inputs: Any, output: Any) -> None:
        logits = output[0].detach()
        scores = torch.sqrt(torch.nn.functional.softplus(logits)) + module.e_score_correction_bias
        if scores.shape[-1] > module.top_k:
            log.router.extend(_relative_gaps(scores, module.top_k))

    def on_indexer(module: Any) -> Any:
        ratio, top_k = module.compress_rate, module.index_topk

        def hook(_scorer: Any, _inputs: Any, output: Any) -> None:
            scores = output.detach()[0]  # [S, T]
            for pos in range(scores.shape[0]):
                visible = (pos + 1) // ratio  # rows emitted at or before this position
                if visible > top_k:
                    log.indexer.extend(_relative_gaps(scores[pos : pos + 1, :visible], top_k))

        return hook

    for module in model.modules():
        if isinstance(module, hf.DeepseekV4TopKRouter):
            handles.append(module.register_forward_hook(on_router))
        elif isinstance(module, hf.DeepseekV4Indexer):
            handles.append(module.scorer.register_forward_hook(on_indexer(module)))
    try:
        yield log
    finally:
        for handle in handles:
            handle.remove()
