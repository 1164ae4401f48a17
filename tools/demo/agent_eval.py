"""Copy accuracy on held-out agent requests (paths and texts never trained on).

Each held-out task is rendered as the agent sends it (the whole system prompt, or only
its tail for the cheap probe during training) and scored teacher-forced: the tool call
is right when the arg-max at every position of the generated call (`</think>` through
EOS) is the expected token; that is exactly when greedy decoding writes the call. The
final answer is scored the same way after the real tool result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from ds4.domain.chat import ThinkMode
from tools.demo.agent_dialogues import AgentRenderer, Task
from tools.demo.torch_model import DemoModel


@dataclass(frozen=True)
class CopyScore:
    tasks: int
    calls_exact: int  # every call token right
    write_tasks: int
    writes_exact: int
    answers_exact: int
    call_token_accuracy: float

    def line(self, label: str) -> str:
        return (
            f"{label}: calls {self.calls_exact}/{self.tasks} exact "
            f"(write {self.writes_exact}/{self.write_tasks}), answers {self.answers_exact}/"
            f"{self.tasks}, call tokens {self.call_token_accuracy:.3f}"
        )


def _segments(weights: np.ndarray) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    start = None
    for i, w in enumerate(weights):
        if w > 0 and start is None:
            start = i
        elif w <= 0 and start is not None:
            out.append((start, i))
            start = None
    if start is not None:
        out.append((start, len(weights)))
    return out


@torch.no_grad()
def score(
    model: DemoModel,
    renderer: AgentRenderer,
    tasks: list[Task],
    row_of: np.ndarray,
    tail: int | None,
    seed: int,
) -> CopyScore:
    rng = np.random.default_rng([seed, 77])
    exact = writes = writes_exact = answers = 0
    right = total = 0
    for index, t in enumerate(tasks):
        mode = ThinkMode.HIGH if index % 4 != 3 else ThinkMode.NONE
        example = renderer.render(t, rng, mode, index % 3 != 2, tail)
        ids = torch.from_numpy(example.ids.astype(np.int64)).unsqueeze(0)
        rows_np = row_of[example.ids]
        if (rows_np < 0).any():  # a token without a row can never be predicted
            rows_np = np.where(rows_np < 0, 0, rows_np)
        rows = torch.from_numpy(rows_np).unsqueeze(0)
        hidden, _ = model.trunk(ids, rows, model.positions(ids.shape[1]))
        logits = model.logits(hidden[0, :-1])
        best, pred = logits.max(dim=-1)
        pred = torch.where(best > 0, pred, torch.full_like(pred, -1))  # zero-row tokens win
        target = torch.from_numpy(row_of[example.ids[1:]])
        ok = (pred == target).numpy()
        call, answer = _segments(example.weights)[:2]
        call_ok = ok[call[0] - 1 : call[1] - 1]
        right += int(call_ok.sum())
        total += len(call_ok)
        exact += bool(call_ok.all())
        answers += bool(ok[answer[0] - 1 : answer[1] - 1].all())
        if t.tool == "write":
            writes += 1
            writes_exact += bool(call_ok.all())
    return CopyScore(len(tasks), exact, writes, writes_exact, answers, right / max(1, total))
