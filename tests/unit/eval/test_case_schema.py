"""Our JSONL case format (docs/eval.md "Case files"): what it accepts, and that every
refusal names the file, the line and the problem."""

from __future__ import annotations

import json

import pytest

from ds4.domain.eval.case_schema import CaseDataError, case_object, parse_case, parse_case_lines
from ds4.domain.eval.cases import AnswerKind
from ds4.domain.eval.readers import validation_report


def line(**fields: object) -> str:
    base: dict[str, object] = {"source": "S", "id": "1", "question": "2+2?", "answer": "4"}
    base.update(fields)
    return json.dumps({k: v for k, v in base.items() if v is not None})


def test_minimal_case_infers_its_kind_and_suite() -> None:
    cases = parse_case_lines(line() + "\n", "f.jsonl").cases
    assert cases[0].answer_kind is AnswerKind.INTEGER
    assert cases[0].suites == {"core"}
    mc = parse_case_lines(line(choices=["a", "b"], answer="b"), "f").cases[0]
    assert mc.answer_kind is AnswerKind.MULTIPLE_CHOICE
    compsec = parse_case_lines(line(source="COMPSEC", answer="3-4"), "f").cases[0]
    assert compsec.answer_kind is AnswerKind.LINE_SET


def test_every_field_round_trips() -> None:
    obj = json.loads(
        line(
            domain="math/algebra", title="T", answer_kind="ORDERED_SEQUENCE", answer="a,b",
            aliases=["b,a"], max_tokens=900, suites=["hard", "hard-smoke"],
        )
    )  # fmt: skip
    case = parse_case(obj)
    assert case_object(case) == obj | {"suites": ["hard", "hard-smoke"]}


def test_source_records_fill_the_table() -> None:
    text = json.dumps({"record": "source", "name": "S", "license": "MIT", "url": "u"}) + "\n"
    cases = parse_case_lines(text + line(), "f")
    assert cases.sources["S"].license == "MIT"


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (line(questoin="x"), "unknown field"),
        (line(question=""), "'question' must be a non-empty string"),
        (line(id=" 1"), "'id' must be one line"),
        (line(choices=["a", "b"], answer="C"), "not one of the choice letters AB"),
        (line(choices=["a"], answer="A"), "needs 2..10 choices"),
        (line(choices=list("abcdefghijk"), answer="A"), "needs 2..10 choices"),
        (line(answer="-3"), "not a non-negative decimal integer"),
        (line(answer_kind="LINE_SET", answer="x"), "not a line spec"),
        (line(answer_kind="GUESS"), "'answer_kind' must be one of"),
        (line(max_tokens=0), "'max_tokens' must be an integer in 1..1000000"),
        (line(suites=["all"]), "reserved"),
        (line(suites=["Core"]), "lowercase"),
        (line(aliases=["x"]), "alias: answer 'x'"),
        (line(answer=True), "'answer' must be a string"),
        (json.dumps({"record": "other"}), "'record' must be"),
        ("[1, 2]", "expected a JSON object"),
        ("{nope", "not JSON"),
    ],
)
def test_refusals_name_the_line(bad: str, message: str) -> None:
    with pytest.raises(CaseDataError, match=r"^f\.jsonl:2: .*") as info:
        parse_case_lines(line(id="ok") + "\n" + bad + "\n", "f.jsonl")
    assert message in str(info.value)


def test_a_case_defined_twice_is_refused() -> None:
    with pytest.raises(CaseDataError, match="already defined at f:1"):
        parse_case_lines(line() + "\n" + line(), "f")


def test_validation_lists_every_problem() -> None:
    text = "\n".join(
        [line(id="a"), line(id="b", answer="x"), "{bad", line(id="c", question="2+2?")]
    )
    report = validation_report([("f.jsonl", text)])
    assert report.problems == 4  # bad answer, bad JSON, unknown source S, repeated question
    joined = "\n".join(report.lines)
    assert "f.jsonl:2:" in joined and "f.jsonl:3: not JSON" in joined
    assert "source 'S' has no row in the sources table" in joined
    assert "same question as S/a" in joined
    assert report.lines[-1] == "ds4-eval: 4 problems in 1 case files"


def test_validation_of_a_clean_file() -> None:
    source = json.dumps({"record": "source", "name": "S", "license": "MIT", "url": "u"})
    report = validation_report([("f.jsonl", source + "\n" + line())])
    assert report.problems == 0
    assert report.lines[-1] == "ds4-eval: 1 cases in 1 files are valid"
