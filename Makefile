# Lexlens: `make run` starts the app, `make test` runs the tests; both set up .venv first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: run test bench lint setup setup-dev browser clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# The CPU build of torch; a plain `torch` would pull a multi-GB CUDA build.
	$(BIN)/pip install -q "torch==2.13.0"

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed
	$(BIN)/pip install -q -e ".[dev]"
	touch $@

setup: $(VENV)/.installed
setup-dev: $(VENV)/.installed-dev

# Headless Chromium for the browser test (Debian package; never `playwright install`).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "could not install chromium: the browser test will be skipped"; \
	  else echo "chromium not found and not root: the browser test will be skipped"; fi; }

run: setup
	$(BIN)/streamlit run app/main.py --server.headless true

test: setup-dev browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest

bench: setup-dev
	$(BIN)/python -m bench.run --out bench/results.json

lint: setup-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

clean:
	rm -rf $(VENV) .pytest_cache .lexlens-cache
