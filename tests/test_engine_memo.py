"""The engine's shortcuts are their definitions.

- :class:`jctlab.speed.BaseTimes` (base times memoised by what the speed model reads) returns exactly
  :func:`jctlab.speed.base_iteration_time`, and refuses what it refuses.
- :func:`jctlab.resources.demand_on` with the cluster's fair-share table returns exactly the GPU-by-GPU
  sum of SPEC §4 (written out here), as :func:`jctlab.resources.node_demand` does.
- A replay whose heap of completion predictions is compacted many times (hundreds of stops and
  restarts) gives the completions of the same schedule replayed one job at a time.
- The simulator's round check bounds each job's run time over one GPU of each kind
  (:func:`jctlab.simulate.gpu_kinds`): the same bound as over every GPU.
- The nodes' CPUs, GB and jobs, accounted only from their first read while every start is at the fair
  share on nodes whose shares add exactly, hold what accounting at every start and stop holds; and the
  capacity check those starts skip could not have failed.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jctlab.engine import Engine
from jctlab.errors import InvalidSchedule
from jctlab.generators import offline_instance
from jctlab.model import Allocation, Instance, Schedule, Segment
from jctlab.replay import replay
from jctlab.resources import demand_on, exact_fair_shares, fair_shares, node_demand
from jctlab.simulate import gpu_kinds, least_run_time
from jctlab.speed import BaseTimes, SpeedError, base_iteration_time


def gpu_by_gpu(job, alloc, cluster):
    """SPEC §4 spelled out: per GPU its level (or its node's fair share), per server ``ps_cpus``."""
    cpu: dict[str, float] = {}
    mem: dict[str, float] = {}
    for g in alloc.gpus:
        node = cluster.node[cluster.gpu[g].node]
        n = node.name
        cpu[n] = cpu.get(n, 0.0) + (node.fair_cpus if alloc.cpus_per_gpu is None else alloc.cpus_per_gpu)
        mem[n] = mem.get(n, 0.0) + (node.fair_mem_gb if alloc.mem_gb_per_gpu is None else alloc.mem_gb_per_gpu)
    if job.ps is not None:
        for n in alloc.ps_nodes:
            cpu[n] = cpu.get(n, 0.0) + job.ps.ps_cpus
    return cpu, mem


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 9999), topology=st.booleans(), ps=st.booleans(), cpu_mem=st.booleans(),
       variability=st.sampled_from([0.0, 0.1]), penalty=st.sampled_from([1.0, 1.5]))
def test_memoised_base_times_and_demands_are_their_definitions(seed, topology, ps, cpu_mem, variability, penalty):
    inst = offline_instance(gpus=24, nodes=5, jobs=10, seed=seed, variability=variability, ps=ps,
                            cpu_mem=cpu_mem, topology=topology, locality_penalty=penalty)
    cl = inst.cluster
    rng = random.Random(seed)
    memo = BaseTimes(inst.jobs, cl)
    fair = fair_shares(cl)
    ids = [g.id for g in cl.gpus]
    names = [nd.name for nd in cl.nodes]
    for _ in range(60):
        j = rng.randrange(len(inst.jobs))
        job = inst.jobs[j]
        n = rng.choice([s for s in job.sizes if s <= len(ids)] or [1])
        gpus = tuple(rng.sample(ids, n))
        ps_nodes = tuple(rng.choice(names) for _ in range(rng.randint(1, 2))) if job.ps else ()
        level = rng.choice(job.level_choices)
        alloc = Allocation(gpus, ps_nodes, *level)
        per: dict[str, int] = {}
        for g in gpus:
            per[cl.gpu[g].node] = per.get(cl.gpu[g].node, 0) + 1
        k = len(set(per) | set(ps_nodes))
        try:
            want = base_iteration_time(job, alloc, cl)
        except SpeedError:
            with pytest.raises(SpeedError):
                memo.get(j, alloc, k)
            continue
        assert memo.get(j, alloc, k) == want
        assert memo.get(j, alloc, k) == want          # and from the memo
        spelled = gpu_by_gpu(job, alloc, cl)
        assert demand_on(job, alloc, per, cl, fair) == spelled
        assert node_demand(job, alloc, cl) == spelled
    kinds = gpu_kinds(inst)
    assert len(kinds) < len(cl.gpus) or variability > 0
    for job in inst.jobs:
        assert least_run_time(job, inst, kinds) == least_run_time(job, inst)


def test_many_restarts_replay_to_the_completions_of_one_segment_each():
    """Every job of a preemptive instance cut into many short segments, restarts free: the completions
    equal those of the schedule with the jobs in one segment each, on the same GPUs (no interference)."""
    inst = offline_instance(gpus=8, nodes=2, jobs=6, types=("v100",), seed=3, problem="preemptive", restart_s=0.0,
                            interarrival_s=0.0, elastic=0.0, max_size=1)
    ids = [g.id for g in inst.cluster.gpus]
    whole, cut = [], []
    at = 0
    for job in inst.jobs:
        alloc = Allocation(tuple(ids[at:at + job.sizes[0]]))
        at += job.sizes[0]
        whole.append(Segment(job.name, 0.0, None, alloc))
    one = replay(inst, Schedule(inst.name, "whole", tuple(whole)))
    assert one.valid, one.error
    for job, seg in zip(inst.jobs, whole):
        end = one.completion[job.name]
        cuts = [end * i / 300 for i in range(300)]     # 300 segments a job: the heap is compacted often
        for a, b in zip(cuts, cuts[1:]):
            cut.append(Segment(job.name, a, b, seg.alloc))
        cut.append(Segment(job.name, cuts[-1], None, seg.alloc))
    many = replay(inst, Schedule(inst.name, "cut", tuple(sorted(cut, key=lambda s: (s.start, s.job)))))
    assert many.valid, many.error
    for name, c in one.completion.items():
        assert many.completion[name] == pytest.approx(c, rel=1e-12)


def _verdict(engine: Engine, act) -> str | None:
    try:
        act(engine)
    except InvalidSchedule as e:
        return str(e)
    return None


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 9999), read_at=st.integers(0, 50), exact=st.booleans())
def test_nodes_accounted_from_their_first_read_hold_what_every_start_and_stop_would(seed, read_at, exact):
    """Two engines take the same random starts (at the fair share, at a CPU/memory level, with a parameter server)
    and stops: one read at once, one first read at a random step. They give the same verdicts, and from the read
    on hold the same CPUs and GB per node, bit for bit, the same jobs and the same free GPUs; no node ever holds
    more than its capacity (so the check that fair-share starts on exact nodes skip could not have failed)."""
    inst = offline_instance(gpus=24, nodes=5, jobs=12, seed=seed, cpu_mem=True, ps=True, problem="preemptive",
                            interarrival_s=60.0)
    if not exact:      # shares of 19 CPUs over 5 GPUs do not add exactly: accounted from the start
        d = inst.to_dict()
        for nd in d["cluster"]["nodes"]:
            nd["cpus"] = 19.0
        inst = Instance.from_dict(d, "<test>")
    assert all(map(exact_fair_shares, inst.cluster.nodes)) == exact
    rng = random.Random(seed)
    eager, lazy = Engine(inst), Engine(inst)
    assert eager.cpu_used is not None        # read at once
    names = [nd.name for nd in inst.cluster.nodes]
    t = 0.0
    for step in range(60):
        if step == read_at:
            assert lazy.node_jobs is not None and lazy.free is not None
        t += rng.choice([0.0, 7.0, 60.0])
        running = sorted(eager.running)
        if running and rng.random() < 0.4:
            j = rng.choice(running)
            act = (lambda e, j=j, t=t: e.stop(j, t))
        else:
            # until the read, fair shares only (no level, no PS job): the lazy engine has not accounted a node yet
            cands = [j for j, job in enumerate(inst.jobs) if eager.completion[j] is None and j not in eager.running
                     and job.arrival <= t and (step >= read_at or job.ps is None)]
            free = sorted(g for gs in eager.free.values() for g in gs)
            if not cands:
                continue
            j = rng.choice(cands)
            job = inst.jobs[j]
            n = rng.choice(job.sizes)
            if n > len(free):
                continue
            gpus = tuple(rng.sample(free, n))
            ps_nodes = (rng.choice(names),) if job.ps is not None else ()     # a PS job needs a server
            if step >= read_at and rng.random() < 0.2 and job.cpu_mem is not None:
                c, m, _ = rng.choice(job.cpu_mem.levels)
                alloc = Allocation(gpus, ps_nodes, c, m)
            else:
                alloc = Allocation(gpus, ps_nodes)
            act = (lambda e, j=j, a=alloc, t=t: e.start(j, a, t))
        assert _verdict(eager, act) == _verdict(lazy, act)
        for nd in inst.cluster.nodes:      # the rule, whether a start was checked or needed no check
            assert eager.cpu_used[nd.name] <= nd.cpus * (1 + 1e-9) and eager.mem_used[nd.name] <= nd.mem_gb * (1 + 1e-9)
        if step >= read_at:
            assert lazy.cpu_used == eager.cpu_used and lazy.mem_used == eager.mem_used
            assert lazy.node_jobs == eager.node_jobs and lazy.free == eager.free
    assert lazy.cpu_used == eager.cpu_used and lazy.mem_used == eager.mem_used and lazy.node_jobs == eager.node_jobs
    assert lazy.free == eager.free
    assert lazy.completion == eager.completion
