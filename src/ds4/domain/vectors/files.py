"""A vector directory's files (docs/test-vectors.md "Files"): each case's
`official/<id>.official.json`, the compact `official.vec`, and the directory read as
data with every file checked on its own and against the others.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from ds4.domain.vectors.records import (
    MANIFEST,
    MAX_STEPS,
    MAX_TOKEN_BYTES,
    MAX_TOPS,
    Alternative,
    Fields,
    ManifestEntry,
    VectorCase,
    VectorFileError,
    VectorSet,
    VectorStep,
    VectorToken,
    load_json,
    parse_manifest,
)

# --- official json ---
# `official/<id>.official.json`: one case's recorded request, usage and steps
# (docs/test-vectors.md "Files"). The steps' token bytes are authoritative; the text
# fields are for reading.

OFFICIAL_SCHEMA = "ds4-official-logprobs-v1"
MAX_PROMPT_TOKENS = 1 << 20


@dataclass(frozen=True)
class OfficialRecord:
    steps: tuple[VectorStep, ...]
    prompt_tokens: int | None  # usage.prompt_tokens, when the record has it


def parse_official(
    raw: bytes, where: str, entry: ManifestEntry, prompt: str, top_logprobs: int
) -> OfficialRecord:
    """The record of `entry`, checked against its manifest entry and prompt file."""
    top = Fields(load_json(raw, where), where)
    schema = top.text("schema")
    if schema != OFFICIAL_SCHEMA:
        raise top.fail("schema", f"{schema!r} is not {OFFICIAL_SCHEMA!r}")
    if (record_id := top.text("id")) != entry.id:
        raise top.fail("id", f"{record_id!r}, but the manifest lists this file for {entry.id!r}")
    if (kind := top.text("kind")) != entry.kind:
        raise top.fail("kind", f"{kind!r}, but the manifest says {entry.kind!r}")
    recorded = top.text("prompt")
    if recorded != prompt:
        at = next(
            (i for i, (a, b) in enumerate(zip(recorded, prompt, strict=False)) if a != b),
            min(len(recorded), len(prompt)),
        )
        raise top.fail("prompt", f"differs from {entry.prompt_file} at character {at}")
    _check_request(top.obj("request"))
    steps = tuple(
        _official_step(item, index, top_logprobs)
        for index, item in enumerate(top.objects("steps", max_items=MAX_STEPS))
    )
    if len(steps) != entry.steps:
        raise top.fail("steps", f"has {len(steps)} steps, the manifest says {entry.steps}")
    _check_content(top.obj("message"), steps)
    return OfficialRecord(steps, _prompt_tokens(top))


def _check_request(request: Fields) -> None:
    """The comparison rule holds for greedy requests with thinking disabled only."""
    if request.number("temperature") != 0:
        raise request.fail("temperature", "is not 0: only greedy vectors can be compared")
    thinking = request.obj("thinking").text("type")
    if thinking != "disabled":
        raise request.fail(
            "thinking", f"type {thinking!r}: the vectors are rendered with thinking disabled"
        )


def _official_step(item: Fields, index: int, top_logprobs: int) -> VectorStep:
    if (number := item.integer("step", 0, 1 << 20)) != index:
        raise item.fail("step", f"{number}, expected {index}")
    token = _token(item.obj("token"))
    if not token.raw:
        raise item.fail("token", "has no bytes")
    alternatives = tuple(
        Alternative(_token(alt.obj("token")), _logprob(alt))
        for alt in item.objects("top_logprobs", max_items=top_logprobs)
    )
    return VectorStep(index, token, _logprob(item), alternatives)


def _token(token: Fields) -> VectorToken:
    return VectorToken(
        token.byte_values("bytes", max_bytes=MAX_TOKEN_BYTES), token.text("text", non_empty=False)
    )


def _logprob(item: Fields) -> float:
    value = item.number("logprob")
    if value > 0:
        raise item.fail("logprob", f"{value} is positive (a log-probability is <= 0)")
    return value


def _check_content(message: Fields, steps: tuple[VectorStep, ...]) -> None:
    """The reply text must be the steps' bytes (checked when they are whole UTF-8)."""
    content = message.text("content", non_empty=False)
    try:
        joined = b"".join(s.token.raw for s in steps).decode("utf-8")
    except UnicodeDecodeError:
        return
    if joined != content:
        raise message.fail("content", f"{content[:40]!r} is not the steps' tokens {joined[:40]!r}")


def _prompt_tokens(top: Fields) -> int | None:
    if not top.has("usage"):
        return None
    usage = top.obj("usage")
    return (
        usage.integer("prompt_tokens", 1, MAX_PROMPT_TOKENS) if usage.has("prompt_tokens") else None
    )


@dataclass(frozen=True)
class RecordHeader:
    """What a locally written record says about where it came from."""

    source: str
    model: str
    endpoint: str
    created_at: str  # ISO-8601, Z


def render_official(
    header: RecordHeader,
    entry: ManifestEntry,
    prompt: str,
    prompt_tokens: int,
    top_logprobs: int,
    steps: tuple[VectorStep, ...],
) -> bytes:
    """A record in the official layout, for vectors made from a local model."""

    def token(t: VectorToken) -> dict[str, object]:
        return {"text": t.text, "bytes": list(t.raw)}

    content = b"".join(s.token.raw for s in steps).decode("utf-8", errors="replace")
    body = {
        "schema": OFFICIAL_SCHEMA,
        "source": header.source,
        "model": header.model,
        "endpoint": header.endpoint,
        "created_at": header.created_at,
        "id": entry.id,
        "kind": entry.kind,
        "prompt": prompt,
        "request": {
            "model": header.model,
            "temperature": 0,
            "max_tokens": len(steps),
            "logprobs": True,
            "top_logprobs": top_logprobs,
            "thinking": {"type": "disabled"},
            "messages": [{"role": "user", "content": prompt}],
        },
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": len(steps),
            "total_tokens": prompt_tokens + len(steps),
        },
        "finish_reason": "length",
        "message": {"role": "assistant", "content": content},
        "logits_available": False,
        "steps": [
            {
                "step": s.index,
                "token": token(s.token),
                "logprob": s.logprob,
                "top_logprobs": [
                    {"token": token(a.token), "logprob": a.logprob} for a in s.alternatives
                ],
            }
            for s in steps
        ],
    }
    return (json.dumps(body, indent=2, ensure_ascii=False) + "\n").encode()


# --- vec file ---
# official.vec: the compact line form of the vectors, and the one file that gives each
# case's session size (docs/test-vectors.md "Files").
#
#     case <id> <ctx> <steps> <prompt-file>
#     step <index> <selected-token-hex> <top-count>
#     top <token-hex> <logprob %.9g>            (top-count lines)
#     end
#
# ASCII; `#` comments and blank lines are ignored. Hex is the lowercase hex of the
# token's UTF-8 bytes. A `top` line lists only alternatives the source ranked (logprob
# above -1000) with non-empty bytes.

VEC_FILE = "official.vec"
MIN_CTX = 2
MAX_CTX = 1 << 20  # DeepSeek V4's context window (docs/reference/model.md §1.1)

_HEX = re.compile(r"(?:[0-9a-f]{2})+")


@dataclass(frozen=True)
class VecStep:
    index: int
    selected: bytes
    tops: tuple[tuple[bytes, float], ...]


@dataclass(frozen=True)
class VecCase:
    id: str
    ctx: int
    prompt_file: str
    steps: tuple[VecStep, ...]


class _Lines:
    def __init__(self, raw: bytes, where: str) -> None:
        try:
            text = raw.decode("ascii")
        except UnicodeDecodeError as exc:
            raise VectorFileError(f"{where}: not ASCII (byte {exc.start})") from None
        self.where = where
        self._rows = [
            (number, line.split())
            for number, line in enumerate(text.splitlines(), start=1)
            if line.strip() and not line.lstrip().startswith("#")
        ]
        self._next = 0
        self.number = 0

    def fail(self, problem: str) -> VectorFileError:
        return VectorFileError(f"{self.where} line {self.number}: {problem}")

    def more(self) -> bool:
        return self._next < len(self._rows)

    def take(self, keyword: str, fields: int) -> list[str]:
        if not self.more():
            raise VectorFileError(f"{self.where}: ends inside a case (expected {keyword!r})")
        self.number, words = self._rows[self._next]
        self._next += 1
        if not words or words[0] != keyword:
            raise self.fail(f"expected {keyword!r}, found {' '.join(words)[:60]!r}")
        if len(words) != fields + 1:
            raise self.fail(f"{keyword!r} takes {fields} fields, found {len(words) - 1}")
        return words[1:]

    def integer(self, text: str, what: str, low: int, high: int) -> int:
        if not text.isdigit() or not low <= int(text) <= high:
            raise self.fail(f"{what} {text!r} is not an integer in {low}..{high}")
        return int(text)

    def hex_bytes(self, text: str) -> bytes:
        if not _HEX.fullmatch(text):
            raise self.fail(f"{text[:40]!r} is not lowercase hex of whole bytes")
        if len(text) // 2 > MAX_TOKEN_BYTES:
            raise self.fail(f"a token of {len(text) // 2} bytes (at most {MAX_TOKEN_BYTES})")
        return bytes.fromhex(text)

    def logprob(self, text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise self.fail(f"{text!r} is not a number") from None
        if not math.isfinite(value) or value > 0:
            raise self.fail(f"logprob {text} is not a finite number <= 0")
        return value


def parse_vec(raw: bytes, where: str = VEC_FILE) -> dict[str, VecCase]:
    lines = _Lines(raw, where)
    cases: dict[str, VecCase] = {}
    while lines.more():
        case_id, ctx, count, prompt_file = lines.take("case", 4)
        if case_id in cases:
            raise lines.fail(f"case {case_id!r} appears twice")
        ctx_value = lines.integer(ctx, "ctx", MIN_CTX, MAX_CTX)
        steps = tuple(
            _vec_step(lines, index) for index in range(lines.integer(count, "steps", 1, MAX_STEPS))
        )
        lines.take("end", 0)
        cases[case_id] = VecCase(case_id, ctx_value, prompt_file, steps)
    if not cases:
        raise VectorFileError(f"{where}: holds no case")
    return cases


def _vec_step(lines: _Lines, index: int) -> VecStep:
    number, selected, count = lines.take("step", 3)
    if number != str(index):
        raise lines.fail(f"step index {number!r}, expected {index}")
    chosen = lines.hex_bytes(selected)
    tops = []
    for _ in range(lines.integer(count, "top count", 0, MAX_TOPS)):
        token, logprob = lines.take("top", 2)
        tops.append((lines.hex_bytes(token), lines.logprob(logprob)))
    return VecStep(index, chosen, tuple(tops))


def render_vec(cases: list[VectorCase], prompt_prefix: str = "") -> bytes:
    """The file for these cases; prompt paths are written as `<prompt_prefix><prompt_file>`
    (the official file names them from the repository root: `tests/test-vectors/`)."""
    out = [
        "# ds4-official-logprob-vectors-v1",
        "# case <id> <ctx> <steps> <prompt-file>",
        "# step <index> <selected-hex> <top-count>",
        "# top <token-hex> <official-logprob>",
    ]
    for case in cases:
        out += [
            "",
            f"case {case.id} {case.ctx} {len(case.steps)} {prompt_prefix}{case.prompt_file}",
        ]
        for step in case.steps:
            tops = step.compared
            out.append(f"step {step.index} {step.token.raw.hex()} {len(tops)}")
            out += [f"top {a.token.raw.hex()} {a.logprob:.9g}" for a in tops]
        out.append("end")
    return ("\n".join(out) + "\n").encode("ascii")


# --- vector set ---
# A vector directory read as data: manifest.json, official.vec, the prompts and the
# official records, each checked on its own and against the others.
#
# Files are read through `read(relative_path) -> bytes`, so this stays free of I/O;
# the caller's reader names a missing file.

Reader = Callable[[str], bytes]


def read_vector_set(read: Reader, only: frozenset[str] | None = None) -> VectorSet:
    """Every case of the directory, or those named in `only` (all must exist)."""
    manifest = parse_manifest(read(MANIFEST))
    vec = parse_vec(read(VEC_FILE))
    listed = [e.id for e in manifest.entries]
    extra = sorted(set(vec) - set(listed))
    if extra:
        raise VectorFileError(f"{VEC_FILE}: case {extra[0]!r} is not in {MANIFEST}")
    unknown = sorted((only or frozenset()) - set(listed))
    if unknown:
        raise VectorFileError(f"no case {unknown[0]!r} in {MANIFEST} (cases: {', '.join(listed)})")
    cases = tuple(
        _case(entry, vec, read, manifest.top_logprobs)
        for entry in manifest.entries
        if only is None or entry.id in only
    )
    return VectorSet(
        source=manifest.source,
        model=manifest.model,
        endpoint=manifest.endpoint,
        top_logprobs=manifest.top_logprobs,
        max_tokens=manifest.max_tokens,
        cases=cases,
    )


def _case(entry: ManifestEntry, vec: dict[str, VecCase], read: Reader, top: int) -> VectorCase:
    prompt = _prompt(read(entry.prompt_file), entry)
    record = parse_official(read(entry.official_file), entry.official_file, entry, prompt, top)
    line = vec.get(entry.id)
    if line is None:
        raise VectorFileError(f"{VEC_FILE}: no case {entry.id!r} (it gives the session size)")
    _agree(line, entry, record.steps)
    return VectorCase(
        id=entry.id,
        kind=entry.kind,
        prompt=prompt,
        ctx=line.ctx,
        steps=record.steps,
        prompt_file=entry.prompt_file,
        official_file=entry.official_file,
        prompt_tokens=record.prompt_tokens,
    )


def _prompt(raw: bytes, entry: ManifestEntry) -> str:
    try:
        prompt = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise VectorFileError(f"{entry.prompt_file}: not UTF-8 (byte {exc.start})") from None
    if len(prompt) != entry.prompt_chars:
        raise VectorFileError(
            f"{entry.prompt_file}: {len(prompt)} characters, {MANIFEST} says {entry.prompt_chars}"
        )
    return prompt


def _agree(line: VecCase, entry: ManifestEntry, steps: tuple[VectorStep, ...]) -> None:
    """official.vec must say what the JSON record says."""
    where = f"{VEC_FILE} case {entry.id}"
    if not line.prompt_file.endswith("/" + entry.prompt_file) and line.prompt_file != (
        entry.prompt_file
    ):
        raise VectorFileError(
            f"{where}: prompt file {line.prompt_file!r} is not {entry.prompt_file}"
        )
    if len(line.steps) != len(steps):
        raise VectorFileError(
            f"{where}: {len(line.steps)} steps, {entry.official_file} has {len(steps)}"
        )
    for short, step in zip(line.steps, steps, strict=True):
        if short.selected != step.token.raw:
            raise VectorFileError(
                f"{where} step {step.index}: selected token {short.selected.hex()} is not "
                f"{step.token.raw.hex()} of {entry.official_file}"
            )
        compared = [(a.token.raw, a.logprob) for a in step.compared]
        same = len(compared) == len(short.tops) and all(
            a == b and math.isclose(x, y, rel_tol=1e-6, abs_tol=1e-6)
            for (a, x), (b, y) in zip(compared, short.tops, strict=True)
        )
        if not same:
            raise VectorFileError(
                f"{where} step {step.index}: its top lines are not the ranked alternatives "
                f"of {entry.official_file}"
            )
