"""When an instance is exactly a textbook scheduling problem, and its job × GPU run-time matrix.

An instance is recognised only when its speed model (SPEC §2) makes it *exactly* the textbook problem:

1. **Single-GPU jobs.** Every job can run on one GPU only: 1 ∈ ``sizes`` and every other size exceeds the
   number of GPUs able to host it. No parameter servers (their placement changes the nodes a job spans).
   A ``cpu_mem`` table is allowed only when no level speeds the job up (speedup ≤ 1): then the fair share
   (null) is never slower, and with every job at its fair share no node's CPUs or memory can be exceeded
   (each GPU's holder takes 1/#GPUs of its node), so the levels change nothing an optimum needs.
2. **Run time fixed by the GPU.** A single GPU spans one node and one socket, so neither the locality
   penalty nor the cross-socket factor applies; the job's run time on GPU g is
   p_{jg} = ``iterations`` · t_iter(j, {g}) (:func:`jctlab.speed.duration`: the GPU's type, its variability
   for the job's class, measured one-GPU throughputs).
3. **No co-location effect.** No positive ``interference`` between the classes of two jobs present (the same
   class counts when it has two jobs) on a cluster with a node of two or more GPUs, and no
   ``pcie_interference`` on a cluster with a PCIe switch of two or more GPUs. (With one GPU in the cluster
   only one job ever runs.)
4. **The class and the releases.** ``static``: at most as many jobs as GPUs (each job alone on its GPU from
   time 0: an assignment problem). ``offline``: every job released at the same time a (the objective is then
   Σ w_j (C_j − a), a shift of Σ w_j C_j). ``preemptive``: one GPU (releases may differ), or equal releases on
   identical GPUs.
5. **A sum objective** (mean or weighted JCT; makespan is not recognised). Weights that differ are covered
   on one GPU (WSPT) and by the static assignment only: P2||Σw_jC_j is NP-hard (Bruno, Coffman and Sethi
   1974).

GPUs are *identical* when p_{jg} = p_j for every job and GPU, *uniform* when p_{jg} = p_j·c_g (one speed per
GPU for every job), and *unrelated* otherwise, each within a relative deviation δ ≤ ``rank_tol``: the case
records δ, and every bound derived from the rank-one model q_{jg} = p_j·c_g is multiplied by 1 − δ (since
p ≥ (1 − δ)·q entrywise, every schedule's value under p is at least 1 − δ times its value under q).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from jctlab.model import Allocation, Instance
from jctlab.speed import duration


class Textbook(StrEnum):
    """The textbook problem an instance is (Graham's α|β|γ notation)."""

    STATIC = "static assignment"            # min Σ w_j p_{j,g(j)}, one job per GPU
    P_SUM_C = "P||ΣCj"                      # SPT (identical GPUs)
    Q_SUM_C = "Q||ΣCj"                      # Horn 1973 / Conway, Maxwell and Miller 1967 (uniform GPUs)
    R_SUM_C = "R||ΣCj"                      # Horn 1973; Bruno, Coffman and Sethi 1974 (unrelated GPUs)
    ONE_WSUM_C = "1||ΣwjCj"                 # WSPT (Smith 1956)
    P_PMTN_SUM_C = "P|pmtn|ΣCj"             # SPT (McNaughton 1959: preemption does not help)
    ONE_PMTN_WSUM_C = "1|pmtn|ΣwjCj"        # WSPT (McNaughton 1959)
    ONE_R_PMTN_SUM_C = "1|rj,pmtn|ΣCj"      # SRPT (Schrage 1968)


@dataclass(frozen=True)
class SpecialParams:
    """The knobs of the special cases."""

    #: the Bruno-Coffman-Sethi cost matrix has n × (GPUs · n) cells; larger unrelated instances are left to
    #: the general oracle (memory: 8 bytes a cell)
    max_assignment_cells: int = 5_000_000
    #: relative deviation under which a run-time matrix counts as identical or uniform (rank one)
    rank_tol: float = 1e-9


@dataclass(frozen=True, eq=False)
class SpecialCase:
    """A recognised instance: the textbook problem and its data (jobs in instance order, GPUs in cluster order)."""

    problem: Textbook
    gpus: tuple[str, ...]                 # GPU ids: the columns of ``durations``
    durations: np.ndarray                 # n × m run times p_{jg} (inf: the GPU's type cannot host job j)
    weights: np.ndarray                   # objective weights (all 1 when the objective is unweighted)
    releases: np.ndarray                  # arrivals a_j
    base: np.ndarray | None = None        # identical / uniform: p_j (run time on a GPU with c_g = 1)
    speed: np.ndarray | None = None       # identical / uniform: c_g (1 for identical GPUs)
    deviation: float = 0.0                # δ: largest relative deviation of p from the rank-one model

    @property
    def n(self) -> int:
        return len(self.durations)

    @property
    def m(self) -> int:
        return len(self.gpus)


def single_gpu_reason(inst: Instance) -> str | None:
    """Why the jobs are not single-GPU jobs with run times fixed by their GPU and no co-location effect
    (conditions 1-3 of the module docstring), or None when they are."""
    cl = inst.cluster
    if inst.objective == "makespan":
        return "makespan is not a sum objective"
    if not inst.jobs or not cl.gpus:
        return "no jobs or no GPUs"
    per_type = Counter(g.type for g in cl.gpus)
    for job in inst.jobs:
        usable = sum(c for t, c in per_type.items() if job.can_use(t))
        if usable == 0:
            return f"job {job.name} fits no GPU"
        if 1 not in job.sizes or any(1 < s <= usable for s in job.sizes):
            return f"job {job.name} may run on more than one GPU"
        if job.ps is not None:
            return f"job {job.name} has parameter servers"
        if job.cpu_mem is not None and any(s > 1.0 for _, _, s in job.cpu_mem.levels):
            return f"job {job.name} has a cpu_mem level that speeds it up"
    if len(cl.gpus) > 1:
        if any(len(nd.gpus) > 1 for nd in cl.nodes) and cl.has_interference:
            count = Counter(j.job_class for j in inst.jobs)
            for a in count:
                for b in count:
                    if cl.interference_of(a, b) > 0 and (a != b or count[a] > 1):
                        return f"interference between classes {a} and {b} on shared nodes"
        if cl.has_switch_interference:
            per_switch = Counter((g.node, g.switch) for g in cl.gpus if g.switch is not None)
            if any(c > 1 for c in per_switch.values()):
                return "pcie_interference between GPUs under one switch"
    return None


def run_times(inst: Instance) -> np.ndarray:
    """The n × m matrix of single-GPU run times p_{jg} (inf where g's type cannot host j); one speed-model
    call per job and group of GPUs of one type and one variability table."""
    gpus = inst.cluster.gpus
    groups: dict[tuple, list[int]] = {}
    for k, g in enumerate(gpus):
        groups.setdefault((g.type, tuple(sorted(g.variability.items()))), []).append(k)
    out = np.full((len(inst.jobs), len(gpus)), math.inf)
    for j, job in enumerate(inst.jobs):
        for (gpu_type, _), cols in groups.items():
            if job.can_use(gpu_type):
                out[j, cols] = duration(job, Allocation((gpus[cols[0]].id,)), inst.cluster)
    return out


def rank_one(p: np.ndarray) -> tuple[np.ndarray, np.ndarray, float, float] | None:
    """(p_j, c_g, δ identical, δ uniform) for a finite matrix: p_j the first column, c_g = p_{0g}/p_{00}, δ the
    largest relative deviation of p from p_j (identical) and from p_j·c_g (uniform); None if not finite."""
    if not np.all(np.isfinite(p)):
        return None
    base = p[:, 0].copy()
    speed = p[0, :] / p[0, 0]
    dev_id = float(np.max(np.abs(p - base[:, None]) / base[:, None]))
    q = np.outer(base, speed)
    dev_q = float(np.max(np.abs(p - q) / q))
    return base, speed, dev_id, dev_q


def classify(inst: Instance, params: SpecialParams = SpecialParams()) -> SpecialCase | str:
    """The instance's textbook problem (a :class:`SpecialCase`), or the reason it is none (a string)."""
    why = single_gpu_reason(inst)
    if why is not None:
        return why
    n, m = len(inst.jobs), len(inst.cluster.gpus)
    arrivals = np.array([j.arrival for j in inst.jobs], dtype=float)
    equal = bool(np.all(arrivals == arrivals[0]))
    w = np.array([j.weight for j in inst.jobs], dtype=float)
    weighted = inst.objective == "weighted_jct" and not bool(np.all(w == w[0]))
    weights = w if weighted else np.ones(n)
    p = run_times(inst)
    ids = tuple(g.id for g in inst.cluster.gpus)

    def case(problem: Textbook, **kw) -> SpecialCase:
        return SpecialCase(problem, ids, p, weights, arrivals, **kw)

    if inst.problem == "static":
        if n > m:
            return "more jobs than GPUs (no static schedule)"
        return case(Textbook.STATIC)
    if m == 1:
        if equal:
            return case(Textbook.ONE_WSUM_C if inst.problem == "offline" else Textbook.ONE_PMTN_WSUM_C)
        if inst.problem == "offline":
            return "releases differ (1|rj|ΣCj is strongly NP-hard)"
        if weighted:
            return "weighted JCT with releases (1|rj,pmtn|ΣwjCj is strongly NP-hard)"
        return case(Textbook.ONE_R_PMTN_SUM_C)
    if not equal:
        return "releases differ on several GPUs (P|rj|ΣCj and P|rj,pmtn|ΣCj are NP-hard)"
    if weighted:
        return "weighted JCT on several GPUs (P2||ΣwjCj is NP-hard)"
    r1 = rank_one(p)
    if r1 is not None and r1[2] <= params.rank_tol:
        kind = Textbook.P_SUM_C if inst.problem == "offline" else Textbook.P_PMTN_SUM_C
        return case(kind, base=r1[0], speed=np.ones(m), deviation=r1[2])
    if inst.problem == "preemptive":
        return "preemption helps on uniform and unrelated GPUs (not a recognised case)"
    if r1 is not None and r1[3] <= params.rank_tol:
        return case(Textbook.Q_SUM_C, base=r1[0], speed=r1[1], deviation=r1[3])
    if n * m * n > params.max_assignment_cells:
        return f"unrelated GPUs: the assignment has {n * m * n} cells (> {params.max_assignment_cells})"
    return case(Textbook.R_SUM_C)


def recognise(inst: Instance, params: SpecialParams = SpecialParams()) -> SpecialCase | None:
    """The instance's textbook problem, or None (:func:`classify` says why)."""
    found = classify(inst, params)
    return found if isinstance(found, SpecialCase) else None
