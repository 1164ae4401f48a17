# Two commands a newcomer needs: `make test` and `make serve`.
# Everything lives in .venv/ at the repo root: `make serve` installs only the runtime
# subset (requirements-runtime.lock), `make test` adds the test tools and the oracle.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
RUNTIME := $(VENV)/.runtime-installed
SERVE_BUILT := $(VENV)/.ds4-runtime-built
DEPS   := $(VENV)/.deps-installed
ORACLE := $(VENV)/.oracle-installed
RAY    := $(VENV)/.ray-installed
LMEVAL := $(VENV)/.lmeval-installed
BUILT  := $(VENV)/.ds4-built
NATIVE := $(wildcard native/*/*.c native/*/*.h native/build/*.py native/vulkan/*.comp native/vulkan/*.glsl)

.PHONY: all env build lint typecheck unit test test-all serve wheel lock clean

all: build

$(BIN)/python:
	@echo "==> ds4: creating $(VENV)"
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"

# What `ds4` needs to run, nothing more (derived from requirements.lock by
# tools/runtime_lock.py): no test tools, no torch.
$(RUNTIME): requirements-runtime.lock | $(BIN)/python
	@echo "==> ds4: installing runtime dependencies (requirements-runtime.lock)"
	$(BIN)/pip install --require-hashes --progress-bar on -r requirements-runtime.lock
	touch $@

$(SERVE_BUILT): $(RUNTIME) pyproject.toml $(NATIVE)
	@echo "==> ds4: building the native code (cffi extensions)"
	$(BIN)/pip install --quiet --no-deps --no-build-isolation --editable .
	touch $@

# Pinned, hash-checked dependencies (regenerate with `make lock`).
$(DEPS): requirements.lock | $(BIN)/python
	@echo "==> ds4: installing runtime and test dependencies (requirements.lock)"
	$(BIN)/pip install --quiet --require-hashes -r requirements.lock
	touch $@

# The numerical oracle (torch CPU + transformers) for the oracle tests; see the lock file.
$(ORACLE): requirements-oracle.lock $(DEPS)
	@echo "==> ds4: installing the test oracle (torch CPU + transformers)"
	$(BIN)/pip install --quiet --no-deps -r requirements-oracle.lock
	touch $@

# Ray for the distributed backend and its tests (the `distributed` extra; ADR 0057).
$(RAY): requirements-ray.lock $(DEPS)
	@echo "==> ds4: installing Ray for the distributed backend (requirements-ray.lock)"
	$(BIN)/pip install --quiet --require-hashes --no-deps -r requirements-ray.lock
	touch $@

# lm-evaluation-harness for its acceptance test (tests/integration/lmeval, docs/lm-eval.md);
# on top of the oracle's torch and transformers, never in requirements.lock.
$(LMEVAL): requirements-lmeval.lock $(ORACLE)
	@echo "==> ds4: installing lm-evaluation-harness (requirements-lmeval.lock)"
	$(BIN)/pip install --quiet --require-hashes --no-deps -r requirements-lmeval.lock
	touch $@

# The package build compiles the cffi extensions (no lazy compilation at import).
$(BUILT): $(DEPS) $(ORACLE) $(RAY) $(LMEVAL) pyproject.toml $(NATIVE)
	@echo "==> ds4: building the native code (cffi extensions)"
	$(BIN)/pip install --quiet --no-deps --no-build-isolation --editable .
	touch $@

env: $(DEPS)
build: $(BUILT)

lint: $(BUILT)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(BUILT)
	$(BIN)/mypy

unit: $(BUILT)
	$(BIN)/pytest tests/unit -q

test: lint typecheck
	$(BIN)/pytest -q

# Includes tests marked slow.
test-all: lint typecheck
	$(BIN)/pytest -q -m ''

# The server on the default model (-m / $$DS4_MODEL / ./ds4flash.gguf, else the demo model
# shipped in models/demo.gguf, docs/demo-model.md). Extra flags: ARGS="...".
serve: $(SERVE_BUILT)
	@echo "==> ds4: starting the server"
	$(BIN)/ds4 server $(ARGS)

# The sdist and the manylinux wheel in dist/ (docs/library.md#wheels): built offline with
# the locked setuptools/wheel/cffi (--no-isolation), the wheel built from the sdist, then
# retagged by auditwheel (the extensions need only glibc: nothing is grafted).
wheel: $(DEPS)
	rm -rf dist
	$(BIN)/python -m build --no-isolation --outdir dist/raw
	PATH="$(abspath $(BIN)):$$PATH" $(BIN)/auditwheel repair --wheel-dir dist dist/raw/*.whl
	mv dist/raw/*.tar.gz dist/ && rm -rf dist/raw

lock:
	uv pip compile pyproject.toml build-requirements.in --extra dev --generate-hashes \
	    --python-version 3.11 --no-header -o requirements.lock
	$(BIN)/python -m tools.runtime_lock

clean:
	rm -rf $(VENV) build dist src/*.egg-info src/ds4/_native_*.so
