"""Shared test fixtures: tiny hand-made instances whose numbers can be checked by hand."""

from __future__ import annotations

import copy
import math
import multiprocessing
from typing import Any

import pytest

from jctlab.model import Instance


def tiny_dict(**cluster_over: Any) -> dict[str, Any]:
    """Node n0: two V100s (the second slower for class A), node n1: two P100s."""
    d = {
        "format": "jctlab.instance/1",
        "name": "tiny",
        "problem": "offline",
        "objective": "mean_jct",
        "cluster": {
            "nodes": [
                {"name": "n0", "cpus": 8, "mem_gb": 64,
                 "gpus": [{"type": "v100", "variability": {"A": 1.0}}, {"type": "v100", "variability": {"A": 1.25}}]},
                {"name": "n1", "cpus": 8, "mem_gb": 64, "gpus": [{"type": "p100"}, {"type": "p100"}]},
            ],
            "intra_node_gbps": 100.0, "inter_node_gbps": 25.0, "locality_penalty": 1.5,
            "split": "proportional", "interference": {}, "restart_s": 10.0,
        },
        "jobs": [
            {"name": "a", "arrival": 0.0, "batch": 64, "iterations": 100,
             "samples_per_s": {"v100": 100.0, "p100": 50.0}, "comm_mb": 100.0, "sizes": [1, 2], "class": "A"},
            {"name": "b", "arrival": 5.0, "batch": 32, "iterations": 50,
             "samples_per_s": {"v100": 64.0, "p100": 32.0}, "comm_mb": 0.0, "sizes": [1, 2], "class": "B"},
        ],
    }
    d["cluster"].update(cluster_over)
    return d


def pytest_sessionfinish(session, exitstatus):
    """A test that fails while a child process still runs (a daemon waiting on its pipe, a solver worker) must not
    hang the run at exit, where multiprocessing joins its children: kill what is left."""
    for proc in multiprocessing.active_children():
        proc.kill()
        proc.join(5)


@pytest.fixture
def tiny() -> Instance:
    return Instance.from_dict(tiny_dict())


@pytest.fixture
def tiny_d() -> dict[str, Any]:
    return copy.deepcopy(tiny_dict())


@pytest.fixture
def large_path():
    """``offline_cpsat.solve`` forced onto its large-instance path (no complete option enumeration), as a
    function of a tiny instance that checks the result against brute force: the schedule replays with the
    claimed objective, and bound ≤ optimum ≤ objective. Returns the result."""
    from formulations import brute
    from formulations.offline import cpsat as offline_cpsat
    from formulations.offline.concrete import ConcreteParams
    from formulations.offline.pipeline import OfflineParams
    from jctlab.replay import replay

    params = offline_cpsat.CpsatParams(OfflineParams(concrete=ConcreteParams(complete_limit=0)))

    def run(inst):
        opt = brute.solve(inst).objective
        r = offline_cpsat.solve(inst, time_limit=20, threads=1, seed=0, params=params)
        rep = replay(inst, r.claimed_schedule())
        assert rep.valid and math.isclose(rep.objective, r.objective, rel_tol=1e-9)
        assert r.lower_bound <= opt * (1 + 1e-9) and r.objective >= opt * (1 - 1e-9)
        return r

    return run
