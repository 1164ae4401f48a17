"""A vector directory read as data: manifest.json, official.vec, the prompts and the
official records, each checked on its own and against the others.

Files are read through `read(relative_path) -> bytes`, so this stays free of I/O;
the caller's reader names a missing file.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ds4.domain.vectors.fields import VectorFileError
from ds4.domain.vectors.manifest import MANIFEST, ManifestEntry, parse_manifest
from ds4.domain.vectors.official_json import parse_official
from ds4.domain.vectors.records import VectorCase, VectorSet, VectorStep
from ds4.domain.vectors.vec_file import VEC_FILE, VecCase, parse_vec

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
