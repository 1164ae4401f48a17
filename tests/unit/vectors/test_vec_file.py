"""official.vec: the line grammar, its limits and its errors (with line numbers)."""

from __future__ import annotations

import pytest
from tests.unit.vectors.vector_fixtures import steps_of

from ds4.domain.vectors.files import parse_vec, render_vec
from ds4.domain.vectors.records import VectorCase, VectorFileError

GOOD = b"""# comment
case short 4096 2 tests/test-vectors/prompts/short.txt
step 0 416461 2
top 416461 0
top 4c61 -2.5
step 1 0a 0
end
"""


def test_parse_reads_cases_steps_and_tops() -> None:
    cases = parse_vec(GOOD)
    short = cases["short"]
    assert (short.ctx, short.prompt_file) == (4096, "tests/test-vectors/prompts/short.txt")
    assert short.steps[0].selected == b"Ada"
    assert short.steps[0].tops == ((b"Ada", 0.0), (b"La", -2.5))
    assert short.steps[1].tops == ()


def test_render_then_parse_round_trips_the_compared_alternatives() -> None:
    steps = steps_of("x", "é")
    case = VectorCase("c", "short", "p", 300, steps, "prompts/c.txt", "official/c.json", 3)
    parsed = parse_vec(render_vec([case], "dir/"))["c"]
    assert parsed.ctx == 300 and parsed.prompt_file == "dir/prompts/c.txt"
    for line, step in zip(parsed.steps, steps, strict=True):
        assert line.selected == step.token.raw
        assert line.tops == tuple((a.token.raw, a.logprob) for a in step.compared)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (b"", "holds no case"),
        (b"case a 4096 1 p\nstep 0 41 0\n", "ends inside a case (expected 'end')"),
        (b"case a 1 1 p\n", "line 1: ctx '1' is not an integer in 2..1048576"),
        (b"case a 4096 17 p\n", "line 1: steps '17' is not an integer in 1..16"),
        (b"case a 4096 1 p\nstep 1 41 0\nend\n", "line 2: step index '1', expected 0"),
        (b"case a 4096 1 p\nstep 0 4G 0\nend\n", "line 2: '4G' is not lowercase hex"),
        (b"case a 4096 1 p\nstep 0 4A 0\nend\n", "is not lowercase hex"),
        (b"case a 4096 1 p\nstep 0 41 33\n", "top count '33' is not an integer in 0..32"),
        (b"case a 4096 1 p\nstep 0 41 1\ntop 41 0.5\nend\n", "line 3: logprob 0.5"),
        (b"case a 4096 1 p\nstep 0 41 1\ntop 41 nan\nend\n", "logprob nan"),
        (b"case a 4096 1\n", "line 1: 'case' takes 4 fields, found 3"),
        (b"step 0 41 0\n", "line 1: expected 'case'"),
        (b"case a 4096 1 p\nstep 0 41 0\nend\ncase a 4096 1 p\n", "line 4: case 'a' appears twice"),
        ("case á 4096 1 p\n".encode(), "not ASCII"),
        (b"case a 4096 1 p\nstep 0 " + b"41" * 129 + b" 0\nend\n", "a token of 129 bytes"),
    ],
)
def test_malformed_lines_are_named(text: bytes, fragment: str) -> None:
    with pytest.raises(VectorFileError) as caught:
        parse_vec(text)
    assert fragment in str(caught.value)
    assert str(caught.value).startswith("official.vec")
