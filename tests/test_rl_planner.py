"""The candidate planner (rl.candidates) gives the same candidates as its first, object-by-object
implementation (tests/rl_planner_reference.py) on random states of random instances: a law over
topology, interference, parameter servers, CPU/memory tables and variability, with the episode's memo
carried across decision points (so a stale memo entry would show)."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jctlab.generators import offline_instance
from jctlab.simulate import PolicyError
from rl.candidates import Planner, PlannerCache
from rl.envs import EnvConfig, SchedulingEnv

from .rl_planner_reference import ReferencePlanner

CFG = EnvConfig(max_jobs=12, max_running=12, max_nodes=8, max_shapes=8)


def same_rows(new, old) -> None:
    assert len(new) == len(old)
    for rn, ro in zip(new, old):
        assert len(rn) == len(ro)
        for a, b in zip(rn, ro):
            assert (a is None) == (b is None)
            if a is not None:
                assert (a.job, a.shape, a.rule, a.alloc, a.nodes, a.spans_sockets, a.switch_share) == \
                       (b.job, b.shape, b.rule, b.alloc, b.nodes, b.spans_sockets, b.switch_share)
                assert (a.iter_time, a.base_time, a.colocation) == (b.iter_time, b.base_time, b.colocation)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 9_999), gpus=st.sampled_from([4, 8, 16]), topology=st.booleans(),
       interference=st.sampled_from([0.0, 0.2]), ps=st.booleans(), cpu_mem=st.booleans(),
       variability=st.sampled_from([0.0, 0.1]), act_seed=st.integers(0, 99))
def test_planner_equals_the_reference_on_random_states(seed, gpus, topology, interference, ps, cpu_mem,
                                                       variability, act_seed):
    inst = offline_instance(gpus=gpus, nodes=max(1, gpus // 4), jobs=10, interarrival_s=200, duration_h=(0.1, 0.5),
                            variability=variability, locality_penalty=1.3, topology=topology,
                            interference=interference, ps=ps, cpu_mem=cpu_mem, seed=seed)
    env = SchedulingEnv(inst, CFG)
    obs, _ = env.reset(seed=0)
    rng = np.random.default_rng(act_seed)
    done, checked = False, 0
    while not done:
        d = env.decision
        ref = ReferencePlanner(inst, env.sim.engine, CFG.max_shapes, env.sim.waiting)
        fresh = Planner(inst, env.sim.engine, CFG.max_shapes, env.sim.waiting)       # no memo
        assert d.planner.free == ref.free and d.planner.free_count == ref.free_count
        for w, j in enumerate(d.window):
            if j in env.stopped:
                continue
            old = ref.candidates(j)
            same_rows(d.cands[w], old)
            same_rows(fresh.candidates(j), old)
            assert d.planner.shapes(j) == ref.shapes(j)
            checked += 1
        try:
            obs, _, done, _, _ = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        except PolicyError:       # a PS job as large as the cluster: its server finds no CPU at the fair share
            break
    assert checked > 0


def test_a_cache_made_for_another_instance_is_not_used():
    a = offline_instance(gpus=8, nodes=2, jobs=4, seed=1)
    b = offline_instance(gpus=8, nodes=2, jobs=4, seed=2)
    env = SchedulingEnv(b, CFG)
    env.reset(seed=0)
    p = Planner(b, env.sim.engine, 8, env.sim.waiting, PlannerCache(a))
    assert p.cache.inst is b
