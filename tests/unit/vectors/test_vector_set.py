"""A vector directory read as data: each file validated on its own and against the
others, every problem named by file and field (in-memory files)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from tests.unit.vectors.vector_fixtures import reader, steps_of, vector_files

from ds4.domain.vectors.files import read_vector_set
from ds4.domain.vectors.records import VectorFileError

OFFICIAL = "official/a.official.json"


def files() -> dict[str, bytes]:
    return vector_files({"a": ("Ciao", steps_of("x", "y")), "b": ("Hello", steps_of("z"))})


Edit = Callable[[dict[str, Any]], object]


def edit_json(name: str, change: Edit) -> dict[str, bytes]:
    out = files()
    body = json.loads(out[name])
    change(body)
    out[name] = json.dumps(body).encode()
    return out


def fails(out: dict[str, bytes], *fragments: str) -> None:
    with pytest.raises(VectorFileError) as caught:
        read_vector_set(reader(out))
    for fragment in fragments:
        assert fragment in str(caught.value), str(caught.value)


def test_a_well_formed_directory_reads_back_what_was_written() -> None:
    vectors = read_vector_set(reader(files()))
    assert vectors.case_ids() == ["a", "b"] and vectors.top_logprobs == 20
    a = vectors.cases[0]
    assert (a.prompt, a.ctx, a.prompt_tokens) == ("Ciao", 64, 7)
    assert [s.token.raw for s in a.steps] == [b"x", b"y"]
    # the -9999 placeholder is kept as data but not compared
    assert [alt.token.raw for alt in a.steps[0].compared] == [b"x", b"?"]


def test_only_selects_cases_and_an_unknown_id_names_the_choices() -> None:
    assert read_vector_set(reader(files()), frozenset({"b"})).case_ids() == ["b"]
    with pytest.raises(VectorFileError, match=r"no case 'nope' in manifest\.json"):
        read_vector_set(reader(files()), frozenset({"nope"}))


def test_missing_files_are_named() -> None:
    for name in ("manifest.json", "official.vec", "prompts/a.txt", OFFICIAL):
        out = files()
        del out[name]
        fails(out, name, "no such file")


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        (lambda m: m.update(schema="v0"), ("manifest.json: schema", "'v0'")),
        (lambda m: m.pop("top_logprobs"), ("top_logprobs is missing",)),
        (lambda m: m.update(top_logprobs=500), ("top_logprobs: 500 is not in 1..32",)),
        (lambda m: m.update(prompts=[]), ("lists no case",)),
        (lambda m: m["prompts"].append(dict(m["prompts"][0])), ("'a' appears twice",)),
        (lambda m: m["prompts"][0].update(id="a b"), ("prompts[0].id", "is not a case id")),
        (lambda m: m["prompts"][0].update(kind="huge"), ("prompts[0].kind",)),
        (lambda m: m["prompts"][0].update(prompt_file="../etc/passwd"), ("not a relative path",)),
        (lambda m: m["prompts"][0].update(prompt_file="/abs"), ("not a relative path",)),
        (lambda m: m["prompts"][0].update(steps="2"), ("expected an integer, got a string",)),
        (lambda m: m["prompts"][0].update(steps=17), ("steps: 17 is not in 1..16",)),
        (lambda m: m["prompts"][0].update(prompt_chars=5), ("prompts/a.txt: 4 characters",)),
    ],
)
def test_manifest_problems(change: Edit, fragments: tuple[str, ...]) -> None:
    fails(edit_json("manifest.json", change), *fragments)


def _step0(body: dict[str, Any]) -> dict[str, Any]:
    step: dict[str, Any] = body["steps"][0]
    return step


@pytest.mark.parametrize(
    ("change", "fragments"),
    [
        (lambda b: b.update(schema="x"), (OFFICIAL, "schema")),
        (lambda b: b.update(id="b"), ("id: 'b', but the manifest lists this file for 'a'",)),
        (
            lambda b: b.update(prompt="Ciao!"),
            ("prompt: differs from prompts/a.txt at character 4",),
        ),
        (lambda b: b["request"]["thinking"].update(type="enabled"), ("thinking disabled",)),
        (lambda b: b["request"].update(temperature=0.7), ("only greedy vectors",)),
        (lambda b: b["steps"].pop(), ("has 1 steps, the manifest says 2",)),
        (lambda b: _step0(b).update(step=3), ("steps[0].step: 3, expected 0",)),
        (lambda b: _step0(b)["token"].update(bytes=[300]), ("steps[0].token.bytes", "0..255")),
        (lambda b: _step0(b)["token"].update(bytes=[]), ("steps[0].token: has no bytes",)),
        (lambda b: _step0(b).update(logprob=0.5), ("is positive",)),
        (lambda b: _step0(b).update(logprob=None), ("expected a number, got null",)),
        (lambda b: _step0(b).update(top_logprobs=[{}] * 40), ("40 entries, at most 20",)),
        (
            lambda b: _step0(b)["top_logprobs"][0].pop("token"),
            ("top_logprobs[0].token is missing",),
        ),
        (lambda b: b["message"].update(content="nope"), ("message.content", "steps' tokens")),
        (lambda b: b["usage"].update(prompt_tokens=-1), ("usage.prompt_tokens",)),
    ],
)
def test_official_record_problems(change: Edit, fragments: tuple[str, ...]) -> None:
    fails(edit_json(OFFICIAL, change), *fragments)


def test_json_that_is_not_json_or_not_finite_is_refused() -> None:
    out = files()
    out[OFFICIAL] = b'{"schema": '
    fails(out, OFFICIAL, "not valid JSON (line 1")
    out[OFFICIAL] = files()[OFFICIAL].replace(b"-0.25", b"NaN", 1)
    fails(out, "NaN is not a JSON number")
    out[OFFICIAL] = b"\xff\xfe"
    fails(out, "not UTF-8")


def test_official_vec_must_agree_with_the_records() -> None:
    out = files()
    out["official.vec"] = out["official.vec"].replace(b"step 1 79 ", b"step 1 7a ")
    fails(out, "official.vec case a step 1: selected token 7a is not 79")
    out = files()
    out["official.vec"] = out["official.vec"].replace(b"top 3f -2", b"top 3f -7")
    fails(out, "step 0: its top lines are not the ranked alternatives")
    out = files()
    out["official.vec"] = out["official.vec"].replace(b"prompts/a.txt", b"prompts/b.txt")
    fails(out, "prompt file 'tests/test-vectors/prompts/b.txt' is not prompts/a.txt")
    out = files()
    text = out["official.vec"].decode()
    out["official.vec"] = text[: text.index("case b")].encode()
    fails(out, "official.vec: no case 'b' (it gives the session size)")
