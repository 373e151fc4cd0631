"""List scheduling whose jobs choose their GPUs at their turn (formulations.offline.free_gpus): exact, replayed
schedules; a spread job takes GPUs on any nodes; the pipeline's local search offers the schedule."""

from __future__ import annotations

import random
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formulations.offline import free_gpus
from formulations.offline.classes import node_complete_options
from formulations.offline.concrete import concrete_options
from formulations.offline.list_scheduling import SGS
from formulations.offline.local_search import search_options
from formulations.offline.pipeline import OfflineParams, State, free_gpus_applies, free_gpus_phase, start
from formulations.offline.pipeline import local_search as pipeline_local_search
from formulations.schedules import start_order
from jctlab.generators import offline_instance
from jctlab.model import Instance
from jctlab.replay import replay
from jctlab.speed import duration

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), order_seed=st.integers(0, 10_000))
def test_the_list_schedule_of_any_order_replays_with_the_times_it_computed(seed, order_seed):
    """Law: for any order of a plain instance (variability, locality penalty, GPU types, elastic sizes), the schedule
    replays valid; each job starts at or after its arrival and the start of the job before it in the order, and
    completes at its start plus the speed model's duration of its GPUs (so the objective is exact); resuming a run
    before a position gives the run from scratch."""
    inst = offline_instance(gpus=4 + seed % 9, nodes=1 + seed % 4, jobs=3 + seed % 6, max_size=[2, 4, 8][seed % 3],
                            variability=0.05 * (seed % 2), locality_penalty=1.0 + 0.3 * (seed % 3), elastic=0.5,
                            interarrival_s=300, duration_h=(0.05, 1.0), seed=seed)
    order = list(range(len(inst.jobs)))
    random.Random(order_seed).shuffle(order)
    sched = free_gpus.list_schedule(inst, order, "test")
    assert sched is not None
    rep = replay(inst, sched)
    assert rep.valid, rep.error
    seg = {inst.index[sg.job]: sg for sg in sched.segments}
    prev = 0.0
    for j in order:
        job = inst.jobs[j]
        s = seg[j].start
        assert s >= job.arrival and s >= prev
        prev = s
        assert rep.completion[job.name] == pytest.approx(s + duration(job, seg[j].alloc, inst.cluster), rel=1e-9)
    # resumed before any position, a run with the same jobs ahead is the run from scratch
    fg = free_gpus.FreeGpus(inst)
    first = fg.run(order)
    assert first.objective == pytest.approx(rep.objective, rel=1e-9)
    p = order_seed % len(order)
    other = order[:p] + order[p:][::-1]
    assert fg.run(other, resume=(first, p)) == fg.run(other)
    # a swap keeps the rest of the order: the resumed run may stop where its state meets the first run's, and is
    # still the run from scratch
    k = (p + 1 + order_seed // 7 % len(order)) % len(order)
    swapped = list(order)
    swapped[p], swapped[k] = swapped[k], swapped[p]
    assert fg.run(swapped, resume=(first, min(p, k))) == fg.run(swapped)


def _three_nodes_one_gpu_each_busy() -> Instance:
    """Three nodes of three V100s and a K80; three long 1-GPU jobs that run on K80s only (so one on each node) at
    time 0, then an 8-GPU job at 10 s that runs on either type."""
    d = offline_instance(gpus=12, nodes=3, jobs=4, types=("v100",), max_size=8, elastic=0.0, seed=0).to_dict()
    for nd in d["cluster"]["nodes"]:
        nd["gpus"][3]["type"] = "k80"
    for k, job in enumerate(d["jobs"]):
        job["arrival"] = 0.0 if k < 3 else 10.0
        job["sizes"] = [1] if k < 3 else [8]
        job["samples_per_s"] = {"k80": 40.0} if k < 3 else {"v100": 100.0, "k80": 40.0}
        job["iterations"] = 10 * job["iterations"] if k < 3 else job["iterations"]
    return Instance.from_dict(d)


def test_a_job_larger_than_a_node_starts_on_free_gpus_of_every_node():
    """The case the rule is for: one GPU of each node is busy for long, and an 8-GPU job arrives. It runs as fast
    on three nodes as on two (the locality penalty applies once it spans two), so it starts at its arrival on
    the free V100s; the local search's fixed spread sets (two whole nodes) make it wait for a 1-GPU job."""
    inst = _three_nodes_one_gpu_each_busy()
    order = [0, 1, 2, 3]
    sched = free_gpus.list_schedule(inst, order, "test")
    seg = {sg.job: sg for sg in sched.segments}
    big = inst.jobs[3]
    assert seg[big.name].start == big.arrival
    assert {inst.cluster.gpu[g].type for g in seg[big.name].alloc.gpus} == {"v100"}
    assert len({g.split(":")[0] for g in seg[big.name].alloc.gpus}) == 3
    # the options of instances too large to enumerate: one node's GPUs, or the spread candidates
    opts = search_options(inst, concrete_options(inst)[0], False, node_complete_options(inst))
    _, _, starts = SGS(inst, opts).run(order)
    assert starts[3] > big.arrival + 1.0
    assert replay(inst, sched).valid


def test_the_rule_does_not_apply_where_cpus_or_interference_matter():
    """Parameter servers and CPU/memory levels need CPUs the rule does not track; interference (between jobs on a
    node, or on a PCIe switch: ``topology``) makes run times depend on what else runs: no schedule."""
    for kw in ({"ps": True}, {"cpu_mem": True}, {"interference": 0.2}, {"topology": True}):
        inst = offline_instance(gpus=8, nodes=2, jobs=4, seed=1, **kw)
        assert not free_gpus.applies(inst)
        assert free_gpus.incumbent(inst, list(range(len(inst.jobs))), "test").schedule is None


#: a queue of rigid jobs of up to 8 GPUs on three nodes of 4 (found by a search over seeds 0-39 of this generator:
#: on seed 2 the rule's schedule of the local search's order is the better; on most it is not)
QUEUE = offline_instance(gpus=12, nodes=3, jobs=10, types=("v100",), interarrival_s=120, duration_h=(0.05, 2),
                         max_size=8, elastic=0.0, seed=2)


def test_the_free_gpu_phase_climbs_from_the_incumbents_order():
    """The phase after the last local search on a queue: from the incumbent's start order, list schedules with
    GPUs chosen at each turn, the state keeping the better schedule. Here already the first of them (the
    incumbent's order) is better than the local search's schedule, and the climb ends at or below it."""
    inst = QUEUE
    state = start(inst, State, time_limit=None, threads=1, seed=0, hint=None, warm=True, solver="cpsat",
                  version="", params={}, offline=OfflineParams(), t0=time.perf_counter())
    pipeline_local_search(state, search_options(inst, *concrete_options(inst), None), 0.05, 0)
    searched = state.incumbent
    rule = free_gpus.incumbent(inst, start_order(inst, searched.schedule), "cpsat")
    assert rule.objective < searched.objective - 1e-6          # the case the phase is for
    assert free_gpus_applies(state) == (not state.complete)
    state.complete = False      # as on an instance too large to enumerate
    free_gpus_phase(state, None)
    assert state.incumbent.objective <= rule.objective + 1e-9
    assert state.params["phases"][-1]["phase"] == "free-gpus"
    assert replay(inst, state.incumbent.schedule).objective == pytest.approx(state.incumbent.objective, rel=1e-12)


def test_the_climb_is_deterministic_without_a_time_limit_and_never_worse_than_its_start():
    """Law: without a limit the climb makes ``iters`` moves, the same for the same seed, and ends at or below its
    start order's list schedule."""
    inst = QUEUE
    order = sorted(range(len(inst.jobs)), key=lambda j: (inst.jobs[j].arrival, j))
    first = free_gpus.incumbent(inst, order, "test")
    params = free_gpus.FreeGpuParams(iters=300)
    a = free_gpus.climb(inst, order, None, "test", rng_seed=3, params=params)
    b = free_gpus.climb(inst, order, None, "test", rng_seed=3, params=params)
    assert a.schedule == b.schedule
    assert a.objective <= first.objective + 1e-9


def test_the_climb_ends_at_a_local_optimum_without_waiting_for_its_limit():
    """``stall`` × n moves without a gain end the climb, however many moves or seconds are left: a phase after it
    (CP-SAT's node-exact model, which proves 16-job queues) keeps the time. With a billion moves allowed the call
    returns (it would not without the rule), and the same as with the moves it needed."""
    inst = QUEUE
    order = sorted(range(len(inst.jobs)), key=lambda j: (inst.jobs[j].arrival, j))
    ended = free_gpus.climb(inst, order, None, "test", params=free_gpus.FreeGpuParams(iters=10**9, stall=5))
    again = free_gpus.climb(inst, order, None, "test", params=free_gpus.FreeGpuParams(iters=10**6, stall=5))
    assert ended.schedule == again.schedule
    assert ended.objective <= free_gpus.incumbent(inst, order, "test").objective + 1e-9


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000))
def test_restarts_never_end_the_climb_worse(seed):
    """Law: with ``restart`` the climb is the same until its first local optimum and then goes on from kicks of the
    best order, so without a limit (``iters`` moves) it ends at or below the climb that stops there; the same for
    the same seed."""
    inst = offline_instance(gpus=8 + seed % 5, nodes=2 + seed % 2, jobs=6 + seed % 6, max_size=8, elastic=0.3,
                            interarrival_s=120, duration_h=(0.05, 2), seed=seed)
    order = sorted(range(len(inst.jobs)), key=lambda j: (inst.jobs[j].arrival, j))
    params = free_gpus.FreeGpuParams(iters=400, stall=3)
    stops = free_gpus.climb(inst, order, None, "test", rng_seed=seed, params=params)
    goes_on = free_gpus.climb(inst, order, None, "test", rng_seed=seed, params=params, restart=True)
    assert goes_on.objective <= stops.objective + 1e-9
    assert goes_on.schedule == free_gpus.climb(inst, order, None, "test", rng_seed=seed, params=params,
                                               restart=True).schedule
    assert replay(inst, goes_on.schedule).objective == pytest.approx(goes_on.objective, rel=1e-12)
