"""The `ds4` console command: one parser, one subcommand per app module, and the list
of implemented subcommands (only what REGISTRARS lists appears in `ds4 --help`)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from ds4 import __version__
from ds4.apps import (
    bench_command,
    cli_command,
    gguf_command,
    pull_command,
    server_command,
    steer_command,
    vectors_command,
)
from ds4.apps.agent import command as agent_command
from ds4.apps.eval import eval_command
from ds4.domain.errors import Ds4Error


class OneLineErrorParser(argparse.ArgumentParser):
    """Usage errors are one line (`ds4 server: error: argument --port: ...`), exit 2;
    the usage block is left to --help. Subcommand parsers inherit the class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = OneLineErrorParser(
        prog="ds4",
        description="ds4: local inference engine and toolkit for DeepSeek V4.",
    )
    parser.add_argument("--version", action="version", version=f"ds4 {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for register in REGISTRARS:
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.run(args)
    except Ds4Error as exc:
        print(f"ds4: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("ds4: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    return code


# ---- commands ------------------------------------------------------------------------
# The list of implemented subcommands; only what is listed here appears in `ds4 --help`.


Registrar = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]

REGISTRARS: list[Registrar] = [
    server_command.register,
    pull_command.register,
    cli_command.register,
    agent_command.register,
    bench_command.register,
    eval_command.register,
    gguf_command.register,
    steer_command.register,
    vectors_command.register,
]
