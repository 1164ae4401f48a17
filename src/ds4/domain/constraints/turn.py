"""The grammar of one turn (docs/structured-outputs.md), from what the request asks:
its response format, its tool choice and its tools' strictness. None when nothing
constrains the turn (today's behaviour: tool_choice auto, no strict tool, no format).

| tools | tool choice     | strict / one call | grammar                               |
|---|---|---|---|
| no    | –               | –                 | the response format                   |
| yes   | required, named | any               | the reply is a block of calls         |
| yes   | auto            | neither           | none, or the JSON format or a block   |
| yes   | auto            | either            | text (or the JSON format), or a block |

A regex or Lark format cannot be joined with tools (the reply is either), so it needs
tool_choice none; forcing a call without tools, or naming an undeclared tool, is refused.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from ds4.domain.chat import ToolSchema
from ds4.domain.constraints.dsml_grammar import (
    callable_tools,
    forced_call_lark,
    inline_json,
    optional_call_lark,
)
from ds4.domain.constraints.request import OutputFormat, ToolChoice
from ds4.domain.errors import RequestError
from ds4.ports.constraint import Grammar


def turn_grammar(
    output: OutputFormat | None,
    choice: ToolChoice,
    schemas: Sequence[ToolSchema],
    *,
    strict_all: bool = False,
) -> Grammar | None:
    tools = callable_tools(schemas, strict_all)
    if not tools:
        if choice.forces_call:
            raise RequestError(f"{choice.param}: forcing a call needs tools", param=choice.param)
        return None if output is None else output.grammar()
    if choice.mode == "named":
        tools = [tool for tool in tools if tool.name == choice.name]
        if not tools:
            raise RequestError(
                f"{choice.param}: tool {choice.name!r} is not among the request's tools",
                param=choice.param,
            )
    if choice.forces_call:
        return Grammar("lark", forced_call_lark(tools, parallel=choice.parallel), "tools")
    shaped = any(tool.strict for tool in tools) or not choice.parallel
    if output is None:
        if not shaped:
            return None
        return Grammar("lark", optional_call_lark(tools, parallel=choice.parallel), "tools")
    if not output.json:
        raise RequestError(
            f"{output.param}: a {output.kind} grammar cannot be combined with tools "
            "(send tool_choice none)",
            param=output.param,
        )
    schema = json.loads(output.grammar().source)
    answer = inline_json(schema)
    lark = optional_call_lark(tools, parallel=choice.parallel, answer=answer)
    return Grammar("lark", lark, output.param)
