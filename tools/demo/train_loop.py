"""The optimisation loops: the main model, then the MTP block on the frozen main model.

Plain AdamW with linear warm-up and cosine decay, gradient clipping at 1. The biased
top-k routers are balanced the way DeepSeek V3/V4 describe (no auxiliary loss): after
each step every expert's selection bias moves by BIAS_RATE towards the mean load
(docs/reference/model.md §3.8: the bias only chooses experts, it never weighs them).
The lightning indexer's weights get no gradient (its top-k is a discrete choice and no
distillation loss is added), so they keep their seeded initial values.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import torch
from torch import nn
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as hf

from tools.demo.batches import Batch
from tools.demo.torch_model import DemoModel

BIAS_RATE = 1e-3
WARMUP = 40
MIN_LR_FRACTION = 0.1


@dataclass
class Schedule:
    steps: int
    peak_lr: float

    def lr(self, step: int) -> float:
        if step < WARMUP:
            return self.peak_lr * (step + 1) / WARMUP
        progress = (step - WARMUP) / max(1, self.steps - WARMUP)
        cosine = 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
        return self.peak_lr * (MIN_LR_FRACTION + (1 - MIN_LR_FRACTION) * cosine)


@dataclass
class RunLog:
    losses: list[float] = field(default_factory=list)
    tokens: int = 0
    seconds: float = 0.0

    def recent_loss(self, n: int = 50) -> float:
        tail = self.losses[-n:]
        return sum(tail) / max(1, len(tail))


@contextmanager
def router_loads(model: nn.Module) -> Iterator[dict[nn.Module, torch.Tensor]]:
    """Per top-k router, the number of times each expert was chosen (until reset)."""
    loads: dict[nn.Module, torch.Tensor] = {}

    def hook(module: nn.Module, _inputs: Any, output: Any) -> None:
        indices = output[2].reshape(-1)
        counts = torch.bincount(indices, minlength=cast(int, module.num_experts)).float()
        loads[module] = loads.get(module, torch.zeros_like(counts)) + counts

    handles = [
        m.register_forward_hook(hook)
        for m in model.modules()
        if isinstance(m, hf.DeepseekV4TopKRouter)
    ]
    try:
        yield loads
    finally:
        for h in handles:
            h.remove()


@torch.no_grad()
def balance(loads: dict[nn.Module, torch.Tensor]) -> None:
    for router, counts in loads.items():
        bias = cast(torch.Tensor, router.e_score_correction_bias)
        bias.add_(BIAS_RATE * torch.sign(counts.mean() - counts))
    loads.clear()


def main_loss(model: DemoModel, batch: Batch) -> torch.Tensor:
    length = batch.token_ids.shape[1]
    hidden, _ = model.trunk(batch.token_ids, batch.rows, model.positions(length))
    nll = model.full_vocab_nll(model.logits(hidden[:, :-1]), batch.rows[:, 1:])
    w = batch.weights[:, 1:]
    return (nll * w).sum() / w.sum()


def mtp_loss(model: DemoModel, batch: Batch) -> torch.Tensor:
    """The MTP block at position t reads H_t and token t+1 and predicts token t+2."""
    length = batch.token_ids.shape[1]
    with torch.no_grad():
        _, hc_state = model.trunk(batch.token_ids, batch.rows, model.positions(length))
        next_embed = model.embed[batch.rows[:, 1:]]
    hidden = model.mtp(hc_state[:, :-1], next_embed, model.positions(length - 1))
    nll = model.full_vocab_nll(model.logits(hidden[:, :-1]), batch.rows[:, 2:])
    w = batch.weights[:, 2:]
    return (nll * w).sum() / w.sum()


def run(
    model: DemoModel,
    params: list[nn.Parameter],
    batches: Callable[[], Iterator[Batch]],
    schedule: Schedule,
    loss_fn: Callable[[DemoModel, Batch], torch.Tensor],
    label: str,
    probe: Callable[[int], None] | None = None,
    probe_every: int = 0,
) -> RunLog:
    """`probe(step)` runs every `probe_every` steps and after the last (not timed)."""
    opt = torch.optim.AdamW(params, lr=schedule.peak_lr, betas=(0.9, 0.95), weight_decay=0.01)
    log = RunLog()
    start = time.perf_counter()
    stream = batches()
    with router_loads(model) as loads:
        for step in range(schedule.steps):
            batch = next(stream)
            for group in opt.param_groups:
                group["lr"] = schedule.lr(step)
            loss = loss_fn(model, batch)
            opt.zero_grad(set_to_none=True)
            torch.autograd.backward(loss)
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            balance(loads)
            log.losses.append(float(loss.detach()))
            log.tokens += batch.real_tokens
            log.seconds = time.perf_counter() - start
            last = step == schedule.steps - 1
            if probe is not None and probe_every and ((step + 1) % probe_every == 0 or last):
                probe(step + 1)
                start += time.perf_counter() - start - log.seconds  # probes are not training
            if step % 10 == 0 or step == schedule.steps - 1:
                print(
                    f"{label} step {step}/{schedule.steps} loss {log.recent_loss(10):.3f} "
                    f"lr {schedule.lr(step):.2e} {log.tokens / log.seconds:.0f} tok/s "
                    f"{log.seconds:.0f}s",
                    file=sys.stderr,
                    flush=True,
                )
    return log
