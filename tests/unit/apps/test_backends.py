"""The BACKENDS registry (apps/backends.py): every spec names every piece, the flags
read it, and no code outside it tells backends apart by comparing their names."""

from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from ds4.apps import backends
from ds4.apps.backends import BACKENDS, BackendSpec
from ds4.domain.engine_math.lowprec import numerics_named

SRC = Path(backends.__file__).resolve().parents[1]  # src/ds4
REGISTRY = Path(backends.__file__).resolve()
NAMES = frozenset(BACKENDS)
# The same word meaning something else: the tokenizer's pure-Python implementation
# ("native" | "reference"), not a compute backend.
OTHER_MEANINGS = {"adapters/tokenizer/vocabulary.py"}


@pytest.mark.parametrize("spec", BACKENDS.values(), ids=lambda s: s.name)
def test_every_spec_names_every_piece(spec: BackendSpec) -> None:
    assert all(f.default is dataclasses.MISSING for f in dataclasses.fields(BackendSpec))
    assert BACKENDS[spec.name] is spec
    assert spec.help and spec.title and spec.package.startswith("ds4.adapters.compute.")
    assert spec.numerics and all(numerics_named(n).name == n for n in spec.numerics)
    for piece in (spec.unavailable, spec.runner, spec.expert_cache, spec.step_report):
        assert callable(piece)
    for optional in (spec.distributed, spec.drafter):
        assert optional is None or callable(optional)
    reason = spec.unavailable()
    assert reason is None or (isinstance(reason, str) and reason)


def test_the_flags_offer_every_backend_and_test_doubles_only_where_declared() -> None:
    assert backends.backend_choices(scripted=True) == list(BACKENDS)
    doubles = {n for n, s in BACKENDS.items() if s.plays_script}
    assert set(backends.backend_choices()) == NAMES - doubles
    assert backends.default_backend() in backends.backend_choices()
    for name in BACKENDS:
        assert name in backends.backend_help(scripted=True)


def _compared_names(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, name) of every backend name literal that is an operand of ==, != or in."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Compare):
            continue
        if not any(isinstance(op, ast.Eq | ast.NotEq | ast.In | ast.NotIn) for op in node.ops):
            continue
        for operand in [node.left, *node.comparators]:
            for leaf in ast.walk(operand):
                if isinstance(leaf, ast.Constant) and leaf.value in NAMES:
                    found.append((node.lineno, str(leaf.value)))
    return found


def test_no_code_outside_the_registry_compares_backend_names() -> None:
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        if path == REGISTRY or str(path.relative_to(SRC)) in OTHER_MEANINGS:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offenders += [f"{path.relative_to(SRC)}:{n} {v!r}" for n, v in _compared_names(tree)]
    assert not offenders, "backend-specific behaviour is a BackendSpec field: " + ", ".join(
        offenders
    )


def test_the_scan_sees_a_comparison() -> None:
    tree = ast.parse(
        'if args.backend == "cpu" or b in ("vulkan", "x") or "scripted" != c:\n    pass\n'
        'label = "reference"\n'
    )
    assert [v for _, v in _compared_names(tree)] == ["cpu", "vulkan", "scripted"]
