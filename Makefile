# One command to set up and run the main job (`make demo`), one to set up and run the tests (`make test`).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.jctlab-installed

.PHONY: setup demo test bench browser fuzz clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first, pinned: the local CPU wheel (an unpinned torch pulls gigabytes of CUDA packages)
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e ".[test]"
	# compile the numba kernels now (~15 s, cached on disk), not inside the first solver's time limit
	$(PY) -m samplers.warm
	touch $(STAMP)

setup: $(STAMP)

# the main job: every method of the quick suite, replayed and scored; prints the gap table and the report's path
demo: setup
	$(VENV)/bin/jctlab evaluate --suite quick --out runs/demo --report

test: setup browser
	$(PY) -m pytest -p no:cacheprovider

# the report test loads the HTML in headless Chromium (Debian's package): install it where missing
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } || \
	  echo "warning: chromium could not be installed: the browser test will skip"

# saved under .benchmarks/; compared with the last saved run, failing when a median regresses by more than BENCH_FAIL
BENCH_FAIL ?= median:50%
bench: setup
	$(PY) -m pytest benchmarks --benchmark-only -q -p no:cacheprovider --benchmark-autosave \
	  $$(ls .benchmarks/*/*.json >/dev/null 2>&1 && echo --benchmark-compare --benchmark-compare-fail=$(BENCH_FAIL))

# the long fuzz run of issue 44: hostile inputs through every verb, the count of each outcome
FUZZ_CASES ?= 2000
fuzz: setup
	$(PY) scripts/fuzz.py --cases $(FUZZ_CASES) --log runs/fuzz-$(FUZZ_CASES).jsonl

clean:
	rm -rf $(VENV) .pytest_cache .benchmarks build *.egg-info
