"""Readers for public benchmark formats, on small fixtures written here (the rows are
invented; only the column and field names are the data sets')."""

from __future__ import annotations

import json

import pytest

from ds4.domain.eval.case_schema import CaseDataError
from ds4.domain.eval.cases import AnswerKind
from ds4.domain.eval.readers import correct_position, detect_format, parse_case_file

GPQA = (
    "Pre-Revision Question,Question,Correct Answer,Incorrect Answer 1,Incorrect Answer 2,"
    "Incorrect Answer 3,Record ID,High-level domain,Subdomain\n"
    'x,"What is 1+1?\nThink twice.", 2 ,3,4,5,recA,Math,Arithmetic\n'
    "x,Which is a prime?,7,8,9,10,recB,Math,\n"
)


def test_gpqa_csv() -> None:
    cases = parse_case_file("gpqa_diamond.csv", GPQA).cases
    first = cases[0]
    assert first.source == "GPQA" and first.id == "recA"
    assert first.question == "What is 1+1?\nThink twice."
    assert first.answer_kind is AnswerKind.MULTIPLE_CHOICE
    at = correct_position("recA")
    assert first.choices[at] == "2" and first.answer == "ABCD"[at]
    assert [c for i, c in enumerate(first.choices) if i != at] == ["3", "4", "5"]
    assert first.domain == "Math/Arithmetic"
    assert cases[1].domain == "Math"


def test_gpqa_order_is_the_same_every_time() -> None:
    a = parse_case_file("g.csv", GPQA).cases
    b = parse_case_file("g.csv", GPQA).cases
    assert [c.choices for c in a] == [c.choices for c in b]
    # the placement is spread over the four letters, not always A
    assert len({correct_position(f"rec{i}") for i in range(40)}) == 4


def test_gpqa_missing_answer_names_the_row() -> None:
    text = GPQA.replace("7,8,9,10", ",8,9,10")
    with pytest.raises(CaseDataError, match=r"g\.csv:4: missing 'Correct Answer'"):
        parse_case_file("g.csv", text)


def test_aime_variants() -> None:
    text = "\n".join(
        json.dumps(o)
        for o in (
            {"id": "I-1", "problem": "Find n.", "answer": "070"},
            {"question": "Find m.", "answer": 5},
            {"problem_idx": 3, "Problem": "Find k.", "Answer": 12.0},
        )
    )
    cases = parse_case_file("aime2025.jsonl", text).cases
    assert [(c.id, c.answer) for c in cases] == [("I-1", "070"), ("2", "5"), ("3", "12")]
    assert all(c.answer_kind is AnswerKind.INTEGER and c.source == "AIME" for c in cases)


def test_aime_refuses_a_non_integer_answer() -> None:
    text = json.dumps({"problem": "p", "answer": "\\frac{1}{2}"})
    with pytest.raises(CaseDataError, match="not a non-negative integer"):
        parse_case_file("a.jsonl", text, "aime-jsonl")


MMLU = {
    "question_id": 70,
    "question": "Which is largest?",
    "options": ["1", "2", "3", "4", "5", "6", "7", "8", "9", "10"],
    "answer": "J",
    "answer_index": 9,
    "cot_content": "",
    "category": "math",
    "src": "ori_mmlu-x",
}


def test_mmlu_pro_jsonl_and_csv() -> None:
    jsonl = parse_case_file("test.jsonl", json.dumps(MMLU)).cases[0]
    assert (jsonl.id, jsonl.answer, len(jsonl.choices), jsonl.domain) == ("70", "J", 10, "math")
    csv_text = (
        "question_id,question,options,answer,answer_index,category\n"
        '71,"Pick, one","[""a"", ""b"", ""c""]",,2,law\n'
    )
    row = parse_case_file("mmlu.csv", csv_text).cases[0]
    assert (row.question, row.choices, row.answer, row.domain) == (
        "Pick, one", ("a", "b", "c"), "C", "law"
    )  # fmt: skip


def test_mmlu_pro_answer_must_be_a_choice() -> None:
    bad = dict(MMLU, options=["1", "2"], answer="J")
    with pytest.raises(CaseDataError, match="not one of AB"):
        parse_case_file("m.jsonl", json.dumps(bad))


@pytest.mark.parametrize(
    ("name", "text", "fmt"),
    [
        ("x.jsonl", json.dumps({"source": "S", "id": "1", "question": "q", "answer": "1"}), "ds4"),
        ("x.jsonl", json.dumps({"record": "source", "name": "S"}), "ds4"),
        ("x.jsonl", json.dumps(MMLU), "mmlu-pro-jsonl"),
        ("x.jsonl", json.dumps({"problem": "p", "answer": 3}), "aime-jsonl"),
        ("x.csv", GPQA, "gpqa-csv"),
        ("x.txt", GPQA, "gpqa-csv"),
    ],
)
def test_detect_format(name: str, text: str, fmt: str) -> None:
    assert detect_format(name, text) == fmt


def test_unknown_format_says_how_to_name_one() -> None:
    with pytest.raises(CaseDataError, match="--cases-format"):
        detect_format("x.jsonl", json.dumps({"foo": 1}))
    with pytest.raises(CaseDataError, match="empty"):
        parse_case_file("x.jsonl", "  \n")
