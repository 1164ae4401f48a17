"""The server's log formats: text with key=value fields, JSON with stable names; and
one handler however often the setup runs."""

from __future__ import annotations

import io
import json
import logging
import sys
from collections.abc import Iterator

import pytest

from ds4.apps.server_logging import JsonFormatter, TextFormatter, configure_server_logging

FIELDS = {"method": "GET", "path": "/health", "status": 200, "ttft_s": None, "api": "health"}


def record(message: str, fields: dict[str, object] | None = None) -> logging.LogRecord:
    entry = logging.LogRecord("ds4.access", logging.INFO, __file__, 1, message, None, None)
    entry.created = 1_767_225_600.25  # 2026-01-01T00:00:00.250Z
    if fields is not None:
        entry.fields = fields
    return entry


def test_text_lines_name_the_fields_that_apply() -> None:
    line = TextFormatter().format(record("access", FIELDS))
    assert line == "ds4 server: access method=GET path=/health status=200 api=health"


def test_text_values_a_client_controls_cannot_break_the_line() -> None:
    fields: dict[str, object] = {
        "path": '/x\nds4 server: access status=200 a="b"',
        "client": "[::1]:5",
    }
    line = TextFormatter().format(record("access", fields))
    assert "\n" not in line
    assert line == (
        'ds4 server: access path="/x\\nds4 server: access status=200 a=\\"b\\"" client=[::1]:5'
    )


def test_json_lines_carry_time_level_logger_message_and_every_field() -> None:
    line = JsonFormatter().format(record("access", FIELDS))
    assert json.loads(line) == {
        "time": "2026-01-01T00:00:00.250Z",
        "level": "info",
        "logger": "ds4.access",
        "message": "access",
        **FIELDS,  # null where it does not apply, so every access line has every name
    }
    plain = json.loads(JsonFormatter().format(record("kv cache stored reason=cold")))
    assert set(plain) == {"time", "level", "logger", "message"}


def test_json_lines_keep_a_traceback_on_the_same_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        entry = record("job crashed")
        entry.exc_info = sys.exc_info()
    line = JsonFormatter().format(entry)
    assert "\n" not in line and "ValueError: boom" in json.loads(line)["exception"]


@pytest.fixture
def restored_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {name: logging.getLogger(name).level for name in ("ds4.access", "ds4.kvcache")}
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, saved in levels.items():
        logging.getLogger(name).setLevel(saved)


@pytest.mark.usefixtures("restored_logging")
def test_one_handler_takes_every_line_once_even_when_set_up_twice() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_server_logging("text", first)
    configure_server_logging("json", second)
    logging.getLogger("ds4.kvcache").info("kv cache stored reason=cold")
    logging.getLogger("ds4.server").info("not shown: the server logs from WARNING")
    logging.getLogger("a.library").warning("its own warning")  # as uvicorn's errors are
    assert first.getvalue() == ""
    lines = [json.loads(line) for line in second.getvalue().splitlines()]
    assert [(e["logger"], e["message"]) for e in lines] == [
        ("ds4.kvcache", "kv cache stored reason=cold"),
        ("a.library", "its own warning"),
    ]
