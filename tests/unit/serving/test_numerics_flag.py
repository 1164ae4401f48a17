"""`ds4 server --numerics` (needed by --backend vulkan, which runs fp32 only): parsed,
ds4 by default, and a bad name is a one-line usage error."""

from __future__ import annotations

import argparse

import pytest

from ds4.apps.options import ServerOptions
from ds4.apps.server_command import register


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="ds4")
    register(parser.add_subparsers())
    return parser.parse_args(["server", *argv])


def test_ds4_numerics_by_default_and_fp32_on_request() -> None:
    assert parse().numerics == "ds4" == ServerOptions(model=None).numerics
    args = parse("--backend", "vulkan", "--numerics", "fp32")
    assert (args.backend, args.numerics) == ("vulkan", "fp32")


def test_an_unknown_numerics_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        parse("--numerics", "fp16")
    assert exit_info.value.code == 2
    assert "argument --numerics" in capsys.readouterr().err
