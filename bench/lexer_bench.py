"""Per-token cost of lexing a turn's text (generation.lexer), at 1K, 10K and 100K tokens.

Usage: .venv/bin/python bench/lexer_bench.py [--repeat 3]

Each scenario feeds a synthetic turn to the lexer in 4-character tokens, as the decode
loop does (the loop also keeps the pieces, joined once at the end), and prints the
mean microseconds per token for each length side by side. A linear lexer gives a flat
row; the scanners it replaced grew with the text (docs/performance.md).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from ds4.domain.dsml.syntax import FULL, THINK_CLOSE
from ds4.domain.generation.lexer import TurnLexer

SIZES = (1_000, 10_000, 100_000)
TOKEN_CHARS = 4
WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and", "then")
STOPS = ("STOP", "\n\nUser:", "<|end|>")


def prose(tokens: int) -> str:
    """About `tokens` tokens of text: short words, a newline now and then."""
    words = (WORDS[i % len(WORDS)][:3] + ("\n" if i % 17 == 16 else " ") for i in range(tokens))
    return "".join(words)[: tokens * TOKEN_CHARS]


def value_block(body: str, *, is_string: bool) -> str:
    flag = "true" if is_string else "false"
    return (
        f'\n\n{FULL.block_open}\n{FULL.invoke_open} name="write">\n'
        f'{FULL.param_open} name="text" string="{flag}">{body}{FULL.param_close}\n'
        f"{FULL.invoke_close}\n{FULL.block_close}"
    )


def json_body(tokens: int) -> str:
    return "[" + ",".join(f'"{w}"' for w in prose(tokens).split()) + "]"


# name -> (thinking, tools, text for a turn of about n tokens)
SCENARIOS: dict[str, tuple[bool, bool, Callable[[int], str]]] = {
    "reasoning": (True, True, lambda n: prose(n) + THINK_CLOSE + "ok"),
    "answer+tools+stops": (False, True, prose),
    "string value": (False, True, lambda n: value_block(prose(n), is_string=True)),
    "json value": (False, True, lambda n: value_block(json_body(n), is_string=False)),
}


def per_token_us(thinking: bool, tools: bool, text: str, repeat: int) -> float:
    tokens = [text[i : i + TOKEN_CHARS] for i in range(0, len(text), TOKEN_CHARS)]
    best = float("inf")
    for _ in range(repeat):
        lexer = TurnLexer(thinking=thinking, tools_active=tools, stops=STOPS)
        pieces: list[str] = []
        start = time.perf_counter()
        for token in tokens:
            pieces.append(token)
            lexer.feed(token)
        lexer.finish()
        "".join(pieces)
        best = min(best, time.perf_counter() - start)
    return best / len(tokens) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--repeat", type=int, default=3, help="best of this many runs")
    args = parser.parse_args()
    print(f"{'us/token':20}" + "".join(f"{n:>10,}" for n in SIZES))
    for name, (thinking, tools, make) in SCENARIOS.items():
        row = [per_token_us(thinking, tools, make(n), args.repeat) for n in SIZES]
        print(f"{name:20}" + "".join(f"{us:10.2f}" for us in row))


if __name__ == "__main__":
    main()
