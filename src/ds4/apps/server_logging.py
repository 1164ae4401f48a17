"""Where `ds4 server` writes its log lines, and how (docs/adr/0046-observability.md).

One handler, on the root logger, takes every line: the access line of each request
(`ds4.access`), KV cache decisions (`ds4.kvcache`), the server's warnings
(`ds4.server`), uvicorn's own warnings and errors, and anything else a library logs.
Nothing else adds a handler (Litestar's and uvicorn's logging setups are off), so no
line is printed twice.

`text`: `ds4 server: MESSAGE k=v ...`, the fields of an access line by name, those
that do not apply left out. `json`: one object per line with `time` (UTC, ISO 8601),
`level`, `logger`, `message` and, on an access line, every field, null where it does
not apply; `exception` when a traceback belongs to the line.

Also the line writers the server's graph hands its parts (server_bootstrap.py): the
--trace file's, each slot's tagged lines, the KV cache's and the warnings'.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TextIO

kv_log = logging.getLogger("ds4.kvcache")
server_log = logging.getLogger("ds4.server")
Log = Callable[[str], None]

LOG_FORMATS = ("text", "json")
PREFIX = "ds4 server: "
# A text value that needs quoting: empty, or with a space, quote, `=` or a control
# character (a request path is the client's: `%0A` must not start a forged line).
_NEEDS_QUOTES = re.compile(r'^$|[\s"=\x00-\x1f\x7f]')


def _fields(record: logging.LogRecord) -> dict[str, object]:
    fields = getattr(record, "fields", None)
    return fields if isinstance(fields, dict) else {}


def _text_value(value: object) -> str:
    text = str(value)
    return json.dumps(text) if _NEEDS_QUOTES.search(text) else text


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = PREFIX + record.getMessage()
        line += "".join(
            f" {name}={_text_value(value)}"
            for name, value in _fields(record).items()
            if value is not None
        )
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created, UTC)
        entry: dict[str, object] = {
            "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(_fields(record))
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)  # ASCII only: control characters and all are escaped


class _ServerHandler(logging.StreamHandler[TextIO]):
    """Marks the one handler this module installs, so a second call replaces it."""


def configure_server_logging(log_format: str, stream: TextIO | None = None) -> None:
    """Send every log line to `stream` (stderr) in `log_format`: access lines and KV
    cache decisions at INFO, everything else from WARNING."""
    handler = _ServerHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if log_format == "json" else TextFormatter())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _ServerHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(logging.WARNING)
    for name in ("ds4.access", "ds4.kvcache"):
        logging.getLogger(name).setLevel(logging.INFO)


# ---- the line writers of the server's parts ----------------------------------------


def placement_log(line: str) -> None:
    """Where each distributed layer range runs, once at start (stderr)."""
    print(f"ds4 server: distributed {line}", file=sys.stderr)


def trace_writer(trace: TextIO | None) -> Log:
    """The --trace file's writer (a no-op without one)."""
    lock = threading.Lock()  # whole lines, also from several slots

    def write_trace(line: str) -> None:
        if trace is not None:
            with lock:
                trace.write(line + "\n")
                trace.flush()

    return write_trace


def tagged(write: Log, tag: str) -> Log:
    """Each slot's trace lines start with its tag (the first line of an entry)."""

    def write_tagged(line: str) -> None:
        write(tag + line)

    return write_tagged


def kv_trace_log(write_trace: Log) -> Log:
    """KV cache lines go to the `ds4.kvcache` logger and the trace."""

    def log(line: str) -> None:
        kv_log.info(line)
        write_trace(line)

    return log


def server_warning(tag: str) -> Log:
    """A slot's warnings, on the `ds4.server` logger with its tag."""

    def warn(line: str) -> None:
        server_log.warning("%s%s", tag, line)

    return warn
