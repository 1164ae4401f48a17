# Two commands a newcomer needs: `make test` and `make serve`.
# Everything lives in .venv/ at the repo root, created from requirements.lock.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
DEPS   := $(VENV)/.deps-installed
ORACLE := $(VENV)/.oracle-installed
BUILT  := $(VENV)/.ds4-built
NATIVE := $(wildcard native/*/*.c native/*/*.h native/build/*.py)

.PHONY: all env build lint typecheck unit test test-all serve lock clean

all: build

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"

# Pinned, hash-checked dependencies (regenerate with `make lock`).
$(DEPS): requirements.lock | $(BIN)/python
	$(BIN)/pip install --quiet --require-hashes -r requirements.lock
	touch $@

# The numerical oracle (torch CPU + transformers) for the oracle tests; see the lock file.
$(ORACLE): requirements-oracle.lock $(DEPS)
	$(BIN)/pip install --quiet --no-deps -r requirements-oracle.lock
	touch $@

# The package build compiles the cffi extensions (no lazy compilation at import).
$(BUILT): $(DEPS) $(ORACLE) pyproject.toml $(NATIVE)
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
serve: $(BUILT)
	$(BIN)/ds4 server $(ARGS)

lock:
	uv pip compile pyproject.toml build-requirements.in --extra dev --generate-hashes \
	    --python-version 3.11 --no-header -o requirements.lock

clean:
	rm -rf $(VENV) build src/*.egg-info src/ds4/_native_*.so
