"""A tiny suite for the harness tests: three classes, seconds to build and run (inline executor)."""

from __future__ import annotations

import atexit
import json
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

from evaluation.build import BuildOptions, build
from evaluation.suites import load_suite

TINY = {
    "format": "jctlab.suite/1", "name": "tiny", "version": 1, "description": "harness tests", "requires_data": False,
    "evaluate": {"methods": ["fifo-firstfit", "sjf+pal"], "time_limit_s": 2, "threads": 1},
    "build": {"method": "auto", "time_limit_s": 5, "threads": 1, "seed": 0,
              "best_of": ["fifo+packed-sticky", "srtf+pal"], "keep": "all"},
    "families": [
        {"name": "static", "function": "jctlab.generators:static_instance",
         "kwargs": {"gpus": 4, "nodes": 2, "jobs": 3}, "seeds": [10000]},
        {"name": "offline", "function": "jctlab.generators:offline_instance",
         "kwargs": {"gpus": 4, "nodes": 2, "jobs": 4, "max_size": 2}, "seeds": [10000, 10001]},
        {"name": "queue", "function": "evaluation.generators:bursty_instance",
         "kwargs": {"gpus": 2, "nodes": 1, "jobs": 4, "max_size": 2}, "seeds": [10000]},
        {"name": "preemptive", "function": "jctlab.generators:offline_instance",
         "kwargs": {"gpus": 4, "nodes": 2, "jobs": 4, "max_size": 2, "problem": "preemptive"}, "seeds": [10000]},
    ],
    "instances": [],
}


@lru_cache(maxsize=None)
def tiny_suite_path() -> Path:
    """The tiny suite, built once per test session (removed at exit); tests must not change its files."""
    d = Path(tempfile.mkdtemp(prefix="jctlab-tiny-suite-"))
    atexit.register(shutil.rmtree, d, True)
    return make_tiny_suite(d)


def make_tiny_suite(folder: Path) -> Path:
    """Write and build the tiny suite in ``folder``; returns its manifest path."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tiny.json"
    path.write_text(json.dumps(TINY))
    build(load_suite(str(path)), BuildOptions(folder / "work", executor="inline", progress=False))
    return path


SLOW_POLICY = '''
"""A user's own policy, given to jctlab evaluate as slowpol:factory (no entry point)."""
import time

from jctlab.policies import FifoFirstFit


class Slow:
    def __init__(self, inst, seed=0, delay=0.05):
        self.inner = FifoFirstFit(inst)
        self.delay = delay

    def decide(self, sim):
        time.sleep(self.delay)
        return self.inner.decide(sim)


def factory(inst, seed=0, delay=0.05):
    return Slow(inst, seed, delay)
'''
