"""--distributed and its companions on every engine command that runs a live model
(`ds4 cli`, `server`, `agent`, `eval`, `bench`): one declaration in engine_flags, so the
same flags reach the same DistributedOptions; companions without --distributed and
out-of-range --dist-activation-bits are one-line usage errors; the bench's per-range
summary adds hop records up per hop and operation."""

from __future__ import annotations

import argparse

import pytest
from tools.demo.files import DEMO

from ds4.apps.cli import build_parser
from ds4.apps.engine_flags import engine_options
from ds4.domain.dist_transport import HopRecord, HopSummary
from ds4.domain.distributed import DistributedTarget
from ds4.domain.errors import Ds4Error

DIST = ["--distributed", "local:2", "--layer-split", "0-1,2-3", "--dist-activation-bits",
        "16", "--dist-trace", "--dist-prefill-piece", "32"]  # fmt: skip
COMMANDS = {
    "cli": ["cli", "-p", "hi"],
    "server": ["server"],
    "agent": ["agent", "--non-interactive", "-p", "hi"],
    "eval": ["eval"],
    "bench": ["bench", "--prompt-file", str(DEMO)],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_every_engine_command_takes_the_distributed_flags(command: str) -> None:
    args = build_parser().parse_args([*COMMANDS[command], "-m", str(DEMO), *DIST])
    options = engine_options(args, str(DEMO))
    spread = options.distributed
    assert spread is not None
    assert spread.target == DistributedTarget(None, 2)
    assert spread.layer_split == "0-1,2-3" and spread.piece == 32
    assert spread.activation_bits == 16 and spread.trace
    plain = engine_options(build_parser().parse_args([*COMMANDS[command], "-m", str(DEMO)]), None)
    assert plain.distributed is None


@pytest.mark.parametrize("command", ["agent", "eval", "bench"])
def test_companions_need_distributed(command: str) -> None:
    args = build_parser().parse_args([*COMMANDS[command], "--dist-activation-bits", "8"])
    with pytest.raises(Ds4Error, match="--dist-activation-bits need --distributed"):
        engine_options(args, str(DEMO))
    args = build_parser().parse_args([*COMMANDS[command], "--dist-trace"])
    with pytest.raises(Ds4Error, match="--dist-trace need --distributed"):
        engine_options(args, str(DEMO))


def test_other_activation_bits_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(
            ["bench", "--distributed", "local:2", "--dist-activation-bits", "4"]
        )
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "--dist-activation-bits" in err and "invalid choice: 4" in err
    assert len(err.strip().splitlines()) == 1


def test_the_help_names_the_default_and_the_docs() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for command in ("agent", "eval", "bench"):
        text = " ".join(sub.choices[command].format_help().split())
        assert "--dist-activation-bits 32|16|8" in text and "--dist-trace" in text
        assert "32 as float32 (bit-identical" in text and "(default: 32;" in text


def test_the_bench_summary_adds_up_per_hop_and_operation() -> None:
    def hop(hop: int, to: str, op: str, tokens: int, eval_s: float) -> HopRecord:
        return HopRecord(1, op, 0, 0, tokens, hop, to, eval_s, 0.002, 0.001, 528 * tokens, 0)

    summary = HopSummary()
    for record in (
        hop(1, "layers 10-11", "decode", 1, 0.004),
        hop(0, "layers 0-9", "decode", 1, 0.001),
        hop(0, "layers 0-9", "decode", 1, 0.003),
        hop(0, "layers 0-9", "prefill", 32, 0.010),
        hop(2, "coordinator", "decode", 1, 0.0),
    ):
        summary.add(record)
    lines = summary.lines()
    assert [line.split(" op=")[0] for line in lines] == [
        "to=layers:0-9", "to=layers:0-9", "to=layers:10-11", "to=coordinator",
    ]  # fmt: skip
    assert lines[0] == (
        "to=layers:0-9 op=decode passes=2 tokens=2 eval_ms_per_pass=2.000 "
        "wait_ms_per_pass=2.000 transfer_ms_per_pass=1.000 bytes_in_per_token=528"
    )
    assert "op=prefill passes=1 tokens=32 eval_ms_per_pass=10.000" in lines[1]
