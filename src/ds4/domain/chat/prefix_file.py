"""`--prefix-file`: a conversation prefix of complete `USER:`/`ASSISTANT:` turns,
rendered before the live conversation (docs/reference/cli-and-bench.md §1.1).

    USER: You are a calculator that always answers directly.
    ASSISTANT: 6*7 = 42

A turn starts at the beginning of a line with `USER:` or `ASSISTANT:` (exactly), one
space or tab after the marker is skipped, and its text runs to the next marker line
or the end of the file, less one trailing newline (and a carriage return before it).
Turns alternate from USER and end with ASSISTANT; none is empty. A UTF-8 BOM is
skipped; a NUL byte, an empty file or text that is not UTF-8 is an error.
"""

from __future__ import annotations

from ds4.domain.chat.messages import AssistantMessage, Message, UserMessage
from ds4.domain.errors import Ds4Error

_BOM = b"\xef\xbb\xbf"
_MARKERS = ("USER:", "ASSISTANT:")

PrefixTurn = UserMessage | AssistantMessage


def parse_prefix_file(data: bytes, path: str) -> tuple[PrefixTurn, ...]:
    """The turns of a prefix file's bytes; Ds4Error `<path>: <problem>` otherwise."""

    def fail(problem: str) -> Ds4Error:
        return Ds4Error(f"{path}: {problem}")

    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    nul = data.find(b"\0")
    if nul >= 0:
        raise fail(f"NUL byte at offset {nul}")
    if not data:
        raise fail("the prefix file is empty")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise fail(f"not UTF-8 (byte {exc.start})") from None
    turns: list[tuple[str, int, list[str]]] = []  # (marker, line number, text lines)
    for number, line in enumerate(text.split("\n"), start=1):
        marker = next((m for m in _MARKERS if line.startswith(m)), None)
        if marker is None:
            if not turns:
                raise fail(f"line {number} must start with USER: or ASSISTANT:")
            turns[-1][2].append(line)
            continue
        expected = _MARKERS[len(turns) % 2]
        if marker != expected:
            raise fail(f"line {number}: expected {expected}")
        rest = line[len(marker) :]
        if rest[:1] in (" ", "\t"):
            rest = rest[1:]
        turns.append((marker, number, [rest]))
    if turns[-1][0] != "ASSISTANT:":
        raise fail("prefix file must end with an ASSISTANT turn")
    out: list[PrefixTurn] = []
    for i, (marker, number, lines) in enumerate(turns):
        # the text up to the next marker line (its newline included), less one newline
        content = "\n".join(lines) + ("\n" if i + 1 < len(turns) else "")
        if content.endswith("\n"):
            content = content[:-1]
            if content.endswith("\r"):
                content = content[:-1]
        if not content:
            raise fail(f"line {number} has an empty {marker[:-1]} turn")
        out.append(UserMessage(content) if marker == "USER:" else AssistantMessage(content))
    return tuple(out)


def with_prefix(
    messages: tuple[Message, ...], prefix: tuple[PrefixTurn, ...]
) -> tuple[Message, ...]:
    """The prefix turns before a conversation (system texts are hoisted wherever they
    are, so they stay first in the rendered prompt)."""
    return (*prefix, *messages) if prefix and messages else messages
