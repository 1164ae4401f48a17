"""`python -m ds4` and the `ds4` console script.

A Ctrl+C while the commands are still being imported (numpy, the backends: most of
the first second) exits as one later does, `ds4: interrupted` and 130, without a
traceback: the handler is installed before any import that takes time, and Python's
own (KeyboardInterrupt) comes back once `ds4.apps.cli.main`, which handles it, runs.
"""

import signal
import sys
from types import FrameType
from typing import NoReturn


def _interrupted(signum: int, frame: FrameType | None) -> NoReturn:
    print("ds4: interrupted", file=sys.stderr)
    raise SystemExit(130)


def main() -> int:
    previous = signal.signal(signal.SIGINT, _interrupted)
    from ds4.apps.cli import main as run_command

    signal.signal(signal.SIGINT, previous)
    return run_command()


if __name__ == "__main__":
    raise SystemExit(main())
