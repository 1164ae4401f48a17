"""A text file a command reads whole (prompts, score tables): its bytes decoded as UTF-8
exactly as stored (CR/LF kept), or one Ds4Error line naming the file and the problem."""

from __future__ import annotations

from pathlib import Path

from ds4.domain.errors import Ds4Error


def read_utf8(path: str | Path, what: str = "") -> str:
    """The file's text; `what` ("prompt file") prefixes the path in the error."""
    named = f"{what} {path}" if what else str(path)
    try:
        return Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise Ds4Error(f"cannot read {named}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise Ds4Error(f"{named} is not UTF-8 (byte {exc.start})") from None
