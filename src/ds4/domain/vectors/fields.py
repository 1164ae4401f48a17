"""Typed reads of JSON values with errors that name the file and the field path
(`official/x.official.json: steps[2].token.bytes: ...`)."""

from __future__ import annotations

import json
import math
from typing import Any

from ds4.domain.errors import Ds4Error


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
