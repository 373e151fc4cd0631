"""Laws of the simulator, checked by Hypothesis on generated instances and schedules."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jctlab.generators import offline_instance, static_instance
from jctlab.model import Allocation, Schedule, Segment
from jctlab.policies import FifoFirstFit
from jctlab.replay import replay
from jctlab.simulate import simulate
from jctlab.speed import base_iteration_time


def list_schedule(inst, choices):
    """Jobs in arrival order, each on ``choices`` GPUs of a random node order, at the earliest time."""
    free_at = {g.id: 0.0 for g in inst.cluster.gpus}
    segs, expected = [], {}
    for j, job in enumerate(sorted(inst.jobs, key=lambda x: x.arrival)):
        pick = choices[j % len(choices)]
        n = job.sizes[pick % len(job.sizes)]
        usable = [g.id for g in inst.cluster.gpus if job.can_use(g.type)]
        rot = pick % len(usable)
        usable = usable[rot:] + usable[:rot]
        gpus = tuple(sorted(usable, key=lambda g: free_at[g])[:n])
        start = max([job.arrival] + [free_at[g] for g in gpus])
        end = start + job.iterations * base_iteration_time(job, Allocation(gpus), inst.cluster)
        for g in gpus:
            free_at[g] = end
        segs.append(Segment(job.name, start, None, Allocation(gpus)))
        expected[job.name] = end
    return Schedule(inst.name, "list", tuple(segs)), expected


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10_000), jobs=st.integers(1, 12), gpus=st.integers(2, 12),
       var=st.sampled_from([0.0, 0.1]), lam=st.sampled_from([1.0, 1.3]),
       choices=st.lists(st.integers(0, 50), min_size=1, max_size=8))
def test_non_preemptive_replay_is_start_plus_iterations_times_t_iter(seed, jobs, gpus, var, lam, choices):
    inst = offline_instance(gpus=gpus, nodes=max(1, gpus // 4), jobs=jobs, seed=seed, variability=var,
                            locality_penalty=lam, max_size=4)
    s, expected = list_schedule(inst, choices)
    r = replay(inst, s)
    assert r.valid, r.error
    for name, c in expected.items():
        assert r.completion[name] == pytest.approx(c, rel=1e-9)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), jobs=st.integers(1, 15), inter=st.sampled_from([0.0, 0.3]))
def test_online_simulation_replays_to_the_same_completions(seed, jobs, inter):
    """The schedule a policy produced replays valid, and replay agrees with the live simulation."""
    inst = offline_instance(gpus=8, nodes=2, jobs=jobs, seed=seed, interference=inter, max_size=4)
    s, r = simulate(inst, FifoFirstFit(inst))
    assert r.valid
    r2 = replay(inst, s)
    assert r2.valid and r2.objective == pytest.approx(s.claimed.objective, rel=1e-9)
    # interference only slows: every job takes at least its interference-free duration
    for seg in s.segments:
        job = inst.job[seg.job]
        assert r2.completion[seg.job] - seg.start >= job.iterations * base_iteration_time(job, seg.alloc, inst.cluster) * (1 - 1e-9)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_generators_are_deterministic(seed):
    assert static_instance(seed=seed).to_dict() == static_instance(seed=seed).to_dict()
    assert offline_instance(seed=seed).to_dict() == offline_instance(seed=seed).to_dict()
