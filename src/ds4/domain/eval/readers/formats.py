"""Which reader a case file needs (docs/eval.md "Case files"): named with
--cases-format, or told from the file's name and first record."""

from __future__ import annotations

import json
from collections.abc import Callable

from ds4.domain.eval.case_schema import CaseDataError, CaseSet, parse_case_lines
from ds4.domain.eval.readers.aime import looks_like_aime, parse_aime_lines
from ds4.domain.eval.readers.gpqa import looks_like_gpqa, parse_gpqa_csv
from ds4.domain.eval.readers.mmlu_pro import (
    looks_like_mmlu_pro,
    looks_like_mmlu_pro_csv,
    parse_mmlu_pro_csv,
    parse_mmlu_pro_lines,
)

Reader = Callable[[str, str], CaseSet]

READERS: dict[str, Reader] = {
    "ds4": parse_case_lines,
    "gpqa-csv": parse_gpqa_csv,
    "aime-jsonl": parse_aime_lines,
    "mmlu-pro-jsonl": parse_mmlu_pro_lines,
    "mmlu-pro-csv": parse_mmlu_pro_csv,
}
AUTO = "auto"
FORMAT_NAMES = (AUTO, *READERS)
_OURS = ("record", "answer_kind", "suites", "aliases", "max_tokens")


def _first_object(text: str) -> dict[str, object] | None:
    for line in text.splitlines():
        if line.strip():
            try:
                value = json.loads(line)
            except ValueError:
                return None
            return value if isinstance(value, dict) else None
    return None


def detect_format(name: str, text: str) -> str:
    """The reader for a file, from its name and first record; CaseDataError if none fits."""
    if name.lower().endswith(".csv") or not text.lstrip().startswith("{"):
        if looks_like_gpqa(text):
            return "gpqa-csv"
        if looks_like_mmlu_pro_csv(text):
            return "mmlu-pro-csv"
    else:
        obj = _first_object(text)
        if obj is not None:
            if any(k in obj for k in _OURS) or {"source", "id", "question"} <= set(obj):
                return "ds4"
            if looks_like_mmlu_pro(obj):
                return "mmlu-pro-jsonl"
            if looks_like_aime(obj):
                return "aime-jsonl"
    raise CaseDataError(
        f"{name}: cannot tell the case format (name it with --cases-format: {', '.join(READERS)})"
    )


def parse_case_file(name: str, text: str, fmt: str = AUTO) -> CaseSet:
    if not text.strip():
        raise CaseDataError(f"{name}: the file is empty")
    chosen = detect_format(name, text) if fmt == AUTO else fmt
    if chosen not in READERS:
        raise CaseDataError(f"unknown case format {fmt!r} (use {', '.join(FORMAT_NAMES)})")
    return READERS[chosen](text, name)
