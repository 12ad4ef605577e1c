# Lexlens: `make run` starts the app, `make test` runs the tests; both set up .venv first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1

.PHONY: run test bench bench-scale lint setup setup-dev browser clean sample-collections

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# The CPU build of torch; a plain `torch` would pull a multi-GB CUDA build.
	$(BIN)/pip install -q "torch==2.13.0"

$(VENV)/.installed: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e .
	touch $@

# One resolve for the app and the dev tools (a second `pip install` re-checks everything).
$(VENV)/.installed-dev: $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e ".[dev]"
	touch $(VENV)/.installed $@

setup: $(VENV)/.installed
setup-dev: $(VENV)/.installed-dev

# Headless Chromium for the browser test (Debian package; never `playwright install`).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
	      || echo "could not install chromium: the browser test will be skipped"; \
	  else echo "chromium not found and not root: the browser test will be skipped"; fi; }

# Settings (offline, headless) come from app/.streamlit/config.toml.
run: setup
	$(BIN)/lexlens app

test: setup-dev browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest

# Every figure with its goal and whether it is met (bench/run.py documents the JSON shape),
# then bench/README.md written from it;
# the cold start drives headless Chromium, hence `browser`; PISA (pyterrier-pisa, the batched
# retrieval peer) is the bench-only extra.
bench: setup-dev browser
	$(BIN)/pip install -q -e ".[dev,bench]"
	$(BIN)/python -m bench.run --out bench/results.json
	$(BIN)/python -m bench.write_readme

# MS MARCO's size on this machine (bench/scale.py): a synthetic 8,841,823-item collection with
# SPLADE's sparsity imported, ranked, beside PISA, scipy and Seismic; it may take an hour, so
# `make bench` leaves it out. BENCH_SCALE_ARGS="--items 200000 --queries 500" rehearses it.
bench-scale: setup-dev
	$(BIN)/pip install -q -e ".[dev,bench]"
	$(BIN)/python -m bench.scale $(BENCH_SCALE_ARGS)
	$(BIN)/python -m bench.write_readme

lint: setup-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# Optional sample collections (`make test` never needs them), stored in LEXLENS_HOME: the
# scikit-image photos with captions and labels written for Lexlens (data/photos.csv), and
# Debian's public-domain openclipart-svg drawings rendered to PNG (data/make_openclipart.py).
LEXLENS_HOME ?= $(HOME)/.lexlens
OPENCLIPART_FOLDERS ?= animals,food,people,plants,transportation
sample-collections: setup-dev
	@{ command -v rsvg-convert >/dev/null 2>&1 && [ -d /usr/share/openclipart/svg ]; } || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
	      openclipart-svg librsvg2-bin >/dev/null; \
	  else echo "needs: apt-get install openclipart-svg librsvg2-bin (as root)"; exit 1; fi; }
	$(BIN)/python -c "from pathlib import Path; from lexlens.analysis.collections.workspace import \
	  load_sample_photos as f; f(Path('$(LEXLENS_HOME)/sources/photos'))"
	$(BIN)/lexlens index --encoder efficientnet-lite0-lexical \
	  --source $(LEXLENS_HOME)/sources/photos/photos.csv --out $(LEXLENS_HOME)/collections/photos
	$(BIN)/python data/make_openclipart.py --out $(LEXLENS_HOME)/sources/openclipart \
	  --folders $(OPENCLIPART_FOLDERS)
	$(BIN)/lexlens index --encoder efficientnet-lite0-lexical \
	  --source $(LEXLENS_HOME)/sources/openclipart/items.csv \
	  --out $(LEXLENS_HOME)/collections/openclipart

clean:
	rm -rf $(VENV) .pytest_cache .lexlens-cache
