"""The list of implemented subcommands; only what is listed here appears in `ds4 --help`."""

from __future__ import annotations

import argparse
from collections.abc import Callable

from ds4.apps import (
    bench_command,
    cli_command,
    gguf_command,
    server_command,
    steer_command,
    vectors_command,
)
from ds4.apps.agent import command as agent_command
from ds4.apps.eval import eval_flags

Registrar = Callable[["argparse._SubParsersAction[argparse.ArgumentParser]"], None]

REGISTRARS: list[Registrar] = [
    server_command.register,
    cli_command.register,
    agent_command.register,
    bench_command.register,
    eval_flags.register,
    gguf_command.register,
    steer_command.register,
    vectors_command.register,
]
