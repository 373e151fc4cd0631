"""QUEUE+PLACEMENT policies: each replays valid in both mechanisms and keeps its queue's order and its
placement's rule (read off the schedule); determinism; names; queues."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from baselines.families import resolve, sizes_of
from baselines.placement import PLACEMENTS
from baselines.queues import QUEUES, Gittins, Las, make_queue
from baselines.rounds import RoundPolicy
from baselines.eventdriven import EventPolicy
from jctlab.generators import offline_instance
from jctlab.model import Instance
from jctlab.simulate import simulate

PRE = offline_instance(gpus=8, nodes=2, jobs=12, interarrival_s=300.0, duration_h=(0.05, 0.6), max_size=4,
                       seed=3, variability=0.05, locality_penalty=1.3, restart_s=20.0, problem="preemptive")
OFF = offline_instance(gpus=8, nodes=2, jobs=12, interarrival_s=300.0, duration_h=(0.05, 0.6), max_size=4,
                       seed=4, variability=0.05, problem="offline")
NAMES = [f"{q}+{p}" for q, p in itertools.product(QUEUES, PLACEMENTS)]


def sim(inst, name, seed=0, **opt):
    pol = resolve(name)(inst, seed=seed, **opt)
    return simulate(inst, pol, round_s=pol.round_s, method=name)


def _starts_while_waiting(inst, sched):
    """(A, B) for every job A that started at t while B had arrived and waited (B started later)."""
    start = {inst.index[s.job]: s.start for s in sched.segments}
    return [(a, b) for a in start for b in start
            if inst.jobs[b].arrival <= start[a] < start[b] and a != b]


def _queue_key(inst, queue):
    """The queue's static order on the offline class (nobody has attained service while it waits: las and
    gittins order by arrival, srtf as sjf)."""
    q = make_queue({"srtf": "sjf", "las": "fifo", "gittins": "fifo"}.get(queue, queue), inst, sizes_of(inst))
    return lambda j: q.key(None, j)


def _free_on_nodes_at(inst, sched, rep, job):
    """GPUs free on each node just as ``job`` starts (an offline schedule: each job holds its GPUs from its
    start to its completion)."""
    t = next(s.start for s in sched.segments if s.job == job)
    held = {g for s in sched.segments if s.job != job and s.start <= t + 1e-9 < rep.completion[s.job]
            for g in s.alloc.gpus}
    return {nd.name: sum(g.id not in held for g in nd.gpus) for nd in inst.cluster.nodes}


@pytest.mark.parametrize("name", NAMES)
def test_every_policy_replays_valid_and_keeps_its_rules(name):
    """Valid in both mechanisms; on the offline class (event-driven, strict order) a job never starts while one
    ahead of it in the queue's order waits (except PAL and PM-First, which sort the prefix that fits by class);
    packed placements put a job on one node whenever one had room for it."""
    queue, placement = name.split("+")
    for inst in (PRE, OFF):
        sched, rep = sim(inst, name)
        assert rep.valid, rep.error
        assert len({s.job for s in sched.segments}) == len(inst.jobs)
        if inst.problem == "offline":
            assert len(sched.segments) == len(inst.jobs)          # no preemption, one segment each
    sched, rep = sim(OFF, name)
    pairs = _starts_while_waiting(OFF, sched)
    assert pairs                                                  # the instance makes jobs wait
    if placement not in ("pal", "pm-first"):
        key = _queue_key(OFF, queue)
        assert all(key(a) < key(b) for a, b in pairs), name
    if placement.startswith("packed"):
        for s in sched.segments:
            n = len(s.alloc.gpus)
            if max(_free_on_nodes_at(OFF, sched, rep, s.job).values()) >= n:
                assert len({g.split(":")[0] for g in s.alloc.gpus}) == 1, (name, s.job)


def test_mechanism_follows_problem_class():
    assert isinstance(resolve("fifo+pal")(PRE), RoundPolicy)
    assert resolve("fifo+pal")(PRE).round_s == 360.0
    assert resolve("fifo+pal")(PRE, round_s=60.0).round_s == 60.0
    assert isinstance(resolve("las+packed-sticky")(OFF), EventPolicy)
    assert resolve("las+packed-sticky")(OFF).round_s is None


def test_unknown_names_resolve_to_none():
    for bad in ("fifo", "fifo+nope", "nope+pal", "", "fifo-pal"):
        assert resolve(bad) is None


def test_rounds_start_jobs_only_at_round_boundaries():
    sched, _ = sim(PRE, "fifo+packed-sticky", round_s=600.0)
    t0 = min(j.arrival for j in PRE.jobs)
    for s in sched.segments:
        k = (s.start - t0) / 600.0
        assert abs(k - round(k)) < 1e-6


def test_sticky_fifo_never_preempts_nonsticky_may_move():
    """FIFO with sticky placement never preempts (a started job keeps its place in the queue and its GPUs);
    SRTF with non-sticky placement preempts jobs, and a resumed job may come back on other GPUs."""
    s1, _ = sim(PRE, "fifo+packed-sticky")
    assert all(s.end is None for s in s1.segments)
    s2, r2 = sim(PRE, "srtf+packed-nonsticky")
    assert r2.valid
    by_job: dict = {}
    for s in sorted(s2.segments, key=lambda s: s.start):
        by_job.setdefault(s.job, []).append(set(s.alloc.gpus))
    resumed = {j: allocs for j, allocs in by_job.items() if len(allocs) > 1}
    assert resumed                                                    # it preempts
    assert any(a != b for allocs in resumed.values() for a, b in zip(allocs, allocs[1:]))   # and moves


def test_determinism_per_seed():
    for name in ("fifo+random-nonsticky", "las+random-sticky", "gittins+pal"):
        a, _ = sim(PRE, name, seed=7)
        b, _ = sim(PRE, name, seed=7)
        assert a.segments == b.segments
    c, _ = sim(PRE, "fifo+random-nonsticky", seed=8)
    d, _ = sim(PRE, "fifo+random-nonsticky", seed=7)
    assert c.segments != d.segments


def test_size_aware_queues_beat_fifo_under_load():
    for prob in ("offline", "preemptive"):
        inst = offline_instance(gpus=8, nodes=2, jobs=20, interarrival_s=60.0, duration_h=(0.05, 1.0), max_size=4,
                                seed=1, problem=prob, restart_s=20.0)
        _, fifo = sim(inst, "fifo+packed-nonsticky")
        _, sjf = sim(inst, "sjf+packed-nonsticky")
        _, srtf = sim(inst, "srtf+packed-nonsticky")
        assert sjf.objective < 0.9 * fifo.objective and srtf.objective < 0.9 * fifo.objective
        if prob == "offline":           # nobody has run while waiting: srtf = sjf
            assert srtf.objective == pytest.approx(sjf.objective)


def test_tiresias_thresholds():
    q = Las(PRE, [1] * len(PRE.jobs), thresholds=(100.0, 1000.0))
    assert [q.level(a) for a in (0.0, 99.9, 100.0, 999.0, 1000.0, 1e9)] == [0, 0, 1, 1, 2, 2]
    attained = {0: 5000.0, 1: 50.0, 2: 500.0, 3: 0.0}
    fake = SimpleNamespace(engine=SimpleNamespace(attained=lambda j: attained[j]))
    order = q.order(fake, [0, 1, 2, 3])
    # queue 0 holds jobs 1 and 3 (FIFO by arrival inside it), then 2, then 0
    assert order[:2] == sorted([1, 3], key=lambda j: (PRE.jobs[j].arrival, j))
    assert order[2:] == [2, 0]
    with pytest.raises(ValueError):
        Las(PRE, [1] * len(PRE.jobs), thresholds=(10.0, 5.0))


def test_gittins_index_favours_jobs_near_a_likely_end():
    q = Gittins(PRE, [1] * len(PRE.jobs))
    q._work = [100.0] * 8 + [10000.0] * 4    # most jobs end at 100
    assert q.index(0.0) > q.index(150.0)     # past the common size, a job is likely long
    assert q.index(10000.0) == float("inf")


@settings(max_examples=40, deadline=None)
@given(work=st.lists(st.floats(1.0, 1e6), min_size=1, max_size=60), points=st.integers(2, 40),
       attained=st.lists(st.floats(0.0, 1.2e6), min_size=1, max_size=8), rounded=st.booleans())
@example(work=[1.0, 1.0000000000000002], points=2, attained=[0.0], rounded=False)   # works an ulp apart
def test_gittins_index_is_its_definition(work, points, attained, rounded):
    """The index (prefix sums, per-tail cache) against its definition summed directly: over the quantiles x of
    the works above a, max of P(S - a <= x - a | S > a) / E[min(S - a, x - a) | S > a]."""
    if rounded:                      # ties: many jobs of one size
        work = [float(round(w, -4)) or 1.0 for w in work]
    q = Gittins(PRE, [1] * len(PRE.jobs), points=points)
    q._work = work
    for a in attained + work[:3]:
        alive = [w for w in work if w > a]
        if not alive:
            assert q.index(a) == float("inf")
            continue
        best = 0.0
        for x in np.unique(np.quantile(alive, np.linspace(0, 1, points))):
            if x <= a:
                continue
            finish = sum(1 for w in alive if w <= x)
            mean_run = sum(min(w - a, x - a) for w in alive)
            best = max(best, finish / mean_run)
        assert q.index(a) == pytest.approx(best, rel=1e-9, abs=1e-300)


PS_POLICIES = ["fifo-firstfit", "srtf+packed-sticky", "las+random-nonsticky", "gittins+pal", "fifo+pm-first",
               "sjf+packed-nonsticky", "optimus", "matching", "sampling"]


@pytest.mark.parametrize("problem", ["offline", "preemptive"])
def test_policies_run_parameter_server_jobs_within_node_cpus(problem):
    """Nodes whose CPUs are all taken by GPUs at the fair share: a PS needs a node with CPU room (its GPUs'
    node, else another one) and GPUs beside a PS lack CPUs. Before, every policy but Optimus stopped with a
    PolicyError here (no PS at all, CPUs over capacity, or jobs left waiting on an idle cluster)."""
    from jctlab import registry
    from formulations.offline import preemptive_bound

    inst = offline_instance(gpus=8, nodes=2, jobs=10, max_size=4, elastic=0.5, ps=True, interarrival_s=300, seed=4,
                            problem=problem)
    assert any(j.ps is not None for j in inst.jobs)
    lb = preemptive_bound.lower_bound(inst)
    for name in PS_POLICIES:
        sched, rep = simulate(inst, registry.policy_factory(name)(inst, seed=0))
        assert rep.valid, (name, rep.error)
        assert all(s.alloc.ps_nodes for s in sched.segments if inst.jobs[inst.index[s.job]].ps is not None), name
        assert lb <= rep.objective * (1 + 1e-9), name


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10_000), problem=st.sampled_from(["offline", "preemptive"]), nodes=st.integers(2, 3))
def test_preemptive_bound_below_every_policy_with_parameter_servers(seed, problem, nodes):
    """Law: the preemptive LP bounds every policy's replayed objective (PS jobs, CPU/memory levels). With two
    or more 4-GPU nodes every job can run at the fair share (a PS finds room on another node), and every
    policy runs the instance to a valid schedule."""
    from jctlab import registry
    from formulations.offline import preemptive_bound

    inst = offline_instance(gpus=4 * nodes, nodes=nodes, jobs=8, max_size=4, elastic=0.5, ps=True, cpu_mem=seed % 2 == 0,
                            interarrival_s=200, seed=seed, problem=problem, restart_s=30.0)
    lb = preemptive_bound.lower_bound(inst)
    for name in PS_POLICIES:
        sched, rep = simulate(inst, registry.policy_factory(name)(inst, seed=0))
        assert rep.valid, (name, rep.error)
        assert lb <= rep.objective * (1 + 1e-9), name


@pytest.mark.parametrize("name", ["matching", "sampling"])
def test_matching_shrinks_a_ps_job_whose_server_finds_no_cpus(name):
    """One node of 2 GPUs and 8 CPUs: a PS job on both GPUs leaves no CPUs for its server, on one GPU it
    fits. The matching menu does not see CPUs; the policy then takes a smaller allowed size (before, the
    job was left waiting on an idle cluster)."""
    from jctlab import registry

    inst = offline_instance(gpus=2, nodes=1, jobs=4, max_size=2, elastic=1.0, ps=True, seed=0, problem="preemptive")
    assert any(j.ps is not None and j.sizes == (1, 2) for j in inst.jobs)
    sched, rep = simulate(inst, registry.policy_factory(name)(inst, seed=0))
    assert rep.valid
    ps_jobs = {j.name for j in inst.jobs if j.ps is not None}
    assert all(len(s.alloc.gpus) == 1 and s.alloc.ps_nodes for s in sched.segments if s.job in ps_jobs)


def _one_slow_gpu() -> Instance:
    """Node n0: a slow GPU for class A (factor 2) then a normal one; node n1: four normal GPUs. One 1-GPU
    class-A job arrives alone."""
    gpu = lambda f: {"type": "v100", "variability": {"A": f}}   # noqa: E731
    return Instance.from_dict({
        "format": "jctlab.instance/1", "name": "slow", "problem": "offline", "objective": "mean_jct",
        "cluster": {"nodes": [{"name": "n0", "cpus": 8, "mem_gb": 64, "gpus": [gpu(2.0), gpu(1.0)]},
                              {"name": "n1", "cpus": 16, "mem_gb": 128, "gpus": [gpu(1.0)] * 4}],
                    "intra_node_gbps": 100.0, "inter_node_gbps": 25.0, "locality_penalty": 1.5,
                    "split": "proportional", "interference": {}, "restart_s": 0.0},
        "jobs": [{"name": "a", "arrival": 0.0, "batch": 32, "iterations": 100, "samples_per_s": {"v100": 100.0},
                  "comm_mb": 0.0, "sizes": [1], "class": "A"}],
    })


@pytest.mark.parametrize("placement", ["packed-sticky", "packed-nonsticky", "pm-first", "pal"])
def test_variability_aware_placements_avoid_a_slow_gpu(placement):
    """Packed placement takes the best-fitting node's first free GPU (n0, the smaller node: its slow GPU);
    PM-First and PAL take a GPU of the fastest bin for the job's class."""
    inst = _one_slow_gpu()
    sched, rep = sim(inst, f"fifo+{placement}")
    (gpu,) = sched.segments[0].alloc.gpus
    if placement.startswith("packed"):
        assert gpu == "n0:0"
    else:
        assert inst.cluster.gpu[gpu].factor("A") == 1.0
        assert rep.objective == pytest.approx(100 * 32 / 100)