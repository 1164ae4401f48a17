"""A validation finding: what it is about and what is wrong."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning"]


@dataclass(frozen=True)
class Problem:
    subject: str  # metadata key or tensor name
    message: str
    severity: Severity = "error"

    def __str__(self) -> str:
        return f"{self.subject}: {self.message}"
