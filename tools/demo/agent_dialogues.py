"""Synthetic `ds4 agent` turns: the agent's real system prompt and tool set, one user
request naming a path (and a text), one tool call that copies them, the tool's real
result text, a short final answer (docs/demo-model.md "The agent fine-tune").

The token ids are built the way the agent builds its transcript
(domain/agent/core.py, turn_loop.py, transcript.py): `system_head` with the agent's
tool schemas (with and without `visit_page`, the default offers it), the date note the
agent sends once, `user_turn`, the assistant prefix, then what the model should
generate (`</think>` in thinking mode, the DSML block from `render_tool_calls`, EOS),
the result as `tool_turn(combined_results(...))`, and the answer round. Only the
generated pieces carry loss.

Paths and texts are drawn at random from Italian words of the novel, a list of English
words, digits and extensions, so no request repeats: the only way to get the call right
is to copy from the request. A prefix draw keeps only the last tokens of the system
prompt (after BOS): the request and the call lie inside the 128-token sliding window
either way, so these short examples teach the copy cheaply; full-prompt examples teach
it at the real positions. The acceptance requests of docs/agent.md (`hello.txt`, `ciao
dal lago`, `hello from the lake`) are never generated: HELD_OUT_TEXTS.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np

from ds4.domain.agent.file_tools import (
    apply_edit,
    edit_report,
    list_report,
    read_chunk,
    select_span,
)
from ds4.domain.agent.tool_catalog import agent_tool_schemas
from ds4.domain.agent.toolbox import status_lines
from ds4.domain.agent.transcript import (
    combined_results,
    datetime_note,
    system_head,
    tool_turn,
    user_turn,
)
from ds4.domain.chat import ASSISTANT, EOS, THINK, UNTHINK, ThinkMode
from ds4.domain.dsml.syntax import ToolCall, render_tool_calls
from ds4.ports.agent import DirEntry, EntryKind, JobSnapshot
from ds4.ports.tokenizer import Tokenizer
from tools.demo.chat_examples import Example

HELD_OUT_TEXTS = frozenset({"hello.txt", "ciao dal lago", "hello from the lake"})

_ENGLISH_TEXT = (
    "apple river stone house light green blue red yellow black white north south east "
    "west water fire earth wind cloud rain snow summer winter spring autumn morning "
    "evening night day week year month road bridge tower garden forest mountain valley "
    "island boat ship train letter book page story song music dance table chair window "
    "door key lamp bread milk cheese wine coffee tea sugar salt honey orange lemon cherry "
    "plum grape horse dog cat bird fish mouse lion wolf bear fox owl friend mother father "
    "sister brother child king queen teacher doctor farmer baker painter sailor hello "
    "world good bad big small old new happy quiet fast slow warm cold early late first "
    "last next open close read write list edit run test build data notes todo report "
    "draft config main app index readme hello goodbye thanks please yes today tomorrow "
    "from the lake sea sun moon star sky field hill village city street market school "
    "office kitchen bedroom paper pencil color number value name file folder line word "
    "text message note plan idea dream"
)
ENGLISH = _ENGLISH_TEXT.split()
_EXTS = (".txt", ".txt", ".txt", ".md", ".md", ".py", ".json", ".csv", ".log", ".sh", ".cfg")
_DIRS = ("docs", "notes", "src", "data", "tmp", "testi", "note", "lavoro", "appunti", "out")
FILE_KIND = cast(EntryKind, "f")
_ITALIAN_WORD = re.compile(r"^[a-zàèéìòù]{3,10}$")


def italian_words(texts: Sequence[str]) -> list[str]:
    """The lowercase words of the novel's training text (3-10 letters), sorted."""
    seen: set[str] = set()
    for text in texts:
        for raw in text.lower().split():
            word = raw.strip(".,;:!?«»\"'()-")
            if _ITALIAN_WORD.match(word):
                seen.add(word)
    return sorted(seen)


@dataclass(frozen=True)
class Words:
    italian: list[str]
    english: list[str]

    def word(self, rng: np.random.Generator, lang: str) -> str:
        pool = self.italian if lang == "it" else self.english
        return pool[int(rng.integers(len(pool)))]


def _stem(words: Words, rng: np.random.Generator, lang: str) -> str:
    parts = [words.word(rng, lang) for _ in range(1 + int(rng.random() < 0.3))]
    stem = str(rng.choice(["_", "-"])).join(parts)
    if rng.random() < 0.3:
        stem += f"{rng.choice(['_', '', '-'])}{int(rng.integers(0, 100))}"
    return stem


def random_dir(words: Words, rng: np.random.Generator, lang: str) -> str:
    if rng.random() < 0.5:
        return str(rng.choice(_DIRS))
    return _stem(words, rng, lang)


def random_path(words: Words, rng: np.random.Generator, lang: str) -> str:
    path = _stem(words, rng, lang) + str(rng.choice(_EXTS))
    if rng.random() < 0.3:
        path = random_dir(words, rng, lang) + "/" + path
    return path


def random_text(words: Words, rng: np.random.Generator, lang: str, longest: int) -> str:
    n = int(rng.integers(1, longest + 1))
    out = [words.word(rng, lang) for _ in range(n)]
    if rng.random() < 0.2:
        out.insert(int(rng.integers(0, n + 1)), str(int(rng.integers(0, 1000))))
    text = " ".join(out)
    if rng.random() < 0.3:
        text = text[0].upper() + text[1:]
    if rng.random() < 0.2:
        text += str(rng.choice([".", "!", "?"]))
    return text


# (Italian, English) request templates per tool; {p} path, {c} text, {o} old, {n} new,
# {d} directory, {x} command.
_WRITE = (
    ("Crea il file {p} con scritto: {c}", "Create the file {p} containing: {c}"),
    ("Crea il file {p} con scritto {c}", "Create the file {p} with the text: {c}"),
    ("Scrivi nel file {p}: {c}", "Write to the file {p}: {c}"),
    ("Crea {p} con il testo: {c}", "Create {p} containing: {c}"),
    ("Salva nel file {p} il testo: {c}", "Save in the file {p} the text: {c}"),
    ("Scrivi un file {p} che contiene: {c}", "Write a file {p} that contains: {c}"),
)
_READ = (
    ("Leggi il file {p}", "Read the file {p}"),
    ("Leggi {p}", "Read {p}"),
    ("Cosa c'è nel file {p}?", "What is in the file {p}?"),
    ("Mostrami il file {p}", "Show me the file {p}"),
)
_LIST = (
    ("Elenca i file in {d}", "List the files in {d}"),
    ("Quali file ci sono nella cartella {d}?", "Which files are in the folder {d}?"),
)
_EDIT = (
    ("Nel file {p} sostituisci {o} con {n}", "In the file {p} replace {o} with {n}"),
    ("Modifica {p}: cambia {o} in {n}", "Edit {p}: change {o} to {n}"),
)
_BASH = (
    ("Esegui il comando: {x}", "Run the command: {x}"),
    ("Lancia {x}", "Run {x}"),
)
_ANSWERS = {
    "write": ("Ho creato il file {p}.", "Created the file {p}."),
    "read": ("Il file {p} contiene: {c}", "The file {p} says: {c}"),
    "list": ("Ecco i file della cartella {d}.", "Here are the files in {d}."),
    "edit": ("Ho modificato il file {p}.", "Edited the file {p}."),
    "bash": ("Il comando è terminato.", "The command finished."),
}


@dataclass(frozen=True)
class Task:
    tool: str
    lang: str
    request: str
    call: ToolCall
    result: str
    answer: str


def _call(name: str, args: dict[str, str]) -> ToolCall:
    return ToolCall(name=name, arguments=json.dumps(args, ensure_ascii=False))


def _pick(templates: Sequence[tuple[str, str]], rng: np.random.Generator, lang: str) -> str:
    pair = templates[int(rng.integers(len(templates)))]
    return pair[0] if lang == "it" else pair[1]


def _answer(tool: str, lang: str, **values: str) -> str:
    pair = _ANSWERS[tool]
    return (pair[0] if lang == "it" else pair[1]).format(**values)


def _lines(words: Words, rng: np.random.Generator, lang: str, longest: int) -> list[str]:
    return [random_text(words, rng, lang, longest) for _ in range(int(rng.integers(1, 4)))]


def task(words: Words, rng: np.random.Generator, longest: int, tool: str | None = None) -> Task:
    """One random request; `longest` bounds the words of each text (the curriculum)."""
    lang = "it" if rng.random() < 0.5 else "en"
    if tool is None:
        tool = str(rng.choice(["write"] * 5 + ["read"] * 2 + ["list", "edit", "bash"]))
    while True:
        p = random_path(words, rng, lang)
        c = random_text(words, rng, lang, longest)
        if p not in HELD_OUT_TEXTS and c not in HELD_OUT_TEXTS:
            break
    if tool == "write":
        request = _pick(_WRITE, rng, lang).format(p=p, c=c)
        call = _call("write", {"path": p, "content": c})
        result = f"Wrote {len(c.encode())} bytes to {p}\n"
        return Task(tool, lang, request, call, result, _answer(tool, lang, p=p))
    if tool == "read":
        lines = _lines(words, rng, lang, longest)
        data = ("\n".join(lines) + "\n").encode()
        text = read_chunk(p, data, start=1, max_lines=500, whole=False, raw=False).text
        request = _pick(_READ, rng, lang).format(p=p)
        answer = _answer(tool, lang, p=p, c=lines[0])
        return Task(tool, lang, request, _call("read", {"path": p}), text, answer)
    if tool == "list":
        d = random_dir(words, rng, lang)
        names = [random_path(words, rng, lang).split("/")[-1] for _ in range(rng.integers(1, 5))]
        # The shipped run's listings show a file as "f"; the real tool prints "-" (a plain
        # file, ports/agent.py EntryKind). Kept as trained so the run reproduces; the
        # next retrain should use FILE_KIND = "-".
        entries = [DirEntry(n, FILE_KIND, int(rng.integers(1, 5000))) for n in names]
        request = _pick(_LIST, rng, lang).format(d=d)
        answer = _answer(tool, lang, d=d)
        return Task(
            tool, lang, request, _call("list", {"path": d}), list_report(d, entries), answer
        )
    if tool == "edit":
        old = words.word(rng, lang)
        new = words.word(rng, lang)
        before = c + " " + old if rng.random() < 0.5 else old + " " + c
        data = (before + "\n").encode()
        if data.count(old.encode()) != 1 or old == new:
            return task(words, rng, longest, tool)
        span = select_span(data, old.encode(), upto=False)
        result = edit_report(p, data, span, apply_edit(data, span, new.encode()))
        request = _pick(_EDIT, rng, lang).format(p=p, o=old, n=new)
        call = _call("edit", {"path": p, "old": old, "new": new})
        return Task(tool, lang, request, call, result, _answer(tool, lang, p=p))
    x = str(rng.choice(["ls", "cat {p}", "wc -l {p}", "echo {c}", "mkdir {d}", "rm {p}"]))
    x = x.format(p=p, c=c, d=random_dir(words, rng, lang))
    output = c + "\n" if x.startswith("echo") else ""
    snap = JobSnapshot(
        job=int(rng.integers(1, 9)), pid=int(rng.integers(1000, 60000)), running=False,
        elapsed=float(rng.integers(0, 30)) / 10, timeout_sec=3600, timed_out=False,
        exit_status=0, output_path="", output_bytes=len(output), output_lines=output.count("\n"),
    )  # fmt: skip
    shown = "<output>\n</output>" if not output else f"<output>\n{output.rstrip()}\n</output>"
    result = status_lines(snap) + "\n" + shown + "\n"
    request = _pick(_BASH, rng, lang).format(x=x)
    return Task("bash", lang, request, _call("bash", {"command": x}), result, _answer("bash", lang))


def local_time(rng: np.random.Generator) -> str:
    """A time as the agent's channel prints it (`%Y-%m-%d %H:%M:%S %Z`)."""
    return (
        f"{rng.integers(2024, 2031)}-{rng.integers(1, 13):02d}-{rng.integers(1, 29):02d} "
        f"{rng.integers(0, 24):02d}:{rng.integers(0, 60):02d}:{rng.integers(0, 60):02d} "
        f"{rng.choice(['UTC', 'CET', 'CEST', 'GMT', 'EST'])}"
    )


class AgentRenderer:
    """Token ids of agent turns, built from the agent's own pieces."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tok = tokenizer
        self.systems: dict[tuple[bool, ThinkMode], list[int]] = {}
        for web in (True, False):
            schemas = agent_tool_schemas(edit_upto=False, web=web)
            for mode in (ThinkMode.HIGH, ThinkMode.NONE):
                text = system_head(schemas, "", mode, edit_upto=False, web=web)
                self.systems[web, mode] = tokenizer.encode(text)

    def render(
        self, t: Task, rng: np.random.Generator, mode: ThinkMode, web: bool, tail: int | None
    ) -> Example:
        """`tail`: keep only the last `tail` system tokens after BOS (None: all)."""
        system = self.systems[web, mode]
        if tail is not None:
            system = system[:1] + system[len(system) - tail :]
        prefix = ASSISTANT + (THINK if mode.thinking else UNTHINK)
        opened = UNTHINK if mode.thinking else ""
        pieces: list[tuple[str, float]] = [
            (datetime_note(local_time(rng)), 0.0),
            (user_turn(t.request) + prefix, 0.0),
            (opened + render_tool_calls((t.call,)) + EOS, 1.0),
            (tool_turn(combined_results([(t.call.name, t.result)])) + prefix, 0.0),
            (opened + t.answer + EOS, 1.0),
        ]
        ids = list(system)
        weights = [0.0] * len(system)
        for text, weight in pieces:
            part = self.tok.encode(text)
            ids += part
            weights += [weight] * len(part)
        w = np.asarray(weights, np.float32)
        return Example(np.asarray(ids, np.int32), w, w > 0)

    def request_ids(self, t: Task, mode: ThinkMode, web: bool, when: str) -> list[int]:
        """The prompt the agent sends for this task's first round (for evaluation)."""
        prefix = ASSISTANT + (THINK if mode.thinking else UNTHINK)
        text = datetime_note(when) + user_turn(t.request) + prefix
        return self.systems[web, mode] + self.tok.encode(text)
