"""manifest.json: which cases a vector directory holds and where their files are."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ds4.domain.vectors.fields import Fields, load_json
from ds4.domain.vectors.records import MAX_STEPS, MAX_TOP_LOGPROBS

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
