"""The comparison rule of one step, on hand-made recorded and local values."""

from __future__ import annotations

from ds4.domain.vectors.local_run import LocalToken, judge_step
from ds4.domain.vectors.records import Alternative, VectorStep, VectorToken


def tok(text: str) -> VectorToken:
    return VectorToken(text.encode(), text)


def step(selected: str, *alternatives: tuple[str, float]) -> VectorStep:
    alts = tuple(Alternative(tok(t), lp) for t, lp in alternatives)
    return VectorStep(0, tok(selected), alternatives[0][1] if alternatives else 0.0, alts)


def local(*entries: tuple[str, float]) -> list[LocalToken]:
    return [
        LocalToken(id=i, raw=t.encode(), logprob=lp, rank=i + 1)
        for i, (t, lp) in enumerate(entries)
    ]


def lookup(tokens: list[LocalToken]) -> dict[bytes, LocalToken]:
    return {t.raw: t for t in tokens}


def test_same_argmax_and_alternatives_within_tolerance_pass() -> None:
    recorded = step("Ada", ("Ada", 0.0), ("La", -3.0), ("Una", -9999.0))
    top = local(("Ada", -0.5), ("Una", -1.0), ("La", -6.5))
    report = judge_step(recorded, top, lookup(top), tolerance=4.0)
    assert report.passed and report.argmax_ok
    # the API's -9999 placeholder is not compared
    assert [a.token.text for a in report.alternatives] == ["Ada", "La"]
    assert report.max_abs_delta == 3.5


def test_another_argmax_fails_even_with_every_alternative_present() -> None:
    recorded = step("Ada", ("Ada", -0.1), ("La", -2.5))
    top = local(("La", -0.9), ("Ada", -1.0))
    report = judge_step(recorded, top, lookup(top))
    assert not report.argmax_ok and not report.passed
    assert all(a.ok for a in report.alternatives)
    assert report.problems(20, 4.0) == ["argmax differs"]


def test_an_alternative_outside_the_local_top_k_fails() -> None:
    recorded = step("Ada", ("Ada", 0.0), ("Lady", -1.0))
    top = local(("Ada", -0.1), ("La", -2.0))
    far = LocalToken(id=99, raw=b"Lady", logprob=-12.0, rank=4000)
    report = judge_step(recorded, top, {**lookup(top), b"Lady": far})
    assert not report.passed and report.argmax_ok
    assert report.alternatives[1].local == far and report.alternatives[1].delta == -11.0
    assert report.problems(2, 4.0) == ["'Lady': local rank 4000, not in the top 2"]


def test_an_alternative_beyond_the_tolerance_fails_and_the_bound_is_inclusive() -> None:
    recorded = step("Ada", ("Ada", 0.0), ("La", -1.0))
    at_bound = local(("Ada", -0.2), ("La", -5.0))
    assert judge_step(recorded, at_bound, lookup(at_bound), tolerance=4.0).passed
    beyond = local(("Ada", -0.2), ("La", -5.01))
    report = judge_step(recorded, beyond, lookup(beyond), tolerance=4.0)
    assert not report.passed
    assert report.problems(20, 4.0) == ["'La': |Δlogprob| 4.010 > 4"]


def test_bytes_no_local_token_has_are_reported_as_absent() -> None:
    recorded = step("Ada", ("Ada", 0.0), ("zz", -0.5))
    top = local(("Ada", 0.0))
    report = judge_step(recorded, top, lookup(top))
    assert report.alternatives[1].local is None and report.alternatives[1].delta is None
    assert report.problems(20, 4.0) == ["'zz': no local token has these bytes"]


def test_alternatives_without_bytes_are_not_compared() -> None:
    recorded = VectorStep(
        0, tok("a"), 0.0, (Alternative(tok("a"), 0.0), Alternative(VectorToken(b"", ""), -0.1))
    )
    top = local(("a", -0.1))
    assert judge_step(recorded, top, lookup(top)).passed
