# One command to set up and run the main job (`make demo`), one to set up and run the tests (`make test`).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.jctlab-installed

.PHONY: setup demo test bench clean

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

demo: setup
	$(PY) scripts/demo.py

test: setup
	$(PY) -m pytest -p no:cacheprovider

bench: setup
	$(PY) -m pytest benchmarks --benchmark-only -q -p no:cacheprovider

clean:
	rm -rf $(VENV) .pytest_cache .benchmarks build *.egg-info
