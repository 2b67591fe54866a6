# Two commands for a new user: `make demo` and `make test`; two more for a contributor:
# `make check` and `make test-quick`. Each sets up .venv itself.
# Debian's CPython 3.11 where it can make a venv, else the python3 on PATH: Debian builds it with
# profile-guided and link-time optimisation and links the interpreter into its binary, where a
# pyenv or source build (first on PATH on some machines) calls a shared libpython built with
# neither; the same suite takes about a quarter less CPU on Debian's
PYTHON ?= $(shell /usr/bin/python3.11 -c 'import ensurepip, venv' >/dev/null 2>&1 && echo /usr/bin/python3.11 || echo python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test test-quick check bench clean browser fuzz

# `pip install -e` builds the native core (core/, maturin) into oomlens/_core*.so: again when its sources change
CORE   := core/Cargo.toml core/Cargo.lock $(wildcard core/src/*.rs)
CARGO  := cargo --quiet
$(STAMP): pyproject.toml $(CORE)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

# The demo has only what `pip install oomlens` installs (no Ray, Playwright or linters):
# a venv of its own, so the tests' and checks' extras never make it pass
DEMO := .venv-demo
$(DEMO)/.installed: pyproject.toml $(CORE)
	$(PYTHON) -m venv $(DEMO)
	$(DEMO)/bin/pip install --quiet --upgrade pip
	$(DEMO)/bin/pip install --quiet -e .
	touch $@

demo: $(DEMO)/.installed
	$(DEMO)/bin/oomlens parse fixtures/sessions/ray2.60-b-rl-actor-oom

# the core's own property tests (and the inputs they once failed on, core/proptest-regressions/) first,
# unoptimised, as `make check`'s clippy builds it (they share its build scripts and macros, a
# fresh machine compiles no optimised copy of the dependencies for them, and overflow checks are on);
# then the suite on TEST_JOBS processes (this machine's cores, at most 8: each collects the whole
# suite), each test file in one of them (the robustness sweep's cases spread: conftest.SPREAD):
# a file's module-wide fixtures (a Ray cluster, a browser) are made once. Bytecode is written
# whatever PYTHONDONTWRITEBYTECODE says: each of the hundreds of processes the suite starts (the
# command, workers, Ray's) would compile oomlens again, and each pytest process its tests
TEST_JOBS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n < 8 ? n : 8 )))
test: $(STAMP) browser
	$(CARGO) test --manifest-path core/Cargo.toml
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n $(TEST_JOBS) --dist loadfile

# The edit loop: stops at the first failure, and leaves out the tests marked slow (the
# robustness sweep, the browser, big generated logs, many processes); `make test` runs them.
test-quick: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -x -p no:cacheprovider -m 'not slow'

# Lint, formatting and types; ruff and mypy read their settings from pyproject.toml.
check: $(STAMP)
	$(BIN)/ruff check oomlens tests bench
	$(BIN)/ruff format --check oomlens tests bench
	$(BIN)/mypy
	$(CARGO) fmt --manifest-path core/Cargo.toml --check
	$(CARGO) clippy --all-targets --manifest-path core/Cargo.toml -- -D warnings

# Debian's Chromium for the HTML report's browser tests (Playwright drives it; never `playwright install`)
browser:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null)

# Mutated real logs for FUZZ_MINUTES (10 by default; 60 for a long run); each failure is kept
# under tests/fuzz_regressions/, which `make test` replays.
# Then the core's own entry under libFuzzer (cargo-fuzz and a nightly toolchain, where they are
# installed) for as long: an input it fails on is in core/fuzz/artifacts/entry/; copy it into
# core/fuzz/regressions/, which `make test` (cargo test) replays.
fuzz: $(STAMP)
	FUZZ_MINUTES=$${FUZZ_MINUTES:-10} $(BIN)/python tests/fuzzing.py
	@if cargo +nightly fuzz --version >/dev/null 2>&1; then cd core && cargo +nightly fuzz run entry fuzz/regressions -- -max_total_time=$$(( $${FUZZ_MINUTES:-10} * 60 )); else echo "cargo-fuzz or a nightly toolchain missing: the core's fuzzer not run"; fi

# the 1 GB tree against ripgrep, lnav and the floor of a per-line Python reader, 1 MB of each kind of hostile input, then a run failing in a loop
bench: $(STAMP)
	$(BIN)/python bench/run.py; tree=$$?; $(BIN)/python bench/hostile.py; hostile=$$?; $(BIN)/python bench/flood.py && exit $$((tree || hostile))

clean:
	rm -rf $(VENV) $(DEMO) build dist *.egg-info core/target oomlens/_core*.so
