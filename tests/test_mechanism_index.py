"""The mechanisms on the maintained index emit exactly the schedules of the plain scans.

Law: for every QUEUE+PLACEMENT policy, both mechanisms (rounds, event-driven) and any instance,
``build(..., index=True)`` (free-GPU index, incremental queue order, non-sticky rounds re-placed only
from the first change) and ``build(..., index=False)`` (every round re-sorted and re-placed by scanning
the free map, the definition) give the same segments: same jobs, times and GPU ids, in the same order.
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from baselines.families import build
from baselines.placement import PLACEMENTS
from baselines.queues import QUEUES
from jctlab.generators import offline_instance
from jctlab.simulate import simulate

NAMES = [f"{q}+{p}" for q, p in itertools.product(QUEUES, PLACEMENTS)]


def segments(inst, name: str, index: bool, seed: int):
    q, p = name.split("+")
    pol = build(q, p, inst, seed=seed, round_s=300.0, index=index)
    sched, rep = simulate(inst, pol, method=name)
    assert rep.valid, rep.error
    return sched.segments


@settings(max_examples=30, deadline=None)
@given(name=st.sampled_from(NAMES), problem=st.sampled_from(["preemptive", "offline"]),
       nodes=st.integers(2, 5), per_node=st.sampled_from([2, 3, 4]), uneven=st.booleans(),
       types=st.sampled_from([("v100",), ("v100", "k80")]), restrict=st.booleans(),
       variability=st.sampled_from([0.0, 0.1]), seed=st.integers(0, 9999))
def test_index_and_scans_emit_the_same_schedule(name, problem, nodes, per_node, uneven, types, restrict,
                                                variability, seed):
    gpus = nodes * per_node - (1 if uneven else 0)
    inst = offline_instance(gpus=gpus, nodes=nodes, jobs=18, types=types, interarrival_s=200.0,
                            duration_h=(0.05, 0.5), max_size=min(4, gpus), seed=seed, variability=variability,
                            locality_penalty=1.5, restart_s=10.0, problem=problem)
    if restrict and len(types) > 1:
        # every third job that fits on the first type's GPUs cannot use the second type: those are placed by
        # the scan on the filtered map (one that does not fit there would never run)
        first = sum(g.type == types[0] for g in inst.cluster.gpus)
        jobs = [replace(j, samples_per_s={**j.samples_per_s, types[1]: 0.0}) if i % 3 == 0 and min(j.sizes) <= first
                else j for i, j in enumerate(inst.jobs)]
        inst = inst.replace_jobs(jobs)
    assert segments(inst, name, True, seed) == segments(inst, name, False, seed)
