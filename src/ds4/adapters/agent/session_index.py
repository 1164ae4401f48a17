"""The SessionIndex port: one `<session id>.json` record per saved session in a
private directory (created 0700), each written atomically."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

from ds4.adapters.files import atomic_write
from ds4.domain.agent.session_meta import SessionRecord
from ds4.domain.errors import Ds4Error

_HEX = frozenset("0123456789abcdef")
_FIELDS = {f.name: f.type for f in dataclasses.fields(SessionRecord)}


def _record(data: object) -> SessionRecord | None:
    if not isinstance(data, dict) or set(data) != set(_FIELDS):
        return None
    for name, kind in _FIELDS.items():
        expected = str if kind == "str" else int
        value = data[name]
        if not isinstance(value, expected) or isinstance(value, bool):
            return None
    return SessionRecord(**data)


class JsonSessionIndex:
    def __init__(self, directory: str | os.PathLike[str]) -> None:
        self._dir = Path(directory)
        try:
            self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        except OSError as exc:
            raise Ds4Error(f"cannot create session directory {self._dir}: {exc.strerror}") from None

    def _path(self, session_id: str) -> Path:
        if len(session_id) != 40 or not set(session_id) <= _HEX:
            raise Ds4Error(f"invalid session id {session_id!r}")
        return self._dir / f"{session_id}.json"

    def records(self) -> list[SessionRecord]:
        found = []
        for path in sorted(self._dir.glob("*.json")):
            name = path.stem
            if len(name) != 40 or not set(name) <= _HEX or path.is_symlink():
                continue
            try:
                record = _record(json.loads(path.read_text(encoding="utf-8")))
            except (OSError, ValueError):
                continue
            if record is not None and record.id == name:
                found.append(record)
        return found

    def put(self, record: SessionRecord) -> None:
        body = json.dumps(dataclasses.asdict(record), indent=1, ensure_ascii=False) + "\n"
        with atomic_write(self._path(record.id)) as handle:
            handle.write(body.encode("utf-8"))

    def remove(self, session_id: str) -> None:
        self._path(session_id).unlink(missing_ok=True)
