"""The score TSV: written, read back, summarized and compared."""

from __future__ import annotations

import math

import pytest

from ds4.domain.errors import Ds4Error
from ds4.domain.vectors.nll import ScoredToken, compare_tables, header, parse_table, row, summarize

A = [
    ScoredToken("x", 0, 10, b"Ada", 0.5),
    ScoredToken("x", 1, 11, b" Lov", 1.5),
    ScoredToken("y", 0, 12, b"\n", 2.0),
]


def table(rows: list[ScoredToken]) -> str:
    return header({"model": "m.gguf", "source": "vectors\td"}) + "".join(row(r) for r in rows)


def test_a_table_reads_back_its_rows() -> None:
    text = table(A)
    assert text.startswith("# ds4-score-v1\n# model\tm.gguf\n# source\tvectors d\n")
    assert parse_table(text, "a.tsv") == A


def test_the_summary_line() -> None:
    summary = summarize(A)
    assert (summary.tokens, summary.nll, summary.avg_nll) == (3, 4.0, 4.0 / 3)
    assert math.isclose(summary.ppl, math.exp(4.0 / 3))
    assert summary.line().startswith("tokens=3 nll=4.000000000 avg_nll=1.333333333 ppl=3.79")


def test_compare_gives_means_per_case_and_token_counts() -> None:
    b = [
        ScoredToken(r.case, r.index, r.token_id + 1, r.raw, r.nll + d)
        for r, d in zip(A, (1.0, -0.5, 0.0), strict=True)
    ]
    result = compare_tables(A, b, ("a", "b"))
    assert (result.total.a.tokens, result.total.a.nll, result.total.b.nll) == (3, 4.0, 4.5)
    assert [(c.case, c.a.tokens, c.b.avg_nll) for c in result.cases] == [
        ("x", 2, 1.25),
        ("y", 1, 2.0),
    ]
    assert (result.b_worse, result.b_better) == (1, 1)


def test_tables_of_different_tokens_do_not_compare() -> None:
    other = [*A[:2], ScoredToken("y", 0, 12, b"\r", 2.0)]
    with pytest.raises(Ds4Error, match="scored different tokens \\(row 3"):
        compare_tables(A, other, ("a", "b"))
    with pytest.raises(Ds4Error, match="a has 3 scored tokens, b has 2"):
        compare_tables(A, A[:2], ("a", "b"))


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("case\tindex\n", "not a ds4 score table"),
        ("# ds4-score-v1\n", "missing the column line"),
        ("# ds4-score-v1\ncase\tindex\ttoken_id\ttoken_hex\tnll\n", "no scored tokens"),
        (
            "# ds4-score-v1\ncase\tindex\ttoken_id\ttoken_hex\tnll\nx\t0\t1\t41\n",
            "line 3: 4 fields",
        ),
        (
            "# ds4-score-v1\ncase\tindex\ttoken_id\ttoken_hex\tnll\nx\t-1\t1\t41\t0.5\n",
            "non-negative",
        ),
        (
            "# ds4-score-v1\ncase\tindex\ttoken_id\ttoken_hex\tnll\nx\t0\t1\tzz\t0.5\n",
            "bad token_hex",
        ),
        (
            "# ds4-score-v1\ncase\tindex\ttoken_id\ttoken_hex\tnll\nx\t0\t1\t41\t-2\n",
            "nll -2 is not",
        ),
    ],
)
def test_malformed_tables_are_named(text: str, fragment: str) -> None:
    with pytest.raises(Ds4Error) as caught:
        parse_table(text, "a.tsv")
    assert fragment in str(caught.value) and str(caught.value).startswith("a.tsv")
