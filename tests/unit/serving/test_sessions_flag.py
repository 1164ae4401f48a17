"""`ds4 server --sessions N` and the default prefill chunk: parsed, range-checked with a
one-line error, refused by the composition root too."""

from __future__ import annotations

import argparse

import pytest
from tests.unit.serving.fake_server import fake_server

from ds4.apps.options import DEFAULT_PREFILL_CHUNK, MAX_SESSIONS
from ds4.apps.server_command import register
from ds4.domain.errors import Ds4Error


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ds4")
    register(parser.add_subparsers())
    return parser.parse_args(["server", *argv])


def test_one_session_and_a_finite_prefill_chunk_by_default() -> None:
    args = parse()
    assert (args.sessions, args.prefill_chunk) == (1, DEFAULT_PREFILL_CHUNK)
    assert parse("--sessions", str(MAX_SESSIONS)).sessions == MAX_SESSIONS


@pytest.mark.parametrize("value", ["0", "65", "-1", "two"])
def test_a_session_count_out_of_range_is_a_one_line_usage_error(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse("--sessions", value)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("ds4 server: error: argument --sessions")


def test_the_composition_root_refuses_a_bad_count_too() -> None:
    with pytest.raises(Ds4Error, match=r"--sessions 0: use 1\.\.64"):
        fake_server({}, sessions=0)
