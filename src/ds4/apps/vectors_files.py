"""A vector directory on disk: read it through the domain parsers (errors name the
directory and file), and write a set recorded from a local model, file by file
atomically, the manifest last (docs/test-vectors.md)."""

from __future__ import annotations

import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ds4.apps import wiring
from ds4.domain.vectors.files import (
    VEC_FILE,
    RecordHeader,
    read_vector_set,
    render_official,
    render_vec,
)
from ds4.domain.vectors.records import (
    MANIFEST,
    Manifest,
    ManifestEntry,
    VectorCase,
    VectorFileError,
    VectorSet,
    VectorStep,
    render_manifest,
)

MAX_FILE_BYTES = 256 << 20  # far above any prompt a model's context holds


def load_vectors(directory: str, only: Sequence[str] | None = None) -> VectorSet:
    """The directory's cases (those in `only`, when given), validated."""
    root = Path(directory)
    if not (root / MANIFEST).exists():
        raise VectorFileError(f"{root}: no {MANIFEST} (not a test-vector directory)")

    def read(relative: str) -> bytes:
        return _read(root / relative, relative)

    try:
        return read_vector_set(read, frozenset(only) if only else None)
    except VectorFileError as exc:
        raise VectorFileError(f"{root}: {exc}") from None


def _read(path: Path, name: str) -> bytes:
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise VectorFileError(f"{name}: not a regular file")
        if info.st_size > MAX_FILE_BYTES:
            raise VectorFileError(f"{name}: {info.st_size} bytes, more than a vector file holds")
        return path.read_bytes()
    except FileNotFoundError:
        raise VectorFileError(f"{name}: no such file") from None
    except OSError as exc:
        raise VectorFileError(f"{name}: {(exc.strerror or str(exc)).lower()}") from None


@dataclass(frozen=True)
class RecordedCase:
    case: VectorCase  # the case it was recorded for (prompt, kind, ctx)
    prompt_tokens: int
    steps: tuple[VectorStep, ...]


def write_vectors(
    directory: str, header: RecordHeader, top_logprobs: int, recorded: Sequence[RecordedCase]
) -> Path:
    """manifest.json, official.vec, prompts/ and official/ for the recorded cases."""
    root = Path(directory)
    entries = []
    written = []
    for item in recorded:
        case = item.case
        entry = ManifestEntry(
            id=case.id,
            kind=case.kind,
            prompt_file=f"prompts/{case.id}.txt",
            official_file=f"official/{case.id}.official.json",
            prompt_chars=len(case.prompt),
            steps=len(item.steps),
        )
        record = render_official(
            header, entry, case.prompt, item.prompt_tokens, top_logprobs, item.steps
        )
        _write(root / entry.prompt_file, case.prompt.encode("utf-8"))
        _write(root / entry.official_file, record)
        entries.append(entry)
        written.append(
            VectorCase(
                case.id,
                case.kind,
                case.prompt,
                case.ctx,
                item.steps,
                entry.prompt_file,
                entry.official_file,
                item.prompt_tokens,
            )
        )
    manifest = Manifest(
        source=header.source,
        model=header.model,
        endpoint=header.endpoint,
        top_logprobs=top_logprobs,
        max_tokens=max(len(item.steps) for item in recorded),
        entries=tuple(entries),
    )
    _write(root / VEC_FILE, render_vec(written))
    _write(root / MANIFEST, render_manifest(manifest))
    return root


def _write(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with wiring.atomic_write(path) as handle:
            handle.write(data)
    except OSError as exc:
        raise VectorFileError(f"cannot write {path}: {exc.strerror or exc}") from None
