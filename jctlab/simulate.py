"""Online simulation: drive a policy through arrivals, completions and rounds, emit its schedule.

The simulator calls ``policy.decide(sim)`` at every decision point (a batch of arrivals and
completions at one instant, and at every multiple of ``round_s`` seconds when rounds are asked for;
rounds on an idle, empty cluster are skipped). Its work is bounded by the instance, not by a ratio of
two of its numbers (SPEC §7): a round so short that some job alone spans more than ``MAX_ROUNDS`` of
them, or restarts that span more than ``MAX_RESTART_ROUNDS``, are refused before the run
(:func:`check_rounds`), and a run that makes more decisions than ``max_decisions`` (a policy that
keeps preempting and never finishes) stops with :class:`PolicyError`; so does a preemptive run in which no
job progresses for ``stall_rounds`` rounds while jobs run (each stopped or moved before its restart ends). The policy
reads the state (``sim.now``, ``sim.waiting``, ``sim.engine``...) and returns :class:`Start` and
:class:`Preempt` actions; the simulator applies preemptions first, then starts, through the same
:class:`Engine` that replay uses, so an action that breaks a rule fails at once. The schedule it
emits is then replayed like any other.
"""

from __future__ import annotations

import gc
import math
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, Iterable, Protocol, Sequence, Union, runtime_checkable

import numpy as np

from .engine import Engine
from .errors import InputError, InvalidSchedule
from .limits import MAX_RESTART_ROUNDS, MAX_ROUNDS
from .model import GPU, Allocation, Claimed, Instance, Job, Schedule, Segment
from .replay import Replay, replay


@dataclass(slots=True)
class Start:
    """Start (or resume) job index ``job`` on ``alloc`` now."""

    job: int
    alloc: Allocation


@dataclass(slots=True)
class Preempt:
    """Stop running job index ``job`` now; it keeps its progress and returns to the queue."""

    job: int


Action = Union[Start, Preempt]


@runtime_checkable
class Policy(Protocol):
    """An online scheduling policy. ``decide`` sees the simulator and returns actions for now. A
    round-based policy also has ``round_s`` (seconds), the round length used when the caller gives none."""

    def decide(self, sim: "Simulator") -> Iterable[Action]: ...


#: round ticks with jobs running and no job progressing after which a preemptive run stops as never ending.
#: A job that keeps its GPUs progresses within ``MAX_RESTART_ROUNDS`` rounds (``check_rounds``), so this many
#: are at least a hundred restarts in a row, every one cut short: a placement re-drawn each round, with a
#: restart longer than the round, can go on like that for the whole decision cap (minutes)
STALL_ROUNDS = 100 * MAX_RESTART_ROUNDS
_STALL_CHECK = 1_000        # ticks between two looks at the jobs' progress (a look is O(jobs))


class PolicyError(RuntimeError):
    """A policy asked for something impossible, or left jobs waiting forever."""


def least_run_time(job: Job, inst: Instance, gpus: Sequence[GPU] | None = None) -> float:
    """A lower bound of ``job``'s run time on any allocation (SPEC §2): its iterations at the per-iteration
    time of its largest size with every GPU at the best rate any GPU of the cluster gives it (compute only:
    communication, the locality penalty and interference only add), or at its best measured throughput,
    sped up by its best CPU/memory level. ``inf`` when no GPU of the cluster can host it. ``gpus``: the
    cluster's GPUs to look at, by default all; :func:`gpu_kinds` (one per type and variability) gives
    the same bound."""
    cl = inst.cluster
    gpus = cl.gpus if gpus is None else gpus
    best_rate = max((job.samples_per_s.get(g.type, 0.0) / g.factor(job.job_class) for g in gpus), default=0.0)
    top = max(job.sizes)
    t = job.batch / (top * best_rate) if best_rate > 0 else float("inf")
    low_var = min((g.factor(job.job_class) for g in gpus), default=1.0)
    for row in job.measured.values():
        for v in row.values():
            t = min(t, low_var / v)
    speedup = max([1.0] + [lv[2] for lv in (job.cpu_mem.levels if job.cpu_mem else ())])
    return job.iterations * t / speedup


def gpu_kinds(inst: Instance) -> list[GPU]:
    """One GPU of each (type, variability) of the cluster: all that :func:`least_run_time` reads of a
    GPU, so its max and min over these equal those over every GPU."""
    kinds: dict[tuple, GPU] = {}
    for g in inst.cluster.gpus:
        kinds.setdefault((g.type, tuple(sorted(g.variability.items()))), g)
    return list(kinds.values())


def check_rounds(inst: Instance, round_s: float) -> None:
    """Refuse (InputError naming the field) rounds that would make the run's length a ratio of two numbers:
    a job that alone spans more than MAX_ROUNDS rounds, or restarts longer than MAX_RESTART_ROUNDS rounds."""
    restart = inst.cluster.restart_s
    if inst.problem == "preemptive" and restart / round_s > MAX_RESTART_ROUNDS:
        raise InputError(inst.name, "cluster.restart_s",
                         f"a restart of {restart:g} s spans {restart / round_s:.3g} rounds of {round_s:g} s "
                         f"(at most {MAX_RESTART_ROUNDS}): use longer rounds (--round)")
    kinds = gpu_kinds(inst)      # the cluster's GPUs once per kind, not once per job
    runs = [(t, j) for j in inst.jobs if math.isfinite(t := least_run_time(j, inst, kinds))]
    if not runs:
        return
    t, longest = max(runs, key=lambda x: x[0])
    need = t / round_s
    if need > MAX_ROUNDS:
        raise InputError(inst.name, "--round",
                         f"job {longest.name} alone runs at least {need * round_s:.3g} s: {need:.3g} rounds of "
                         f"{round_s:g} s (at most {MAX_ROUNDS}); use longer rounds")


class Simulator:
    def __init__(self, inst: Instance, policy: Policy, round_s: float | None = None, method: str | None = None):
        if round_s is None:   # a round-based policy's own rounds (without them it would never be asked)
            round_s = getattr(policy, "round_s", None)
        if round_s is not None and not round_s > 0:
            raise ValueError("round length must be > 0")
        if round_s is not None:
            check_rounds(inst, round_s)
        self.inst = inst
        self.policy = policy
        self.round_s = round_s
        self.method = method or type(policy).__name__
        #: decision points allowed before the run is stopped as never ending: every round the longest job
        #: could need twice over, plus arrivals, completions and preemptions in plenty
        self.max_decisions = 2 * MAX_ROUNDS + 100 * len(inst.jobs) + 1000
        #: without restarts a running job always progresses, so only preemptive runs with them are watched
        self.stall_rounds = STALL_ROUNDS if inst.problem == "preemptive" and inst.cluster.restart_s > 0 else 0
        self._stall_ticks = 0          # round ticks with jobs running since the last look
        self._stalled = 0              # ticks, counted at the looks, in which no job progressed
        self._stall_mark: tuple[int, list[float]] | None = None
        self.engine = Engine(inst)
        self.now = 0.0
        self.reasons: frozenset[str] = frozenset()
        self.waiting: dict[int, None] = {}    # arrived, not running, not done (insertion order)
        self.arrived: list[int] = []          # in arrival order
        self.completed: list[int] = []        # in completion order
        self._open: dict[int, tuple[float, Allocation]] = {}
        self._names = [job.name for job in inst.jobs]
        self._segments: list[Segment] = []
        # each segment's start and job index: the schedule lists the segments by (start, job)
        self._seg_start: list[float] = []
        self._seg_job: list[int] = []
        self.decisions = 0
        self._order = sorted(range(len(inst.jobs)), key=lambda j: (inst.jobs[j].arrival, j))
        self._ai = 0                          # next arrival in _order
        self._next_round = 0.0 if round_s else math.inf   # rounds on the grid 0, R, 2R, ...
        self._last_stop = -math.inf           # when a job was last stopped (and left waiting)

    # --------------------------------------------------------------------- views
    @property
    def running(self) -> dict:
        return self.engine.running

    @property
    def free(self) -> dict[str, set[str]]:
        return self.engine.free

    @property
    def done(self) -> int:
        """How many jobs have completed."""
        return len(self.completed)

    @property
    def arrivals_left(self) -> int:
        """Jobs that have not arrived yet (an online policy may not look at them, only count them)."""
        return len(self._order) - self._ai

    def free_count(self) -> int:
        return sum(len(s) for s in self.engine.free.values())

    # --------------------------------------------------------------------- run
    def run(self, progress: Callable[[int], object] | None = None) -> tuple[Schedule, Replay]:
        """Simulate to the end; ``progress(jobs done)`` is called at every decision point (a progress bar)."""
        t_begin = time.perf_counter()
        with full_collections_deferred():
            while self.advance():
                self.apply(self.policy.decide(self))
                if self.stuck():
                    raise PolicyError(
                        f"policy {self.method} leaves {len(self.waiting)} job(s) waiting on an idle cluster")
                if progress is not None:
                    progress(self.done)
            if progress is not None:
                progress(self.done)
            return self.finish(time.perf_counter() - t_begin)

    def advance(self) -> bool:
        """Move to the next decision point (completions, arrivals and round ticks of one instant, applied
        to the state); False once every job is done. ``run`` is ``advance`` / ``apply`` / ``finish``; an
        agent that acts step by step (``rl.envs``) drives the same three. Each decision point counts
        against ``max_decisions``, whoever drives the run."""
        inst, eng = self.inst, self.engine
        n = len(self._order)
        if self.done == n:
            return False
        if self.decisions >= self.max_decisions:
            raise PolicyError(f"policy {self.method} made {self.decisions} decisions and {self.done} of {n} "
                              f"jobs are done at time {self.now:.6g}: stopped as never ending")
        t_arr = inst.jobs[self._order[self._ai]].arrival if self._ai < n else math.inf
        R = self.round_s
        if R and not eng.running and not self.waiting and self._next_round < t_arr:
            self._next_round = R * math.ceil(t_arr / R)  # skip empty rounds on an idle cluster
        t = min(t_arr, eng.next_completion(), self._next_round)
        if t == math.inf:
            raise PolicyError(
                f"policy {self.method} leaves {len(self.waiting)} job(s) waiting on an idle cluster")
        reasons = set()
        for j, tc in eng.pop_completions(t):
            self._close(j, None)
            self.completed.append(j)
            reasons.add("completion")
        while self._ai < n and inst.jobs[self._order[self._ai]].arrival <= t:
            j = self._order[self._ai]
            self.waiting[j] = None
            self.arrived.append(j)
            self._ai += 1
            reasons.add("arrival")
        if R and t >= self._next_round:
            reasons.add("round")
            self._next_round += R * max(1, math.floor((t - self._next_round) / R) + 1)
            if self.stall_rounds and eng.running:
                self._stall_ticks += 1
                if self._stall_ticks >= _STALL_CHECK:
                    self._look_for_progress(t)
        eng.now = self.now = t
        self.reasons = frozenset(reasons)
        if self.done < n:
            self.decisions += 1
            return True
        return False

    def _look_for_progress(self, t: float) -> None:
        """Every ``_STALL_CHECK`` ticks: has any job progressed since the last look (a completion, progress
        banked at a stop, or a job running past its restart now)? ``stall_rounds`` ticks without: stop."""
        eng = self.engine
        mark = (len(self.completed), list(eng.progress))
        moved = mark != self._stall_mark or any(r.restart_until < t for r in eng.running.values())
        self._stalled = 0 if moved else self._stalled + self._stall_ticks
        self._stall_mark, self._stall_ticks = mark, 0
        if self._stalled >= self.stall_rounds:
            restart = self.inst.cluster.restart_s
            raise PolicyError(
                f"policy {self.method}: no job has progressed in {self._stalled} rounds with jobs running (to time "
                f"{t:.6g}): each is stopped or moved before its restart ({restart:g} s = "
                f"{restart / self.round_s:.3g} rounds) ends; stopped as never ending")

    def stuck(self) -> bool:
        """Jobs wait on an idle cluster and no arrival (or, with rounds, no round) will ask again. A job stopped
        at this very instant is not stuck: the next round asks again, and a policy may restart it only then
        (the RL env's rule, :mod:`rl.envs`: a job stopped at a decision point cannot restart at that point)."""
        return (not self.engine.running and not self.arrivals_left and bool(self.waiting)
                and (not self.round_s or "round" in self.reasons) and self._last_stop < self.now)

    def finish(self, runtime: float) -> tuple[Schedule, Replay]:
        """The schedule of the finished run, replayed, claiming the replayed objective."""
        inst = self.inst
        order = np.lexsort((np.array(self._seg_job, np.intp), np.array(self._seg_start, float)))   # stable
        segs = tuple(map(self._segments.__getitem__, order.tolist()))
        sched = Schedule(inst.name, self.method, segs)
        rep = replay(inst, sched, base_times=self.engine.base_times)
        if not rep.valid:
            raise PolicyError(f"policy {self.method} produced an invalid schedule: {rep.error}")
        sched = sched.with_claim(Claimed(rep.objective, None, "feasible", runtime))
        return sched, rep

    def apply(self, actions: Iterable[Action]) -> None:
        """Apply ``actions`` now: preemptions first, then starts (a rule broken is a :class:`PolicyError`).
        A job whose work ends at its preemption (within the engine's tolerance: its completion was due at this
        very instant) is complete, and a start of it in the same batch (the policy moving it) is dropped."""
        self._apply(actions, self.now)

    def _apply(self, actions: Iterable[Action], t: float) -> None:
        eng = self.engine
        running, completion, waiting, close = eng.running, eng.completion, self.waiting, self._close
        starts = []
        finished: set[int] = set()    # completed by their preemption
        preemptive = self.inst.problem == "preemptive"
        for a in actions or ():
            if isinstance(a, Preempt):
                j = a.job
                if not preemptive:
                    raise PolicyError(f"policy {self.method} preempts a job in a {self.inst.problem} instance")
                if j not in running:
                    raise PolicyError(f"policy {self.method} preempts job {self.inst.jobs[j].name}, which is not running")
                eng.stop(j, t)
                if completion[j] is not None:
                    close(j, None)
                    self.completed.append(j)
                    finished.add(j)
                else:
                    close(j, t)
                    waiting[j] = None
                    self._last_stop = t
            else:
                starts.append(a)
        opened = self._open
        for a in starts:
            j = a.job
            if j in finished:
                continue
            if j not in waiting:
                raise PolicyError(f"policy {self.method} starts job {self.inst.jobs[j].name}, which is not waiting")
            try:
                eng.start(j, a.alloc, t)
            except InvalidSchedule as e:
                raise PolicyError(f"policy {self.method}: {e}") from None
            del waiting[j]
            opened[j] = (t, a.alloc)

    def _close(self, j: int, end: float | None) -> None:
        start, alloc = self._open.pop(j)
        self._segments.append(Segment(self._names[j], start, end, alloc))
        self._seg_start.append(start)
        self._seg_job.append(j)


@contextmanager
def full_collections_deferred():
    """Python's collector without full collections while the block runs (young ones as usual, so short-lived
    cycles are still freed); the thresholds are restored after. A long run keeps millions of segments alive,
    and each full collection walks all of them: on a non-sticky trace run they took about 15 % of the time."""
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], 1 << 30)
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)


def simulate(inst: Instance, policy: Policy, round_s: float | None = None, method: str | None = None,
             progress: Callable[[int], object] | None = None) -> tuple[Schedule, Replay]:
    return Simulator(inst, policy, round_s, method).run(progress)
