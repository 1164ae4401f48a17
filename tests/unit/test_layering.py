"""The house layering rule, enforced on the source tree (docs/adr/0001, docs/adr/0048)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "ds4"

# Modules that do I/O, threads, clocks, randomness or environment access.
IMPURE_MODULES = {
    "asyncio", "concurrent", "ctypes", "datetime", "http", "io", "mmap", "multiprocessing",
    "os", "pathlib", "random", "secrets", "select", "shutil", "signal", "socket",
    "subprocess", "sys", "tempfile", "threading", "time", "urllib", "uuid", "anyio",
    "litestar", "uvicorn", "httpx", "cffi", "gguf", "prompt_toolkit", "tqdm",
}  # fmt: skip


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            raise AssertionError(f"{path}: relative import; use absolute ds4.* imports")
    return names


def layer_files(layer: str) -> list[Path]:
    return sorted((SRC / layer).rglob("*.py"))


@pytest.mark.parametrize("path", layer_files("domain"), ids=lambda p: str(p.relative_to(SRC)))
def test_domain_is_pure(path: Path) -> None:
    for name in imported_modules(path):
        top = name.split(".")[0]
        # domain/ may name ports (the Protocols its orchestration talks through)
        assert not name.startswith(("ds4.adapters", "ds4.apps", "ds4.lib", "ds4.wire")), (
            f"{path.name} imports {name}: domain/ must not depend on outer layers"
        )
        assert top not in IMPURE_MODULES, f"{path.name} imports {name}: domain/ must stay pure"


@pytest.mark.parametrize("path", layer_files("ports"), ids=lambda p: str(p.relative_to(SRC)))
def test_ports_depend_only_on_domain(path: Path) -> None:
    for name in imported_modules(path):
        assert not name.startswith(("ds4.adapters", "ds4.apps", "ds4.lib", "ds4.wire")), (
            f"{path.name} imports {name}"
        )


@pytest.mark.parametrize("path", layer_files("wire"), ids=lambda p: str(p.relative_to(SRC)))
def test_wire_is_pure_and_sees_only_the_core(path: Path) -> None:
    """wire/ (the API formats, ADR 0048) reads domain types and ports, nothing outside."""
    for name in imported_modules(path):
        top = name.split(".")[0]
        assert not name.startswith(("ds4.adapters", "ds4.apps", "ds4.lib")), (
            f"{path.name} imports {name}: wire/ must not depend on adapters, apps or lib"
        )
        assert top not in IMPURE_MODULES, f"{path.name} imports {name}: wire/ must stay pure"


# Who may speak the wire formats (ADR 0048): the HTTP adapter, and the entry points —
# the commands and the library (ds4.lib reads chat bodies as `--render-chat` does).
WIRE_CLIENTS = ("adapters/http", "apps", "lib")


@pytest.mark.parametrize(
    "path",
    [
        p
        for p in SRC.rglob("*.py")
        if not p.relative_to(SRC).as_posix().startswith(("wire/", *WIRE_CLIENTS))
    ],
    ids=lambda p: str(p.relative_to(SRC)),
)
def test_only_the_http_adapter_and_entry_points_import_wire(path: Path) -> None:
    for name in imported_modules(path):
        assert not name.startswith("ds4.wire"), (
            f"{path.relative_to(SRC)} imports {name}: only adapters/http, apps and lib use ds4.wire"
        )


@pytest.mark.parametrize("path", layer_files("adapters"), ids=lambda p: str(p.relative_to(SRC)))
def test_adapters_never_import_apps(path: Path) -> None:
    for name in imported_modules(path):
        assert not name.startswith(("ds4.apps", "ds4.lib")), f"{path.name} imports {name}"


# The composition root: the only apps code that names adapters.
COMPOSITION_ROOT = {"wiring.py", "backends.py", "bootstrap.py", "server_bootstrap.py"}


@pytest.mark.parametrize(
    "path",
    [p for p in layer_files("apps") if p.name not in COMPOSITION_ROOT],
    ids=lambda p: str(p.relative_to(SRC)),
)
def test_apps_reach_adapters_only_through_the_composition_root(path: Path) -> None:
    for name in imported_modules(path):
        assert not name.startswith("ds4.adapters"), (
            f"{path.name} imports {name}: go through ds4.apps.wiring or ds4.apps.bootstrap"
        )


@pytest.mark.parametrize("path", layer_files("apps"), ids=lambda p: str(p.relative_to(SRC)))
def test_apps_never_import_the_library(path: Path) -> None:
    for name in imported_modules(path):
        assert not name.startswith("ds4.lib"), f"{path.name} imports {name}: ds4.lib is outermost"


# ds4.lib is an entry point like the commands (docs/adr/0056-library-and-wheel.md): it
# builds its graph through the composition root and never names an adapter itself.
@pytest.mark.parametrize("path", layer_files("lib"), ids=lambda p: str(p.relative_to(SRC)))
def test_the_library_reaches_adapters_only_through_the_composition_root(path: Path) -> None:
    for name in imported_modules(path):
        assert not name.startswith("ds4.adapters"), (
            f"{path.name} imports {name}: go through ds4.apps.wiring or ds4.apps.bootstrap"
        )


def test_the_composition_root_exists() -> None:
    assert {p.name for p in layer_files("apps")} >= COMPOSITION_ROOT


def test_rule_sees_a_violation(tmp_path: Path) -> None:
    """The checker itself must catch what it is meant to catch."""
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import os\nfrom ds4.adapters.gguf import reader\nfrom ds4.wire import sse\n",
        encoding="utf-8",
    )
    assert {"os", "ds4.adapters.gguf", "ds4.wire"} <= imported_modules(bad)


def test_every_layer_has_code() -> None:
    for layer in ("domain", "ports", "wire", "adapters", "apps"):
        assert len(layer_files(layer)) > 1, layer
