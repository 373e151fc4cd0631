"""The online simulator: decision points, actions, errors, rounds and preemption."""

from __future__ import annotations

import gc

import pytest

from jctlab.generators import offline_instance
from jctlab.model import Allocation, Instance
from jctlab.policies import fifo_firstfit
from jctlab.simulate import PolicyError, Preempt, Simulator, Start, simulate

from .conftest import tiny_dict


class Script:
    """A policy that plays a fixed list of (time, actions) and records when it was called."""

    def __init__(self, plan):
        self.plan = dict(plan)
        self.calls = []

    def decide(self, sim):
        self.calls.append((sim.now, sim.reasons))
        return self.plan.get(sim.now, [])


def test_policy_is_called_at_arrivals_and_completions(tiny):
    pol = Script({0.0: [Start(0, Allocation(("n0:0",)))], 5.0: [Start(1, Allocation(("n1:0",)))]})
    s, r = simulate(tiny, pol)
    assert r.valid
    times = [t for t, _ in pol.calls]
    assert times[:2] == [0.0, 5.0] and "arrival" in pol.calls[1][1]
    assert {"completion"} <= set().union(*(x for _, x in pol.calls[2:]))


def test_rounds_add_decision_points():
    d = tiny_dict()
    d["problem"] = "preemptive"
    inst = Instance.from_dict(d)
    pol = Script({0.0: [Start(0, Allocation(("n0:0",)))], 20.0: [Start(1, Allocation(("n1:0",)))]})
    s, r = Simulator(inst, pol, round_s=10.0).run()
    assert r.valid
    assert [t for t, x in pol.calls if "round" in x][:3] == [0.0, 10.0, 20.0]


def test_preemption_and_resume_pay_restart():
    d = tiny_dict(restart_s=10.0)
    d["problem"] = "preemptive"
    d["jobs"][0].update(batch=100, comm_mb=0)  # 1 s/iteration on n0:0, 100 iterations
    inst = Instance.from_dict(d)
    plan = {0.0: [Start(0, Allocation(("n0:0",)))], 5.0: [Start(1, Allocation(("n1:0",)))],
            20.0: [Preempt(0)], 30.0: [Start(0, Allocation(("n0:1",)))]}
    s, r = Simulator(inst, Script(plan), round_s=10.0).run()
    assert r.valid, r.error
    a = [x for x in s.segments if x.job == "a"]
    assert [(x.start, x.end) for x in a] == [(0.0, 20.0), (30.0, None)]
    # resumed on the slower GPU (factor 1.25 for class A): 80 iterations left after 10 s restart
    assert r.completion["a"] == pytest.approx(30 + 10 + 80 * 1.25)


def test_a_job_that_ends_at_its_preemption_is_complete_and_its_move_dropped():
    """A round-based policy moves a job at the instant its work ends (within the engine's tolerance, before
    its completion event): the preemption completes it, and the start that would have moved it is dropped
    (it was a PolicyError: found by gittins+packed-nonsticky on a Philly slice)."""
    d = tiny_dict()
    d["problem"] = "preemptive"
    d["jobs"][0].update(batch=100, comm_mb=0)           # 1 s/iteration on n0:0, 100 iterations
    d["jobs"][1]["arrival"] = 100.0 * (1 - 1e-10)       # a decision point just before a's completion event
    inst = Instance.from_dict(d)
    t = d["jobs"][1]["arrival"]
    plan = {0.0: [Start(0, Allocation(("n0:0",)))],
            t: [Preempt(0), Start(0, Allocation(("n0:1",))), Start(1, Allocation(("n1:0",)))]}
    s, r = simulate(inst, Script(plan))
    assert r.valid, r.error
    assert [(x.start, x.end) for x in s.segments if x.job == "a"] == [(0.0, None)]
    assert r.completion["a"] == pytest.approx(100.0)
    with pytest.raises(PolicyError, match="not waiting"):   # a start of a job still running is an error still
        simulate(inst, Script({0.0: [Start(0, Allocation(("n0:0",)))], t: [Start(0, Allocation(("n0:1",)))]}))


def test_impossible_actions_are_policy_errors(tiny):
    with pytest.raises(PolicyError, match="hosts job"):
        simulate(tiny, Script({5.0: [Start(1, Allocation(("n0:0",)))], 0.0: [Start(0, Allocation(("n0:0",)))]}))
    with pytest.raises(PolicyError, match="not waiting"):
        simulate(tiny, Script({0.0: [Start(1, Allocation(("n0:0",)))]}))
    with pytest.raises(PolicyError, match="preempts"):
        simulate(tiny, Script({0.0: [Start(0, Allocation(("n0:0",)))], 5.0: [Preempt(0)]}))


def test_a_policy_that_never_starts_a_job_is_caught(tiny):
    with pytest.raises(PolicyError, match="waiting"):
        simulate(tiny, Script({}))


def test_fifo_firstfit_is_deterministic_and_valid():
    inst = offline_instance(gpus=16, nodes=4, jobs=40, seed=3, variability=0.1, locality_penalty=1.2)
    from jctlab.policies import FifoFirstFit

    s1, r1 = simulate(inst, FifoFirstFit(inst))
    s2, r2 = simulate(inst, FifoFirstFit(inst))
    assert r1.valid and s1.segments == s2.segments and r1.objective == r2.objective
    # strict FIFO: start order follows arrival order
    starts = sorted(s1.segments, key=lambda x: (x.start, inst.index[x.job]))
    assert [inst.index[x.job] for x in starts] == sorted(inst.index[x.job] for x in starts)


class EveryRound:
    """A round-based policy: starts the waiting jobs (one GPU each, first free) at round boundaries only."""

    round_s = 10.0

    def __init__(self):
        self.rounds = []

    def decide(self, sim):
        if "round" not in sim.reasons:
            return []
        self.rounds.append(sim.now)
        free = sorted(g for s in sim.engine.free.values() for g in s)
        return [Start(j, Allocation((g,))) for j, g in zip(sorted(sim.waiting), free)]


def test_a_policys_own_round_length_is_used_when_none_is_given(tiny):
    """Library callers of ``simulate(inst, policy)`` get the policy's rounds (the command line always did);
    before, a round-based policy was never asked and the run failed with "jobs waiting on an idle cluster"."""
    pol = EveryRound()
    s, r = simulate(tiny, pol)
    assert r.valid and pol.rounds and all(t % 10.0 == 0 for t in pol.rounds)
    pol2 = EveryRound()
    s2, r2 = simulate(tiny, pol2, round_s=5.0)
    assert r2.valid and any(t % 10.0 for t in pol2.rounds)


def test_progress_reports_jobs_done_in_order_up_to_every_job():
    inst = offline_instance(gpus=4, nodes=2, jobs=12, seed=3, interarrival_s=60.0)
    seen: list[int] = []
    sched, rep = simulate(inst, fifo_firstfit(inst), progress=seen.append)
    assert rep.valid
    assert seen == sorted(seen) and seen[-1] == len(inst.jobs)
    assert len(set(seen)) > 2          # it moves while the run goes, not only at the end


def test_a_run_defers_full_collections_and_restores_the_collector():
    """Full collections are held off while a run lasts (young ones go on), and the thresholds come back after it,
    whether it ends normally or with an error."""
    before = gc.get_threshold()
    inst = offline_instance(gpus=8, nodes=2, jobs=6, seed=1, problem="preemptive")
    seen = []
    inner = fifo_firstfit(inst)

    class Watching:
        def decide(self, sim):
            seen.append(gc.get_threshold())
            return inner.decide(sim)

    simulate(inst, Watching())
    assert gc.get_threshold() == before
    assert seen and all(t[:2] == before[:2] and t[2] > 10**6 for t in seen)

    class Failing:
        def decide(self, sim):
            raise RuntimeError("policy bug")

    with pytest.raises(RuntimeError):
        simulate(inst, Failing())
    assert gc.get_threshold() == before


class StopAtRound:
    """Starts job 0 on the first GPU; at round ``stop_at`` stops it, and restarts it at the next round (or, with
    ``restart=False``, never). With one job, that round leaves it waiting on an idle cluster."""

    round_s = 10.0

    def __init__(self, inst: Instance, stop_at: float, restart: bool = True):
        self.alloc = Allocation((inst.cluster.gpus[0].id,))
        self.stop_at, self.restart, self.stopped = stop_at, restart, None

    def decide(self, sim):
        if 0 in sim.running and sim.now >= self.stop_at and self.stopped is None:
            self.stopped = sim.now
            return [Preempt(0)]
        if 0 in sim.waiting and (self.stopped is None or self.restart and sim.now > self.stopped):
            return [Start(0, self.alloc)]
        return []


def test_a_job_stopped_at_a_round_waits_for_the_next_round_not_an_error():
    """The RL env's rule (a job stopped at a decision point restarts at a later one): stopping the last running
    job leaves the cluster idle for one round, which is not a stuck run; leaving it waiting at the next round
    with nothing stopped then is."""
    inst = offline_instance(gpus=2, nodes=1, jobs=1, max_size=1, seed=3, problem="preemptive", restart_s=0.0,
                            duration_h=(0.5, 0.5), types=("v100",))
    pol = StopAtRound(inst, stop_at=600.0)
    sched, rep = simulate(inst, pol)
    assert rep.valid and pol.stopped == 600.0
    assert [(s.start, s.end) for s in sched.segments][:2] == [(0.0, 600.0), (610.0, sched.segments[1].end)]
    with pytest.raises(PolicyError, match="waiting on an idle cluster"):
        simulate(inst, StopAtRound(inst, stop_at=600.0, restart=False))
