"""`ds4 server --stored-responses N --stored-responses-mb MIB`: defaults, range checks
with a one-line usage error, and the options the server is built from."""

from __future__ import annotations

import argparse

import pytest

from ds4.apps.server_command import register, server_options
from ds4.domain.serving.response_store import (
    DEFAULT_STORED_MIB,
    DEFAULT_STORED_RESPONSES,
    MAX_STORED_MIB,
    MAX_STORED_RESPONSES,
)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ds4")
    register(parser.add_subparsers())
    return parser.parse_args(["server", "--backend", "scripted", *argv])


def test_defaults_and_the_options_they_make() -> None:
    args = parse()
    assert (args.stored_responses, args.stored_responses_mb) == (
        DEFAULT_STORED_RESPONSES,
        DEFAULT_STORED_MIB,
    )
    flags = ("--script", __file__, "--stored-responses", "5", "--stored-responses-mb", "2")
    options = server_options(parse(*flags), "127.0.0.1")
    assert (options.stored_responses, options.stored_responses_bytes) == (5, 2 << 20)


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        ("--stored-responses", "-1"),
        ("--stored-responses", str(MAX_STORED_RESPONSES + 1)),
        ("--stored-responses", "many"),
        ("--stored-responses-mb", str(MAX_STORED_MIB + 1)),
    ],
)
def test_out_of_range_is_a_one_line_usage_error(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse(flag, value)
    assert exit_info.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith(f"ds4 server: error: argument {flag}")
