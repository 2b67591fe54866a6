# Two commands for a new user: `make demo` and `make test`; two more for a contributor:
# `make check` and `make test-quick`. Each sets up .venv itself.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-quick check bench clean browser fuzz

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The demo has only what `pip install oomlens` installs (no Ray, Playwright or linters):
# a venv of its own, so the tests' and checks' extras never make it pass
DEMO := .venv-demo
$(DEMO)/.installed: pyproject.toml
	$(PYTHON) -m venv $(DEMO)
	$(DEMO)/bin/pip install --quiet --upgrade pip
	$(DEMO)/bin/pip install --quiet -e .
	touch $@

demo: $(DEMO)/.installed
	$(DEMO)/bin/oomlens parse fixtures/sessions/ray2.60-b-rl-actor-oom

test: $(STAMP) browser
	$(BIN)/python -m pytest

# The edit loop: stops at the first failure, and leaves out the tests marked slow (the
# robustness sweep, the browser, big generated logs, many processes); `make test` runs them.
test-quick: $(STAMP)
	$(BIN)/python -m pytest -x -p no:cacheprovider -m 'not slow'

# Lint, formatting and types; ruff and mypy read their settings from pyproject.toml.
check: $(STAMP)
	$(BIN)/ruff check oomlens tests bench
	$(BIN)/ruff format --check oomlens tests bench
	$(BIN)/mypy

# Debian's Chromium for the HTML report's browser tests (Playwright drives it; never `playwright install`)
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

# Mutated real logs for FUZZ_MINUTES (10 by default; 60 for a long run); each failure is kept
# under tests/fuzz_regressions/, which `make test` replays.
fuzz: $(STAMP)
	FUZZ_MINUTES=$${FUZZ_MINUTES:-10} $(BIN)/python tests/fuzzing.py

# the 1 GB tree against ripgrep, lnav and the floor of a per-line Python reader, 1 MB of each kind of hostile input, then a run failing in a loop
bench: $(STAMP)
	$(BIN)/python bench/run.py; tree=$$?; $(BIN)/python bench/hostile.py; hostile=$$?; $(BIN)/python bench/flood.py && exit $$((tree || hostile))

clean:
	rm -rf $(VENV) $(DEMO) build dist *.egg-info
