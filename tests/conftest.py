"""Shared test fixtures: tiny hand-made instances whose numbers can be checked by hand."""

from __future__ import annotations

import copy
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


@pytest.fixture
def tiny() -> Instance:
    return Instance.from_dict(tiny_dict())


@pytest.fixture
def tiny_d() -> dict[str, Any]:
    return copy.deepcopy(tiny_dict())
