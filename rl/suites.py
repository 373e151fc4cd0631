"""Named instance families for training and for the held-apart measurements.

A family is a seeded generator (:func:`jctlab.generators.offline_instance`) with drawn sizes. Seeds below
9,000 are for training, 9,000-9,999 for development (choosing between trained variants), and
:func:`instances` with ``split="eval"`` gives seeds from 10,000 on (the project's evaluation range), so
training never sees a development or evaluation instance.

- ``small``: the issue's floor class: 8-12 jobs on 8 or 16 GPUs (4-GPU nodes) of three types (V100,
  P100, K80 nodes round robin), per-GPU variability σ = 0.1, locality penalty 1.3, Poisson arrivals
  every 15 min on average, 0.1-2 h jobs, half of them elastic (sizes up to 8).
- ``queue``: bursts: 8-16 jobs on 4 or 8 GPUs arriving every 200 s on average, 0.1-1 h jobs (sizes up
  to 4): jobs wait for GPUs.
- ``large``: generalization: 32-64 jobs on 32-64 GPUs, otherwise ``small``'s settings.
- ``topology``: ``small`` with the DGX-1-like topology of SPEC v1.1 (two sockets, PCIe switches of two
  GPUs; 8-GPU nodes so that sockets matter).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jctlab.errors import InputError
from jctlab.generators import offline_instance
from jctlab.model import Instance

EVAL_SEED = 10_000
DEV_SEED = 9_000        # seeds 9,000-9,999: development (model selection), never drawn for training


@dataclass(frozen=True)
class Family:
    name: str
    gpus: tuple[int, ...]
    jobs: tuple[int, ...]
    gpus_per_node: int = 4
    fixed: dict[str, Any] = field(default_factory=dict)

    def make(self, seed: int, problem: str = "offline") -> Instance:
        """The instance of this family with ``seed`` (sizes drawn from the seed, then the generator's draws)."""
        rng = np.random.default_rng([seed, 46])
        g = int(self.gpus[rng.integers(len(self.gpus))])
        j = int(self.jobs[rng.integers(len(self.jobs))])
        return offline_instance(gpus=g, nodes=max(1, g // self.gpus_per_node), jobs=j, seed=seed, problem=problem,
                                name=f"{self.name}-{problem}-k{g}-n{j}-seed{seed}", **self.fixed)


_COMMON = dict(variability=0.1, locality_penalty=1.3)
FAMILIES = {
    "small": Family("small", (8, 16), tuple(range(8, 13)),
                    fixed=dict(interarrival_s=900.0, duration_h=(0.1, 2.0), max_size=8, **_COMMON)),
    "queue": Family("queue", (4, 8), tuple(range(8, 17)),
                    fixed=dict(interarrival_s=200.0, duration_h=(0.1, 1.0), max_size=4, **_COMMON)),
    "large": Family("large", (32, 48, 64), (32, 40, 48, 56, 64),
                    fixed=dict(interarrival_s=450.0, duration_h=(0.1, 2.0), max_size=8, **_COMMON)),
    "topology": Family("topology", (16,), tuple(range(8, 13)), gpus_per_node=8,
                       fixed=dict(interarrival_s=900.0, duration_h=(0.1, 2.0), max_size=8, topology=True, **_COMMON)),
}


def family(name: str) -> Family:
    f = FAMILIES.get(name)
    if f is None:
        raise InputError("command line", "--suite", f"unknown family {name!r} (known: {', '.join(FAMILIES)})")
    return f


def instances(name: str, count: int, split: str = "eval", problem: str = "offline", start: int = 0) -> list[Instance]:
    """``count`` instances of a family: seeds 10,000 + start + i for ``eval``, start + i for ``train``."""
    base = EVAL_SEED if split == "eval" else 0
    if split == "train" and start + count > EVAL_SEED:
        raise ValueError("training seeds stay below 10,000")
    return [family(name).make(base + start + i, problem) for i in range(count)]


def training_source(names: str, problem: str = "offline"):
    """An env source drawing a family (of a comma-separated list) and a training seed per episode."""
    fams = [family(n.strip()) for n in names.split(",") if n.strip()]

    def source(rng: np.random.Generator) -> Instance:
        f = fams[int(rng.integers(len(fams)))]
        return f.make(int(rng.integers(0, DEV_SEED)), problem)

    return source
