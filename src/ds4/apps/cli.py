"""The `ds4` console command: one parser, one subcommand per app module."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from ds4 import __version__
from ds4.apps import commands
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
    for register in commands.REGISTRARS:
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
