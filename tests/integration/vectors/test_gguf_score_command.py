"""`ds4 gguf score`: NLL tables of recorded continuations and of a text, and
`--compare`; a quantized copy of a model scores worse than its f32 original."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.integration.vectors.conftest import DEMO, OFFICIAL, RECORDED_STEPS, SHORT, ds4, only

from ds4.apps.cli import main


def table_rows(path: Path) -> list[list[str]]:
    lines = path.read_text().splitlines()
    assert lines[0] == "# ds4-score-v1"
    body = [line for line in lines if not line.startswith("#")]
    assert body[0] == "case\tindex\ttoken_id\ttoken_hex\tnll"
    return [line.split("\t") for line in body[1:]]


def avg_nll(summary: str) -> float:
    fields = dict(part.split("=") for part in summary.split())
    return float(fields["avg_nll"])


def test_a_q2_copy_scores_a_higher_nll_than_its_f32_original(
    tiny_f32: Path, tiny_q2: Path, f32_vectors: Path, tmp_path: Path
) -> None:
    """The continuations are the f32 model's own greedy choices; the Q2 copy (same
    seed, 2-bit experts, 8-bit projections and head) gives them less probability."""
    tables = {}
    for name, model, numerics in (("f32", tiny_f32, "fp32"), ("q2", tiny_q2, "ds4")):
        tables[name] = tmp_path / f"{name}.tsv"
        done = ds4("gguf", "score", "-m", model, "--numerics", numerics, "--vectors",
                   f32_vectors, "--out", tables[name], "--quiet")  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.startswith(f"tokens={3 * RECORDED_STEPS} nll=")
    a, b = table_rows(tables["f32"]), table_rows(tables["q2"])
    assert [r[:4] for r in a] == [r[:4] for r in b]  # same tokens, same ids
    compared = ds4("gguf", "score", "--compare", tables["f32"], tables["q2"])
    assert compared.returncode == 0, compared.stderr
    text = compared.stdout
    assert "B's mean NLL is higher (worse) than A's" in text
    total = next(line for line in text.splitlines() if line.startswith("all "))
    _, count, nll_a, nll_b, delta = total.split()
    assert int(count) == 3 * RECORDED_STEPS
    assert float(nll_b) > float(nll_a) and float(delta) > 0
    for case in SHORT:
        assert any(line.startswith(case) for line in text.splitlines())


def test_the_official_continuations_score_as_test_vectors_ranks_them(tmp_path: Path) -> None:
    """Step 0's NLL is minus the logprob `ds4 test-vectors` reports for the recorded
    token (one prefill chunk either way for these short prompts)."""
    table = tmp_path / "demo.tsv"
    done = ds4("gguf", "score", "-m", DEMO, "--vectors", OFFICIAL, *only(*SHORT),
               "--out", table, "--quiet")  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    rows = table_rows(table)
    assert [(r[0], r[1]) for r in rows][:5] == [
        ("short_italian_fact", "0"), ("short_italian_fact", "1"), ("short_italian_fact", "2"),
        ("short_italian_fact", "3"), ("short_code_completion", "0"),
    ]  # fmt: skip
    assert rows[0][3] == b"Ada".hex() and len(rows) == 9
    report = tmp_path / "report.json"
    ds4("test-vectors", "-m", DEMO, "--only", "short_italian_fact", "--json", report, "--quiet")
    step0 = json.loads(report.read_text())["cases"][0]["steps"][0]
    assert float(rows[0][4]) == pytest.approx(-step0["recorded_here"]["logprob"], rel=1e-6)


def rows_of(text: str) -> list[list[str]]:
    body = [line for line in text.splitlines() if not line.startswith("#")]
    return [line.split("\t") for line in body[1:]]


def test_a_text_is_scored_after_its_warmup_and_the_chunk_does_not_matter(
    tmp_path: Path,
) -> None:
    text = tmp_path / "text.txt"
    text.write_text((OFFICIAL / "prompts" / "long_code_audit.txt").read_text()[:600])
    out = tmp_path / "text.tsv"
    to_file = ds4("gguf", "score", "-m", DEMO, "--text", text, "--chunk", "5", "--warmup", "16",
                  "--out", out, "--quiet")  # fmt: skip
    assert to_file.returncode == 0, to_file.stderr[-2000:]
    assert avg_nll(to_file.stdout) > 0
    # without --out the table is the whole stdout and the summary goes to stderr
    to_stdout = ds4("gguf", "score", "-m", DEMO, "--text", text, "--chunk", "64",
                    "--warmup", "16", "--quiet")  # fmt: skip
    assert to_stdout.returncode == 0, to_stdout.stderr[-2000:]
    assert to_stdout.stdout == out.read_text()
    assert to_stdout.stderr.strip() == to_file.stdout.strip()
    rows = table_rows(out)
    assert [int(r[1]) for r in rows] == list(range(len(rows))) and len(rows) > 100
    assert all(r[0] == "text" for r in rows)


def test_compare_refuses_tables_of_different_tokens(tmp_path: Path) -> None:
    a, b = tmp_path / "a.tsv", tmp_path / "b.tsv"
    head = "# ds4-score-v1\ncase\tindex\ttoken_id\ttoken_hex\tnll\n"
    a.write_text(head + "x\t0\t1\t41\t0.5\n")
    b.write_text(head + "x\t0\t1\t42\t0.5\n")
    done = ds4("gguf", "score", "--compare", a, b)
    assert done.returncode == 2 and "scored different tokens" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((), "one of the arguments --vectors --text --compare is required"),
        (("--text", "README.md", "--only", "x"), "--only and --skip apply to --vectors"),
        (("--vectors", str(OFFICIAL), "--only", "nope"), "no case 'nope'"),
        (("--compare", "nope.tsv", "x.tsv"), "argument --compare: nope.tsv: no such file"),
        (("--text", "README.md", "--warmup", "0"), "argument --warmup: 0 is not in"),
    ],
)
def test_bad_requests_are_one_line_errors(
    args: tuple[str, ...], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        code = main(["gguf", "score", "-m", str(DEMO), *args])
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    err = capsys.readouterr().err
    assert code == 2 and message in err, err
