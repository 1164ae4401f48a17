"""The command line's shared vocabulary: argparse `type=` checks, the help formatter
every command uses, the whole-file text read of prompt and score files, and the
progress bar every command draws.

A bad flag value is one usage line naming the flag (argparse adds `argument --flag:`),
exit 2, before anything is loaded.

Nothing is clamped or fixed up: a value outside its documented range is refused
(issue 14 item 9; docs/adr/0044-server-exposure-and-limits.md).
"""

from __future__ import annotations

import argparse
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Never

if TYPE_CHECKING:
    from tqdm import tqdm

from ds4.domain.errors import Ds4Error

INT_MAX = 2**31 - 1  # what the API layer clamps JSON integers to (docs/reference/server.md §2.3)
MAX_CTX = 1 << 20  # DeepSeek V4's context window, 1M tokens (docs/reference/model.md §1.1)
MAX_THREADS = 1024
SEED_MAX = 2**64 - 1  # seeds are u64 (docs/reference/server.md §4.7)


def host(text: str) -> str:
    """A bind address: a name or IP literal (an empty one would bind every interface)."""
    if not text or text != text.strip() or any(c.isspace() for c in text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a host name or address (0.0.0.0 listens on every interface)"
        )
    return text


def api_key(text: str) -> str:
    """A key a client can send in a header: not empty, no control characters, no
    surrounding whitespace (HTTP strips it, so such a key could never match)."""
    if not text:
        raise argparse.ArgumentTypeError("an empty key would turn authentication off")
    if text != text.strip() or any(ord(c) < 0x20 or ord(c) == 0x7F for c in text):
        raise argparse.ArgumentTypeError(
            "the key has surrounding whitespace or control characters, which no HTTP "
            "header can carry"
        )
    return text


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An integer in low..high (both included)."""

    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not in {low}..{high}")
        return value

    parse.__name__ = f"integer in {low}..{high}"
    return parse


def float_in(low: float, high: float) -> Callable[[str], float]:
    """A finite number in low..high (both included)."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not low <= value <= high:  # also refuses nan; inf is out of any range here
            raise argparse.ArgumentTypeError(f"{text} is not in {low:g}..{high:g}")
        return value

    parse.__name__ = f"number in {low:g}..{high:g}"
    return parse


def _named(text: str) -> Path:
    if not text:
        raise argparse.ArgumentTypeError("an empty path names no file")
    return Path(text)


def model_file(text: str) -> str:
    """An existing regular file: models are memory-mapped, and mapping a FIFO or a
    device would hang or fail deep in the loader."""
    problem = model_file_problem(_named(text))
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text


def model_file_problem(path: Path) -> str | None:
    """Why `path` cannot be a model file, or None (also for $DS4_MODEL's value)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return f"{path}: no such file (a small test model: ds4 gguf tiny --out FILE)"
    except OSError as error:
        return f"{path}: {(error.strerror or str(error)).lower()}"
    if not stat.S_ISREG(mode):
        return f"{path} is not a regular file ({_kind(mode)})"
    return None


def input_file(text: str) -> str:
    """An existing file that is read from start to end; a FIFO is fine here (process
    substitution, `--prompt-file <(...)`), a directory is not."""
    path = _named(text)
    try:
        mode = path.stat().st_mode
    except OSError as error:
        reason = (error.strerror or str(error)).lower()
        raise argparse.ArgumentTypeError(f"{path}: {reason}") from None
    if stat.S_ISDIR(mode):
        raise argparse.ArgumentTypeError(f"{path} is a directory")
    return text


def output_file(text: str) -> str:
    """A file to (over)write: not a directory, in a directory that exists (nothing is
    created on the way)."""
    path = _named(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} is a directory")
    _check_parent(path)
    return text


def output_dir(text: str) -> str:
    """A directory that exists, or one to create in a parent that exists."""
    path = _named(text)
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{path} exists and is not a directory")
    if not path.exists():
        _check_parent(path)
    return text


def existing_dir(text: str) -> str:
    path = _named(text)
    if not path.is_dir():
        reason = "does not exist" if not path.exists() else "is not a directory"
        raise argparse.ArgumentTypeError(f"{path} {reason}")
    return text


def _check_parent(path: Path) -> None:
    parent = path.absolute().parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(
            f"{path}: directory {parent} does not exist (it is not created)"
        )


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a file"


# ---- help format ----------------------------------------------------------------------
# argparse help that always states each flag's default, once.


class DefaultsHelpFormatter(argparse.HelpFormatter):
    """Append "(default: X)" unless the help text already says what the default is."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "(default" in text or action.default is argparse.SUPPRESS:
            return text
        if action.option_strings or action.nargs in (argparse.OPTIONAL, argparse.ZERO_OR_MORE):
            if action.default is None or action.default is False:
                return text
            return f"{text} (default: %(default)s)"
        return text


# ---- text files -----------------------------------------------------------------------
# A text file a command reads whole (prompts, score tables): its bytes decoded as UTF-8
# exactly as stored (CR/LF kept), or one Ds4Error line naming the file and the problem.


def read_utf8(path: str | Path, what: str = "") -> str:
    """The file's text; `what` ("prompt file") prefixes the path in the error."""
    named = f"{what} {path}" if what else str(path)
    try:
        return Path(path).read_bytes().decode("utf-8")
    except OSError as exc:
        raise Ds4Error(f"cannot read {named}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise Ds4Error(f"{named} is not UTF-8 (byte {exc.start})") from None


# ---- progress bars -------------------------------------------------------------------
# One rule for every command's tqdm bar: on stderr, only when stderr is a terminal
# (tqdm's disable=None), never with --quiet, so a redirected or piped stderr gets no
# carriage-return frames.


def progress_bar(
    total: int, *, quiet: bool, desc: str | None = None, unit: str = "it", leave: bool = True
) -> tqdm[Never]:
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=desc,
        unit=unit,
        leave=leave,
        file=sys.stderr,
        disable=True if quiet else None,
    )
