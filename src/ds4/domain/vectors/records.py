"""The vector files as values (docs/test-vectors.md "Files"): a set of cases, each a
prompt, its session size and the recorded steps; typed reads of their JSON with errors
that name the file and field; and manifest.json, which cases a directory holds.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any

from ds4.domain.errors import Ds4Error

# --- records ---
# The vector files as values: a set of cases, each a prompt, its session size and the
# recorded steps (docs/test-vectors.md "Files").

NEGLIGIBLE_LOGPROB = -1000.0  # the API writes -9999.0 for alternatives it does not rank
MAX_STEPS = 16
MAX_TOPS = 32
MAX_TOKEN_BYTES = 128
MAX_TOP_LOGPROBS = MAX_TOPS  # what official.vec can carry per step


@dataclass(frozen=True)
class VectorToken:
    """A token as recorded: its bytes (authoritative) and its text (display only)."""

    raw: bytes
    text: str


@dataclass(frozen=True)
class Alternative:
    token: VectorToken
    logprob: float

    @property
    def compared(self) -> bool:
        """The rule checks an alternative only when the source ranked it (not the API's
        -9999 placeholder) and it has bytes."""
        return self.logprob > NEGLIGIBLE_LOGPROB and bool(self.token.raw)


@dataclass(frozen=True)
class VectorStep:
    index: int
    token: VectorToken  # the selected (greedy) token
    logprob: float
    alternatives: tuple[Alternative, ...]

    @property
    def compared(self) -> tuple[Alternative, ...]:
        return tuple(a for a in self.alternatives if a.compared)


@dataclass(frozen=True)
class VectorCase:
    id: str
    kind: str  # short | long
    prompt: str
    ctx: int  # the session size the case is checked with
    steps: tuple[VectorStep, ...]
    prompt_file: str
    official_file: str
    prompt_tokens: int | None  # what the source counted (usage.prompt_tokens), if it did


@dataclass(frozen=True)
class VectorSet:
    source: str
    model: str
    endpoint: str
    top_logprobs: int  # how many alternatives each step lists: the local top-k compared
    max_tokens: int
    cases: tuple[VectorCase, ...]

    def case_ids(self) -> list[str]:
        return [c.id for c in self.cases]


# --- fields ---
# Typed reads of JSON values with errors that name the file and the field path
# (`official/x.official.json: steps[2].token.bytes: ...`).


class VectorFileError(Ds4Error):
    """A vector file that is missing, malformed or inconsistent with the others."""


def load_json(raw: bytes, where: str) -> Any:
    def refuse_constant(name: str) -> Any:
        raise VectorFileError(f"{where}: {name} is not a JSON number")

    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VectorFileError(f"{where}: not UTF-8 (byte {exc.start})") from None
    try:
        return json.loads(text, parse_constant=refuse_constant)
    except json.JSONDecodeError as exc:
        raise VectorFileError(
            f"{where}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg})"
        ) from None


class Fields:
    """One JSON object, read field by field; `path` is where it sits in its file."""

    def __init__(self, value: object, where: str, path: str = "") -> None:
        if not isinstance(value, dict):
            raise VectorFileError(f"{where}: {path or 'the file'} must be a JSON object")
        self._obj: dict[str, object] = value
        self.where = where
        self.path = path

    def _name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def fail(self, key: str, problem: str) -> VectorFileError:
        return VectorFileError(f"{self.where}: {self._name(key)}: {problem}")

    def _get(self, key: str) -> object:
        if key not in self._obj:
            raise VectorFileError(f"{self.where}: {self._name(key)} is missing")
        return self._obj[key]

    def has(self, key: str) -> bool:
        return key in self._obj

    def text(self, key: str, *, non_empty: bool = True) -> str:
        value = self._get(key)
        if not isinstance(value, str):
            raise self.fail(key, "expected a string")
        if non_empty and not value:
            raise self.fail(key, "is empty")
        return value

    def integer(self, key: str, low: int, high: int) -> int:
        value = self._get(key)
        if type(value) is not int:
            raise self.fail(key, f"expected an integer, got {_kind(value)}")
        if not low <= value <= high:
            raise self.fail(key, f"{value} is not in {low}..{high}")
        return value

    def number(self, key: str) -> float:
        value = self._get(key)
        if type(value) not in (int, float):
            raise self.fail(key, f"expected a number, got {_kind(value)}")
        number = float(value)  # type: ignore[arg-type]
        if not math.isfinite(number):
            raise self.fail(key, "is not finite")
        return number

    def boolean(self, key: str) -> bool:
        value = self._get(key)
        if not isinstance(value, bool):
            raise self.fail(key, f"expected true or false, got {_kind(value)}")
        return value

    def obj(self, key: str) -> Fields:
        return Fields(self._get(key), self.where, self._name(key))

    def items(self, key: str, *, max_items: int) -> list[object]:
        value = self._get(key)
        if not isinstance(value, list):
            raise self.fail(key, f"expected a list, got {_kind(value)}")
        if len(value) > max_items:
            raise self.fail(key, f"has {len(value)} entries, at most {max_items} are allowed")
        return value

    def objects(self, key: str, *, max_items: int) -> list[Fields]:
        return [
            Fields(item, self.where, f"{self._name(key)}[{index}]")
            for index, item in enumerate(self.items(key, max_items=max_items))
        ]

    def byte_values(self, key: str, *, max_bytes: int) -> bytes:
        values = self.items(key, max_items=max_bytes)
        if not all(type(v) is int and 0 <= v <= 255 for v in values):
            raise self.fail(key, "expected a list of byte values 0..255")
        return bytes(values)  # type: ignore[arg-type]


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    return {
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(value), type(value).__name__)


# --- manifest ---
# manifest.json: which cases a vector directory holds and where their files are.

MANIFEST = "manifest.json"
MANIFEST_SCHEMA = "ds4-test-vector-manifest-v1"
KINDS = ("short", "long")
MAX_CASES = 1000
MAX_PROMPT_CHARS = 1 << 26  # 64 Mi characters: far above any context a model takes

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True)
class ManifestEntry:
    id: str
    kind: str
    prompt_file: str
    official_file: str
    prompt_chars: int
    steps: int


@dataclass(frozen=True)
class Manifest:
    source: str
    model: str
    endpoint: str
    top_logprobs: int
    max_tokens: int
    entries: tuple[ManifestEntry, ...]


def parse_manifest(raw: bytes, where: str = MANIFEST) -> Manifest:
    top = Fields(load_json(raw, where), where)
    schema = top.text("schema")
    if schema != MANIFEST_SCHEMA:
        raise top.fail("schema", f"{schema!r} is not {MANIFEST_SCHEMA!r}")
    entries = tuple(_entry(item) for item in top.objects("prompts", max_items=MAX_CASES))
    if not entries:
        raise top.fail("prompts", "lists no case")
    seen: set[str] = set()
    for entry in entries:
        if entry.id in seen:
            raise top.fail("prompts", f"case id {entry.id!r} appears twice")
        seen.add(entry.id)
    return Manifest(
        source=top.text("source"),
        model=top.text("model"),
        endpoint=top.text("endpoint"),
        top_logprobs=top.integer("top_logprobs", 1, MAX_TOP_LOGPROBS),
        max_tokens=top.integer("max_tokens", 1, MAX_STEPS),
        entries=entries,
    )


def _entry(item: Fields) -> ManifestEntry:
    case_id = item.text("id")
    if not _ID.fullmatch(case_id):
        raise item.fail("id", f"{case_id!r} is not a case id (letters, digits, _ . -; 64 at most)")
    kind = item.text("kind")
    if kind not in KINDS:
        raise item.fail("kind", f"{kind!r} is not one of {', '.join(KINDS)}")
    return ManifestEntry(
        id=case_id,
        kind=kind,
        prompt_file=_relative_path(item, "prompt_file"),
        official_file=_relative_path(item, "official_file"),
        prompt_chars=item.integer("prompt_chars", 1, MAX_PROMPT_CHARS),
        steps=item.integer("steps", 1, MAX_STEPS),
    )


def _relative_path(item: Fields, key: str) -> str:
    """A path inside the vector directory: relative, '/'-separated, no '.' or '..'."""
    path = item.text(key)
    parts = path.split("/")
    if path.startswith("/") or "\\" in path or any(p in ("", ".", "..") for p in parts):
        raise item.fail(key, f"{path!r} is not a relative path inside the vector directory")
    return path


def render_manifest(manifest: Manifest) -> bytes:
    """manifest.json as the official files write it (two-space indent, a final newline)."""
    body = {
        "schema": MANIFEST_SCHEMA,
        "source": manifest.source,
        "model": manifest.model,
        "endpoint": manifest.endpoint,
        "top_logprobs": manifest.top_logprobs,
        "max_tokens": manifest.max_tokens,
        "prompts": [
            {
                "id": e.id,
                "kind": e.kind,
                "prompt_file": e.prompt_file,
                "official_file": e.official_file,
                "prompt_chars": e.prompt_chars,
                "steps": e.steps,
            }
            for e in manifest.entries
        ],
    }
    return (json.dumps(body, indent=2, ensure_ascii=False) + "\n").encode()
