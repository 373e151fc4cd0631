"""What the offline oracle tests share: small instances, the option model with keyword arguments, and the
replay check of a result."""

from __future__ import annotations

import math

from formulations.offline import cpsat as offline_cpsat
from formulations.offline import milp as offline_milp
from formulations.offline.concrete import ConcreteParams
from formulations.offline.cpsat import CpsatParams
from formulations.offline.cpsat_model import CpsatRun, ModelHint, solve_option_model
from formulations.offline.milp import MilpParams
from formulations.offline.pipeline import OfflineParams
from jctlab.generators import offline_instance
from jctlab.model import Allocation, Instance
from jctlab.replay import replay
from jctlab.speed import duration

RTOL = 1e-6
#: the large-instance path (no complete enumeration) on any instance
LARGE = OfflineParams(concrete=ConcreteParams(complete_limit=0))


def solve_model(inst, opts, res, *, time_limit, threads, seed, hint=None, hint_gpus=None, sat_params=None, **model):
    """The option model with its run and hint given as keywords."""
    return solve_option_model(inst, opts, res, CpsatRun(time_limit, threads, seed, sat_params),
                              None if hint is None else ModelHint(hint, hint_gpus), **model)


def tiny(seed: int, **over) -> Instance:
    kw = dict(gpus=2 + seed % 3, nodes=1 + seed % 2, jobs=3 + seed % 2, max_size=[1, 2, 4][seed % 3],
              variability=0.05 * (seed % 2), locality_penalty=1.0 + 0.2 * (seed % 3), cpu_mem=seed % 4 == 1,
              ps=seed % 4 == 2, elastic=0.7, seed=seed, interarrival_s=600, duration_h=(0.1, 1.0))
    kw.update(over)
    return offline_instance(**kw)


def check_valid(inst, res):
    assert res.schedule is not None
    rep = replay(inst, res.claimed_schedule())
    assert rep.valid, rep.error
    assert math.isclose(rep.objective, res.objective, rel_tol=RTOL)
    assert res.lower_bound <= res.objective * (1 + 1e-9)
    return rep


SOLVERS = {
    "cpsat": lambda inst, off=OfflineParams(): offline_cpsat.solve(inst, threads=1, seed=0, params=CpsatParams(off)),
    "highs": lambda inst, off=OfflineParams(): offline_milp.solve(inst, backend="highs", params=MilpParams(off)),
    "cbc": lambda inst, off=OfflineParams(): offline_milp.solve(inst, backend="cbc", params=MilpParams(off)),
}


def cpu_hungry_jobs(seed: int) -> Instance:
    """One 4-GPU node of 16 CPUs and three 2-GPU jobs that arrive together, each 30-60 % faster with 6 CPUs
    per GPU: two of them side by side fit only if one takes 2 CPUs per GPU (or both the fair share)."""
    inst = tiny(seed, gpus=4, nodes=1, jobs=3, max_size=2, elastic=0.0, variability=0.05, cpu_mem=True, ps=False,
                interarrival_s=1.0)
    d = inst.to_dict()
    for k, j in enumerate(d["jobs"]):
        j["sizes"] = [2]
        j["cpu_mem"] = {"levels": [[2.0, 16.0, 0.8], [6.0, 48.0, 1.3 + 0.1 * k]]}
    return Instance.from_dict(d)


def solve_relaxed_path(inst):
    """offline_cpsat.solve on the large-instance, relaxed path."""
    return offline_cpsat.solve(inst, threads=1, seed=0, params=CpsatParams(LARGE))


def random_spread_allocations(inst, rng):
    """Per job with a size ≥ 2: a random allocation of such a size over ≥ 2 nodes (random PS nodes and
    cpu_mem level): (job index, size, GPU ids, their nodes, exact duration)."""
    for j, job in enumerate(inst.jobs):
        sizes = [n for n in job.sizes if n >= 2]
        if not sizes:
            continue
        n = rng.choice(sizes)
        gpus = rng.sample([g.id for g in inst.cluster.gpus], n)
        nodes = [g.split(":")[0] for g in gpus]
        if len(set(nodes)) < 2:
            continue
        psn = tuple(rng.choice([nd.name for nd in inst.cluster.nodes]) for _ in range(rng.randint(1, job.ps.max_ps))) if job.ps else ()
        d = duration(job, Allocation(tuple(gpus), psn, *rng.choice(job.level_choices)), inst.cluster)
        yield j, n, gpus, nodes, d


def assert_bounds_allocation(o, d, n, nodes, node_sets):
    """Option ``o`` is no longer than ``d`` and demands no more of the cluster, of any node and of any
    node set in ``node_sets`` than an allocation of ``n`` GPUs on ``nodes`` holds."""
    assert o.dur <= d * (1 + 1e-12)
    held = {("all",): n, **{("n", v): nodes.count(v) for v in set(nodes)},
            **{("set", T): sum(nodes.count(v) for v in T) for T in node_sets}}
    for r, v in o.demand.items():
        assert v <= held.get(r, 0), (r, v, held)


class StopAfter:
    """A search budget that expires at its ``k``-th check (with :data:`formulations.offline.bnb.CHECK_EVERY` set to
    1, after about k nodes): a search stopped at a chosen point, the same on every machine."""

    def __init__(self, k: int) -> None:
        self.k = k

    def expired(self) -> bool:
        self.k -= 1
        return self.k < 0
