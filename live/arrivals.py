"""Arrival-aware decisions: an arrival model fitted online, and the rule that holds a long job back for
the short jobs it predicts.

Why. With jobs of one GPU on identical GPUs and every known job ready, SPT list scheduling is the best plan
of the known queue (docs/live.md): a planner that sees only the queue can at best tie ``srtf+packed``.
What is left is the jobs that have not arrived yet. Starting a long job on the last free GPU makes every
job that arrives during its run wait for some GPU to free; keeping that GPU free for a while lets a likely
short arrival start at once, at the price of the long job's delay. This is the classic reservation trade-off
of size-based scheduling (SRPT-k, size-interval task assignment); which side wins depends on the arrival rate,
the sizes of what arrives and when the other GPUs free, so it is decided by evaluating both, not by a fixed
threshold.

**The model** (:class:`ArrivalModel`), fitted only from what the loop has seen, never from the future:

* the arrival rate: an exponentially weighted count of the submissions seen so far,
  λ(now) = Σ_i exp(−(now − s_i)/τ) / (τ (1 − exp(−(now − s_0)/τ))) (an unbiased estimate for a
  stationary Poisson process; the correction term is the window seen). Cluster arrivals come in bursts (a
  user's sweep submits tens of jobs within minutes), and a burst is what makes holding pay, so the memory is
  short (τ = 60 s by default: the rate of the current burst, forgotten a few minutes after it);
* the work of what arrives: the GPU count and run time of the last ``samples`` jobs submitted (as first
  planned; a burst's jobs look alike), the empirical distribution resampled as is.

A function of the set of jobs seen (submission times, first-plan records), so the order in which states
reveal them does not matter. A daemon commits each work sample with the event whose plan made it, and a restarted
daemon rebuilds the model from its store: the samples first, then the jobs' records
(:meth:`ArrivalModel.observe_records`), so that it predicts exactly what the process that was killed would have.

**The rule** (:func:`hold`): a rollout over sampled futures (Bertsekas' rollout with the sample-average
"expectation" algorithm of online stochastic optimization, Bent and Van Hentenryck 2004). From the plan the
planner chose, for its longest job that starts now, draw ``scenarios`` futures from the model (Poisson
arrivals over the job's run, at most ``horizon_s`` and ``max_arrivals``, works resampled; the same futures
for both options) and simulate in each,
from the next event on, non-delay shortest-first dispatch (what the loop does on such states) on the pool
of GPUs, (A) with the job started now and (B) with it held (its GPUs idle until the next event, then the
job back in the queue). The job is held when the mean saving of Σ JCT of B over A exceeds ``z`` standard
errors and zero; then the next longest is tried, up to ``hold_max`` jobs. Only decisions change: predicted
jobs are never started, never in a plan; the held job is planned to start at the next predicted arrival
(``Decoder.decode`` with a release time), so the plan stays a valid schedule of the known state, replayed
as every other.

Progress: a job is held only if some job keeps running after the decision, whose completion is an event at
which the loop decides again (a held job never waits on an idle cluster).

The rollout is a model: GPUs as a pool (no nodes, no types; each job at the run time the plan gave it, a
predicted job at the run time a past job had), one-size jobs, mean JCT only.
"""

from __future__ import annotations

import math
from bisect import bisect_right, insort
from dataclasses import dataclass, field
from heapq import heappop, heappush
from typing import Iterable

import numpy as np

from .state import LiveState, RunningJob


@dataclass(frozen=True)
class ArrivalConfig:
    """``tau_s``: the rate estimate's memory (s); ``samples``: past arrivals whose work is resampled;
    ``horizon_s``: the futures' length at most (the held job's run time otherwise);
    ``min_seen``: submissions and work samples seen before any prediction; ``scenarios``: futures per rollout;
    ``z``: standard errors by which holding must win; ``hold_max``: jobs held per decision; ``max_arrivals``:
    predicted arrivals per future at most (bounds a rollout's work on long jobs)."""

    tau_s: float = 60.0
    samples: int = 10
    horizon_s: float = 3600.0
    min_seen: int = 10
    scenarios: int = 16
    z: float = 1.0
    hold_max: int = 1
    max_arrivals: int = 128


@dataclass(frozen=True)
class Sample:
    """A job the loop has seen: when it was submitted, and the GPUs and run time of its first plan (the
    work of an arrival as the loop prices it on this cluster)."""

    submit: float
    name: str
    gpus: int
    run_s: float

    def to_dict(self) -> dict:
        return {"submit": self.submit, "name": self.name, "gpus": self.gpus, "run_s": self.run_s}

    @staticmethod
    def from_dict(d: dict) -> Sample:
        return Sample(float(d["submit"]), str(d["name"]), int(d["gpus"]), float(d["run_s"]))


def sample_of(r: RunningJob) -> Sample:
    """A running job the loop had not planned (started outside): its run time is its estimate at its start."""
    return Sample(r.submit, r.name, len(r.gpus), r.remaining_s + max(0.0, r.estimated_at - r.start))


@dataclass
class ArrivalModel:
    """What the loop has seen: submission times by job, and each job's work as first planned (module
    docstring)."""

    config: ArrivalConfig = field(default_factory=ArrivalConfig)
    submits: dict[str, float] = field(default_factory=dict)
    seen: dict[str, Sample] = field(default_factory=dict)
    #: the samples seen since the last :meth:`take_fresh`, which a daemon stores with its next commit
    fresh: list[Sample] = field(default_factory=list)

    def observe(self, submits: dict[str, float]) -> None:
        for name, s in submits.items():
            self.submits.setdefault(name, s)

    def observe_work(self, job: Sample) -> None:
        if job.name not in self.seen:
            self.seen[job.name] = job
            self.fresh.append(job)

    def take_fresh(self) -> list[Sample]:
        """The samples seen since the last call (the first sample of a job is the one kept)."""
        out, self.fresh = self.fresh, []
        return out

    def observe_state(self, state: LiveState) -> None:
        """Every job of ``state`` was submitted; every running one started (also those started outside)."""
        self.observe({j.name: j.submit for j in (*state.queued, *state.running)})
        for r in state.running:
            self.observe_work(sample_of(r))

    def observe_records(self, records: list[dict], samples: Iterable[Sample] = ()) -> None:
        """What a daemon's store keeps: the work samples it committed, then the jobs (queued or running records,
        of live and finished jobs), so that a restarted daemon predicts from everything it had seen. The samples
        come first: a job's first sample is the one kept, and its record may have been revised since."""
        for s in samples:
            self.seen.setdefault(s.name, s)
        for d in sorted(records, key=lambda d: (float(d["submit"]), d["name"])):
            self.observe({d["name"]: float(d["submit"])})
            if "start" in d and "gpus" in d:
                self.observe_work(sample_of(RunningJob.from_dict(d)))

    def ready(self) -> bool:
        return len(self.submits) >= self.config.min_seen and len(self.seen) >= self.config.min_seen

    def rate(self, now: float) -> float:
        """Arrivals per second at ``now`` (module docstring); 0 before two submissions."""
        s = np.array(sorted(t for t in self.submits.values() if t <= now))
        if len(s) < 2 or now <= s[0]:
            return 0.0
        tau = self.config.tau_s
        seen = -math.expm1(-(now - s[0]) / tau)   # the share of the exponential window the loop has seen
        return float(np.exp(-(now - s) / tau).sum()) / (tau * seen)

    def works(self) -> list[Sample]:
        """The last ``samples`` jobs seen (by submission, then name)."""
        jobs = sorted(self.seen.values(), key=lambda j: (j.submit, j.name))
        return jobs[-self.config.samples:]

    def futures(self, now: float, horizon: float, seed: int) -> list[list[tuple[float, float, int]]]:
        """``scenarios`` futures of arrivals in (0, ``horizon``] from now: (release, run time, GPUs) each,
        by release: Poisson arrivals at :meth:`rate`, works resampled from the last ``samples`` jobs seen;
        the same seed and model, the same futures."""
        lam = self.rate(now)
        pool = self.works()
        rng = np.random.default_rng([seed, int(round(now * 1000)) % (2 ** 63)])
        out = []
        for _ in range(self.config.scenarios):
            k = min(self.config.max_arrivals, int(rng.poisson(lam * horizon))) if lam > 0 and pool else 0
            times = np.sort(rng.uniform(0.0, horizon, k))
            picks = rng.integers(0, len(pool), k) if k else []
            out.append([(float(t), pool[i].run_s, pool[i].gpus) for t, i in zip(times, picks)])
        return out


def rollout(free: list[float], jobs: list[tuple[float, float, int]]) -> float:
    """Σ (completion − release) of ``jobs`` ((release, run time, GPUs)) under non-delay shortest-first
    dispatch on a pool of GPUs that free at ``free``, deciding at each event after 0 (an arrival or a GPU
    that frees): the decision at 0 is the one being evaluated. A job never needs more GPUs than the pool has."""
    free = sorted(free)
    m = len(free)
    arr = sorted((r, p, min(n, m)) for r, p, n in jobs)
    avail: list[tuple[float, float, int]] = []   # (run time, release, GPUs): shortest first
    i, t, total, left = 0, 0.0, 0.0, len(arr)
    while i < len(arr) and arr[i][0] <= 0:   # the queue now: dispatched at the first event after 0
        heappush(avail, (arr[i][1], arr[i][0], arr[i][2]))
        i += 1
    while left:
        k = bisect_right(free, t)
        nxt = min(arr[i][0] if i < len(arr) else math.inf, free[k] if k < m else math.inf)
        # no later event: every GPU is free, so what waits starts now (and fits: n <= m)
        t = t if math.isinf(nxt) else nxt
        while i < len(arr) and arr[i][0] <= t:
            r, p, n = arr[i]
            heappush(avail, (p, r, n))
            i += 1
        nfree = bisect_right(free, t)
        skipped = []
        while avail and nfree:
            p, r, n = heappop(avail)
            if n > nfree:
                skipped.append((p, r, n))
                continue
            del free[:n]
            for _ in range(n):
                insort(free, t + p)
            nfree -= n
            total += t + p - r
            left -= 1
        for s in skipped:
            heappush(avail, s)
    return total


@dataclass(frozen=True)
class Hold:
    """A job of the plan to hold back, and the evidence: mean saving of Σ JCT (s) and its standard error."""

    job: int
    saving: float
    stderr: float


def hold(model: ArrivalModel, now: float, seed: int, base_free: list[float],
         now_jobs: list[tuple[int, float, int, tuple[int, ...]]], rest: list[tuple[float, int]],
         keeps_running: bool) -> list[Hold]:
    """The jobs to hold back among ``now_jobs`` ((job, run time, GPUs, GPU positions) of the jobs the plan
    starts now), given ``base_free`` (each GPU's free time after the running jobs kept), ``rest`` (the other
    queued jobs: (run time, GPUs)) and whether some running job is kept (module docstring)."""
    cfg = model.config
    if not model.ready() or not now_jobs or model.rate(now) <= 0:
        return []
    held: list[Hold] = []
    ends = list(base_free)
    for j, p, n, pos in now_jobs:
        for g in pos:
            ends[g] = p
    queue = [(0.0, p, n) for p, n in rest]
    for j, p, n, pos in sorted(now_jobs, key=lambda x: (-x[1], x[0]))[:cfg.hold_max]:
        # after the hold something must still run, so that an event comes and the loop decides again
        if not (keeps_running or any(x[0] != j and x[0] not in {h.job for h in held} for x in now_jobs)):
            break
        without = list(ends)
        for g in pos:
            without[g] = base_free[g]
        savings = []
        futures = model.futures(now, min(p, cfg.horizon_s), seed)
        if not futures:
            break
        for future in futures:
            a = p + rollout(ends, queue + future)
            b = rollout(without, queue + future + [(0.0, p, n)])
            savings.append(a - b)
        mean = float(np.mean(savings))
        err = float(np.std(savings, ddof=1) / math.sqrt(len(savings))) if len(savings) > 1 else math.inf
        if not (mean > 0 and mean > cfg.z * err):
            break
        held.append(Hold(j, mean, err))
        ends, queue = without, queue + [(0.0, p, n)]
    return held
