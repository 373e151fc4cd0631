"""Optimus (marginal-gain workers/PS) and Synergy-TUNE (CPU/memory levels): valid schedules,
the greedy choices on hand-made cases, capacities, determinism."""

from __future__ import annotations

import pytest

from baselines import optimus, synergy
from jctlab.generators import offline_instance
from jctlab.model import Allocation, Instance
from jctlab.simulate import Simulator, simulate
from jctlab.speed import base_iteration_time


def _run(fac, inst):
    pol = fac(inst, seed=0)
    return simulate(inst, pol, round_s=getattr(pol, "round_s", None))


# ------------------------------------------------------------------ Optimus
@pytest.mark.parametrize("problem", ["offline", "preemptive"])
def test_optimus_valid_and_deterministic(problem):
    for seed in (0, 1):
        inst = offline_instance(gpus=16, nodes=4, jobs=10, seed=seed, ps=True, problem=problem, interarrival_s=300)
        sched, rep = _run(optimus.factory, inst)
        assert rep.valid and len(rep.completion) == len(inst.jobs)
        ps_jobs = {j.name for j in inst.jobs if j.ps is not None}
        assert ps_jobs
        for s in sched.segments:   # PS jobs always hold 1..max_ps parameter servers, others none
            job = inst.job[s.job]
            assert (1 <= len(s.alloc.ps_nodes) <= job.ps.max_ps) if job.ps else not s.alloc.ps_nodes
        if problem == "offline":
            assert len(sched.segments) == len(inst.jobs)
        again, _ = _run(optimus.factory, inst)
        assert again.segments == sched.segments


def _ps_case() -> Instance:
    """One node, 5 GPUs, 40 CPUs (fair share 8 per GPU), PS tasks of 2 CPUs. Job `ps` is bound by
    its PS (large t2: the n/p term); job `long` is compute-bound with many iterations left; job
    `short` is compute-bound and nearly done."""
    d = {"format": "jctlab.instance/1", "name": "optimus-hand", "problem": "offline", "objective": "mean_jct",
         "cluster": {"nodes": [{"name": "n0", "cpus": 40, "mem_gb": 80, "gpus": [{"type": "v100"}] * 5}]},
         "jobs": [
             {"name": "ps", "arrival": 0, "batch": 32, "iterations": 1000, "samples_per_s": {"v100": 320.0},
              "sizes": [1, 2], "ps": {"max_ps": 2, "ps_cpus": 2, "theta": [0.0, 0.5, 0.0, 0.0]}},
             {"name": "long", "arrival": 0, "batch": 32, "iterations": 50000, "samples_per_s": {"v100": 320.0},
              "sizes": [1, 2], "ps": {"max_ps": 2, "ps_cpus": 2, "theta": [0.0, 0.001, 0.0, 0.0]}},
             {"name": "short", "arrival": 0, "batch": 32, "iterations": 100, "samples_per_s": {"v100": 320.0},
              "sizes": [1, 2]}]}
    return Instance.from_dict(d)


def test_optimus_marginal_gain_choice():
    inst = _ps_case()
    pol = optimus.factory(inst)
    sim = Simulator(inst, pol)
    cl = inst.cluster

    def rem(j, n, p):
        a = Allocation(tuple(f"n0:{k}" for k in range(n)), ("n0",) * p)
        return inst.jobs[j].iterations * base_iteration_time(inst.jobs[j], a, cl)

    # fall in remaining time per dominant share (worker: 1/5 of the GPUs; PS: 2/40 of the CPUs)
    gains = {
        ("long", 2, 1): (rem(1, 1, 1) - rem(1, 2, 1)) / (1 / 5),
        ("long", 1, 2): (rem(1, 1, 1) - rem(1, 1, 2)) / (2 / 40),
        ("ps", 2, 1): (rem(0, 1, 1) - rem(0, 2, 1)) / (1 / 5),
        ("ps", 1, 2): (rem(0, 1, 1) - rem(0, 1, 2)) / (2 / 40),
        ("short", 2, 0): (rem(2, 1, 0) - rem(2, 2, 0)) / (1 / 5),
    }
    start = pol.allocate([0, 1, 2], sim, pol._free_now(sim), max_steps=0)
    assert {inst.jobs[j].name: (len(a.gpus), len(a.ps_nodes)) for j, a in start.items()} == \
        {"ps": (1, 1), "long": (1, 1), "short": (1, 0)}                # everyone starts minimal
    one = pol.allocate([0, 1, 2], sim, pol._free_now(sim), max_steps=1)
    changed = [(inst.jobs[j].name, len(a.gpus), len(a.ps_nodes)) for j, a in one.items() if a != start[j]]
    assert changed == [max(gains, key=gains.get)] == [("long", 2, 1)]  # the long job's extra GPU wins
    full = pol.allocate([0, 1, 2], sim, pol._free_now(sim))
    counts = {inst.jobs[j].name: (len(a.gpus), len(a.ps_nodes)) for j, a in full.items()}
    assert counts["ps"] == (1, 2)          # the PS-bound job gets a PS, never a worker (that hurts it)
    assert counts["long"][0] == 2
    cpus = sum(8 * len(a.gpus) + 2 * len(a.ps_nodes) for a in full.values())
    assert cpus <= 40 and sum(len(a.gpus) for a in full.values()) <= 5


def test_optimus_places_on_fewest_nodes_evenly():
    d = {"format": "jctlab.instance/1", "name": "spread", "problem": "offline", "objective": "mean_jct",
         "cluster": {"nodes": [{"name": f"n{i}", "cpus": 12, "mem_gb": 64, "gpus": [{"type": "v100"}] * 3}
                               for i in range(3)]},
         "jobs": [{"name": "a", "arrival": 0, "batch": 32, "iterations": 100, "samples_per_s": {"v100": 100.0},
                   "sizes": [4], "ps": {"max_ps": 2, "ps_cpus": 2, "theta": [0.0, 0.01, 0.0, 0.0]}}]}
    inst = Instance.from_dict(d)
    pol = optimus.factory(inst)
    sim = Simulator(inst, pol)
    a = pol.place(inst.jobs[0], 4, 2, pol._free_now(sim))
    nodes = sorted({g.split(":")[0] for g in a.gpus})
    assert len(nodes) == 2                                           # fewest nodes for 4 GPUs
    assert sorted(g.split(":")[0] for g in a.gpus) == ["n0", "n0", "n1", "n1"]   # spread evenly
    assert sorted(a.ps_nodes) == nodes                               # one PS on each of them


# ------------------------------------------------------------------ Synergy-TUNE
def _synergy_case(no_slowdown_levels: bool = True) -> Instance:
    """One node, 2 GPUs, 8 CPUs, 64 GB (fair share 4 CPUs, 32 GB per GPU). Job `s` speeds up 1.5x
    with 6 CPUs/48 GB; job `i` is insensitive (same speed with 2 CPUs/16 GB)."""
    low_i = 1.0 if no_slowdown_levels else 0.99
    d = {"format": "jctlab.instance/1", "name": "synergy-hand", "problem": "offline", "objective": "mean_jct",
         "cluster": {"nodes": [{"name": "n0", "cpus": 8, "mem_gb": 64, "gpus": [{"type": "v100"}] * 2}]},
         "jobs": [
             {"name": "i", "arrival": 0, "batch": 32, "iterations": 1000, "samples_per_s": {"v100": 100.0},
              "cpu_mem": {"levels": [[2, 16, low_i], [4, 32, 1.0]]}},
             {"name": "s", "arrival": 0, "batch": 32, "iterations": 1000, "samples_per_s": {"v100": 100.0},
              "cpu_mem": {"levels": [[2, 16, 0.8], [4, 32, 1.0], [6, 48, 1.5]]}}]}
    return Instance.from_dict(d)


def test_synergy_shifts_to_sensitive_job():
    inst = _synergy_case()
    sched, rep = _run(synergy.factory, inst)
    assert rep.valid
    seg = {s.job: s.alloc for s in sched.segments}
    assert (seg["s"].cpus_per_gpu, seg["s"].mem_gb_per_gpu) == (6, 48)    # sensitive job got more
    assert (seg["i"].cpus_per_gpu, seg["i"].mem_gb_per_gpu) == (2, 16)    # taken from the insensitive one
    assert seg["s"].cpus_per_gpu + seg["i"].cpus_per_gpu <= 8
    assert seg["s"].mem_gb_per_gpu + seg["i"].mem_gb_per_gpu <= 64
    # and it pays: both finish no later than with the proportional share, s strictly earlier
    fair = base_iteration_time(inst.job["s"], Allocation(("n0:1",), (), 4, 32), inst.cluster) * 1000
    assert rep.completion["s"] < fair


def test_synergy_no_slowdown_guarantee():
    inst = _synergy_case(no_slowdown_levels=False)      # shrinking `i` would slow it by 1%
    sched, _ = _run(synergy.factory, inst)
    seg = {s.job: s.alloc for s in sched.segments}
    assert seg["i"].cpus_per_gpu == 4 and seg["s"].cpus_per_gpu == 4
    # without the guarantee the net gain (+0.5 vs -0.01) justifies the shift
    sched, rep = simulate(inst, synergy.factory(inst, no_slowdown=False))
    seg = {s.job: s.alloc for s in sched.segments}
    assert rep.valid and seg["s"].cpus_per_gpu == 6 and seg["i"].cpus_per_gpu == 2


@pytest.mark.parametrize("problem", ["offline", "preemptive"])
def test_synergy_valid_and_capacities(problem):
    for seed in (0, 1, 2):
        inst = offline_instance(gpus=16, nodes=4, jobs=12, seed=seed, cpu_mem=True, problem=problem,
                                interarrival_s=200)
        sched, rep = _run(synergy.factory, inst)
        assert rep.valid and len(sched.segments) == len(inst.jobs)    # never preempts
        for s in sched.segments:
            lv = inst.job[s.job].cpu_mem.levels
            assert (s.alloc.cpus_per_gpu, s.alloc.mem_gb_per_gpu) in {(c, m) for c, m, _ in lv}
        again, _ = _run(synergy.factory, inst)
        assert again.segments == sched.segments


def test_synergy_uses_idle_cpu_for_sensitive_jobs():
    """A lone sensitive job on an otherwise idle node takes the top level from free resources."""
    inst = offline_instance(gpus=4, nodes=1, jobs=1, seed=3, cpu_mem=True, max_size=1)
    sched, rep = _run(synergy.factory, inst)
    lv = max(inst.jobs[0].cpu_mem.levels, key=lambda x: x[2])
    assert rep.valid and sched.segments[0].alloc.cpus_per_gpu == lv[0]
