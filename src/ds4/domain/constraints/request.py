"""What a request asks of its output's shape (docs/structured-outputs.md): a response
format (a JSON schema, any JSON object, a regular expression, a Lark grammar) and a
tool choice. The wire parsers build these from each API's fields; the turn's grammar
(domain/constraints/turn.py) is built from them once the tools are known.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ds4.ports.constraint import Grammar

FormatKind = Literal["json_object", "json_schema", "regex", "lark", "gbnf"]
ANY_OBJECT = '{"type": "object"}'


@dataclass(frozen=True)
class OutputFormat:
    """The visible reply must match this. `source`: the schema's JSON text
    (json_schema), the regex, the Lark grammar or the GBNF grammar (llama.cpp's);
    `param`: the field it came from (`response_format`, `text.format`, `grammar`),
    named in a refusal."""

    kind: FormatKind
    source: str
    param: str

    def grammar(self) -> Grammar:
        if self.kind == "json_object":
            return Grammar("json_schema", ANY_OBJECT, self.param)
        if self.kind == "json_schema":
            return Grammar("json_schema", self.source, self.param)
        return Grammar(self.kind, self.source, self.param)

    @property
    def json(self) -> bool:
        return self.kind in ("json_object", "json_schema")


ChoiceMode = Literal["auto", "required", "none", "named"]


@dataclass(frozen=True)
class ToolChoice:
    """auto: the model decides (today's behaviour); required: the reply is a call;
    named: a call of `name`; none: no call (the tools leave the prompt). `parallel`:
    more than one call may be made in the block; `param`: the field, for refusals."""

    mode: ChoiceMode = "auto"
    name: str | None = None
    parallel: bool = True
    param: str = "tool_choice"

    @property
    def forces_call(self) -> bool:
        return self.mode in ("required", "named")


AUTO = ToolChoice()
