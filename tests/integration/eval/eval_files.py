"""Case files and scripts for `ds4 eval` tests, and the command as a subprocess."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

DS4 = [sys.executable, "-m", "ds4"]

# One case per answer kind, plus one the script answers wrongly.
CASES: list[dict[str, object]] = [
    {"record": "source", "name": "T", "license": "MIT", "url": "tests/integration/eval"},
    {"source": "T", "id": "mc", "question": "Pick the second.", "choices": ["x", "y", "z"],
     "answer": "B", "answer_kind": "MULTIPLE_CHOICE"},
    {"source": "T", "id": "int", "question": "Six times seven?", "answer": "42",
     "answer_kind": "INTEGER"},
    {"source": "T", "id": "lines", "question": "1 a\n2 b\n3 c\n4 d\nWhich lines?",
     "answer": "3-4", "answer_kind": "LINE_SET"},
    {"source": "T", "id": "seq", "question": "Order them.", "answer": "A,C,B",
     "answer_kind": "ORDERED_SEQUENCE"},
    {"source": "T", "id": "wrong", "question": "One plus one?", "answer": "2",
     "answer_kind": "INTEGER", "suites": ["core", "hard"]},
]  # fmt: skip
OUTPUTS = [
    "The second one.</think>\n\nAnswer: B",
    "6*7.</think>Answer: 42",
    "Writes past the end.</think>Answer: 4",
    "Sorted.</think>Answer: A, C, B",
    "Hmm.</think>Answer: 3",
]


def write_cases(path: Path, cases: Sequence[dict[str, object]] = CASES) -> str:
    path.write_text("".join(json.dumps(c) + "\n" for c in cases), encoding="utf-8")
    return str(path)


def write_script(path: Path, outputs: Sequence[str]) -> str:
    path.write_text(json.dumps(list(outputs)), encoding="utf-8")
    return str(path)


def ds4_eval(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*DS4, "eval", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def scripted(script: str, cases: str, *more: str) -> list[str]:
    return ["--backend", "scripted", "--script", script, "--cases", cases, "--plain", *more]
