"""Synthetic tool-use dialogues: the user asks for a file, the model calls `read_file`,
the tool answers with a passage of the novel, the model reports what the file says;
one to three such rounds per dialogue (more rounds per rendered tool prompt).

READ_FILE_TOOL is the exact OpenAI `tools` entry the demo requests send (docs/demo-model.md),
so the rendered system text the model trains on is byte for byte the one the server
renders for them. One dialogue in ten offers the tool but asks for a continuation
instead, so offering a tool does not force a call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

from ds4.domain.chat import AssistantMessage, Message, ToolResultMessage, UserMessage
from ds4.domain.dsml.syntax import ToolCall
from tools.demo.corpus import Passage, Piece

READ_FILE_TOOL: dict[str, object] = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Legge un file di testo e ne restituisce il contenuto.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string", "description": "Il percorso del file da leggere."}
            },
            "required": ["path"],
        },
    },
}

_REQUESTS = (
    "Leggi il file {p}.",
    "leggi il file {p}",
    "Puoi leggere {p}?",
    "Apri il file {p} e dimmi cosa c'è scritto.",
    "Cosa contiene il file {p}?",
    "Mostrami il contenuto di {p}.",
    "Per favore, leggi {p}.",
)
_STEMS = (
    "renzo", "lucia", "agnese", "perpetua", "abbondio", "cristoforo", "innominato",
    "gertrude", "rodrigo", "federigo", "griso", "tonio", "gervaso", "menico", "bettina",
    "lago", "como", "lecco", "milano", "bergamo", "monza", "adda", "resegone", "peste",
    "lazzeretto", "osteria", "convento", "castello", "vigna", "capitolo", "lettera",
    "note", "appunti", "diario", "racconto", "storia", "bravi", "matrimonio", "fuga",
    "carestia",
)  # fmt: skip
_DIRS = ("", "", "", "testi/", "note/", "docs/", "capitoli/")
_EXTS = (".txt", ".txt", ".md")


@dataclass(frozen=True)
class Dialogue:
    messages: tuple[Message, ...]
    uses_tool: bool


def file_path(rng: np.random.Generator) -> str:
    stem = str(rng.choice(_STEMS))
    if rng.random() < 0.3:
        stem += f"_{int(rng.integers(1, 39))}"
    return str(rng.choice(_DIRS)) + stem + str(rng.choice(_EXTS))


def read_call(path: str) -> ToolCall:
    return ToolCall(name="read_file", arguments=json.dumps({"path": path}, ensure_ascii=False))


def _file_text(src: list[Piece], rng: np.random.Generator) -> tuple[str, str]:
    """(file contents, its first clause): one to three consecutive clauses of the novel."""
    start = int(rng.integers(0, len(src) - 3))
    run = src[start : start + int(rng.integers(1, 4))]
    return " ".join(p.text for p in run), run[0].text


def _round(src: list[Piece], rng: np.random.Generator, index: int) -> tuple[Message, ...]:
    path = file_path(rng)
    contents, first = _file_text(src, rng)
    request = str(rng.choice(_REQUESTS)).format(p=path)
    return (
        UserMessage(request),
        AssistantMessage(content="", tool_calls=(read_call(path),)),
        ToolResultMessage(contents, tool_call_id=f"call_{index}"),
        AssistantMessage(content=f"Il file {path} contiene questo testo: {first}"),
    )


def dialogue(src: list[Piece], passage: Passage, rng: np.random.Generator) -> Dialogue:
    if rng.random() < 0.1:
        return Dialogue(
            (UserMessage(passage.opening), AssistantMessage(content=passage.continuation)),
            uses_tool=False,
        )
    messages: tuple[Message, ...] = ()
    for index in range(int(rng.integers(1, 4))):
        messages += _round(src, rng, index)
    return Dialogue(messages, uses_tool=True)
