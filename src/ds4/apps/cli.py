"""The `ds4` console command: one parser, one subcommand per app module, and the list
of implemented subcommands (only what `registrars()` lists appears in `ds4 --help`).

This module is the console entry point, so it imports nothing that takes time: the
commands (numpy, the backends, ...) are imported inside `main`'s KeyboardInterrupt
handling, and a Ctrl+C in the first second is the same clean `ds4: interrupted`, exit
130, as one later on."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import NoReturn

from ds4 import __version__
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
    for register in registrars():
        register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()  # imports every command: the slow part of a start
        args = parser.parse_args(argv)
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
# The implemented subcommands; only what `registrars()` lists appears in `ds4 --help`.


Registrar = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]


def registrars() -> list[Registrar]:
    """Each subcommand's `register`, in `ds4 --help` order; importing them is what
    takes time, so it happens here and not at module import."""
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

    return [
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
