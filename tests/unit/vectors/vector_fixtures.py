"""An in-memory vector directory built with the domain's own writers, for parser and
use-case tests (no files)."""

from __future__ import annotations

from collections.abc import Callable

from ds4.domain.vectors.files import VEC_FILE, RecordHeader, render_official, render_vec
from ds4.domain.vectors.records import (
    MANIFEST,
    Alternative,
    Manifest,
    ManifestEntry,
    VectorCase,
    VectorFileError,
    VectorStep,
    VectorToken,
    render_manifest,
)

HEADER = RecordHeader("unit test", "toy", "memory", "2026-01-01T00:00:00Z")


def token(text: str) -> VectorToken:
    return VectorToken(text.encode(), text)


def steps_of(*texts: str) -> tuple[VectorStep, ...]:
    """Greedy steps choosing `texts`, each with itself and one other alternative."""
    return tuple(
        VectorStep(
            i,
            token(t),
            -0.25,
            (
                Alternative(token(t), -0.25),
                Alternative(token("?"), -2.0),
                Alternative(token("!"), -9999.0),
            ),
        )
        for i, t in enumerate(texts)
    )


def vector_files(
    cases: dict[str, tuple[str, tuple[VectorStep, ...]]], ctx: int = 64
) -> dict[str, bytes]:
    """id -> (prompt, steps) as the files of a vector directory."""
    files: dict[str, bytes] = {}
    entries = []
    written = []
    for case_id, (prompt, steps) in cases.items():
        entry = ManifestEntry(
            case_id, "short", f"prompts/{case_id}.txt", f"official/{case_id}.official.json",
            len(prompt), len(steps),
        )  # fmt: skip
        entries.append(entry)
        files[entry.prompt_file] = prompt.encode()
        files[entry.official_file] = render_official(HEADER, entry, prompt, 7, 20, steps)
        written.append(
            VectorCase(
                case_id, "short", prompt, ctx, steps, entry.prompt_file, entry.official_file, 7
            )
        )
    manifest = Manifest("unit test", "toy", "memory", 20, 4, tuple(entries))
    files[MANIFEST] = render_manifest(manifest)
    files[VEC_FILE] = render_vec(written, "tests/test-vectors/")
    return files


def reader(files: dict[str, bytes]) -> Callable[[str], bytes]:
    def read(path: str) -> bytes:
        if path not in files:
            raise VectorFileError(f"{path}: no such file")
        return files[path]

    return read
