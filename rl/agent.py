"""Any agent of the Gymnasium env as a jctlab policy: train on ``jctlab/Scheduling-v0``, score through the harness.

An agent is a function ``act(obs) -> action index`` over the env's observations (:mod:`rl.observe`; the mask
is ``obs["action_mask"]``). :class:`AgentPolicy` runs it inside the simulator exactly as the env would: at a
decision point it builds the env's observation, applies the chosen start or preemption at once (so the next
choice sees the GPUs it took), and asks again until the agent picks the no-op or nothing but the no-op is
left; an invalid action is the no-op, as in the env. So an agent's episode in the env and its run through
``jctlab simulate`` / ``jctlab evaluate`` are one schedule (``tests/test_rl_agent.py`` checks it), and every
schedule the harness scores is replayed.

A whole example (sb3-contrib's MaskablePPO trained on the env, then ``jctlab evaluate --methods agent:factory``):
``examples/sb3-agent/agent.py``.
"""

from __future__ import annotations

import itertools
import time
from typing import Any, Callable, Sequence

import numpy as np

from jctlab.errors import InputError
from jctlab.model import Instance
from jctlab.simulate import PolicyError, Simulator, Start

from .coordination import Claim, resolve
from .marl_observe import MarlConfig, MarlDecision, MarlInfo
from .observe import Decision, EnvConfig, InstanceInfo

Act = Callable[[dict[str, np.ndarray]], Any]


class AgentPolicy:
    """``act`` deciding in the simulator with the observations of ``config`` (the env's; see the module
    docstring). Subclasses choose through :meth:`choose` instead (the shipped networks, :mod:`rl.policy`).

    ``latencies`` keeps the wall time of each decision (one action: the observation and the choice),
    ``point_latencies`` that of each decision point (all its actions, the no-op included), and
    ``cpu_latencies`` / ``point_cpu_latencies`` the same in this thread's CPU time (load-independent)."""

    def __init__(self, inst: Instance, act: Act | None, config: EnvConfig):
        if len(inst.cluster.nodes) > config.max_nodes:
            raise InputError(inst.name, "cluster.nodes", f"{len(inst.cluster.nodes)} nodes; the agent's tables hold "
                             f"{config.max_nodes} (EnvConfig.max_nodes)")
        self.inst, self.act, self.cfg = inst, act, config
        self.info = InstanceInfo(inst)
        if inst.problem == "preemptive":
            self.round_s = config.round_s
        self.latencies: list[float] = []
        self.point_latencies: list[float] = []
        self.cpu_latencies: list[float] = []
        self.point_cpu_latencies: list[float] = []

    def choose(self, d: Decision) -> int:
        """The action index at decision ``d`` (the agent's, on a copy of the observation)."""
        assert self.act is not None, "AgentPolicy without act: override choose"
        a = self.act({k: v.copy() for k, v in d.obs.items()})
        return int(a) if np.ndim(a) == 0 else int(np.asarray(a).item())

    def start_point(self, sim: Simulator) -> None:
        """Called once at each decision point before the first choice (a subclass's hook)."""

    def decide(self, sim: Simulator) -> list:
        t0, c0 = time.perf_counter(), time.thread_time()
        self.start_point(sim)
        started: set[int] = set()
        stopped: set[int] = set()
        for _ in range(4 * len(self.inst.jobs) + 4):      # each job starts or stops at most once per point
            t1, c1 = time.perf_counter(), time.thread_time()
            d = Decision(sim, self.info, self.cfg, started, stopped)
            if d.only_noop:
                break
            a = self.choose(d)
            mask = d.obs["action_mask"]
            if not (0 <= a < len(mask)) or not mask[a]:      # invalid: the no-op, as in the env
                if not mask[0]:
                    raise PolicyError(f"the agent chose action {a}, invalid where a job must start "
                                      f"(t={sim.now:g}; the env would ask again, and it would choose the same)")
                a = 0
            act = d.action(a) if a else None
            self.latencies.append(time.perf_counter() - t1)
            self.cpu_latencies.append(time.thread_time() - c1)
            if act is None:
                break
            sim.apply([act])
            (started if isinstance(act, Start) else stopped).add(act.job)
        self.point_latencies.append(time.perf_counter() - t0)
        self.point_cpu_latencies.append(time.thread_time() - c0)
        return []


def agent_factory(act: Act, config: EnvConfig | None = None) -> Callable[..., AgentPolicy]:
    """A policy factory (``factory(inst, seed=0)``) of ``act`` with ``config`` (default: ``EnvConfig()``), for
    ``jctlab evaluate --methods module:factory`` and :func:`jctlab.simulate.simulate`."""
    cfg = config or EnvConfig()

    def factory(inst: Instance, seed: int = 0, **_: Any) -> AgentPolicy:
        return AgentPolicy(inst, act, cfg)

    return factory


MarlAct = Callable[[dict[str, dict[str, np.ndarray]]], dict[str, Any]]


class MarlAgentPolicy:
    """Agents of the PettingZoo env (:mod:`rl.marl_env`) deciding in the simulator as the env would:
    ``act({agent: obs}) -> {agent: action}`` over the env's agents and observations (``agent_0`` ..); the claims
    are resolved over the coordination graph and the starts applied at once; while some start, the agents act
    again at the same instant; a step that starts nothing ends the point, unless waiting is not allowed there,
    where they claim again (after ``100 × jobs`` such steps the run stops, as the env does). Invalid actions
    are no claim, as in the env. Subclasses choose through :meth:`choose` instead (the shipped policy,
    :mod:`rl.maifs_policy`).

    ``latencies`` keeps the wall time of each step (every agent's observation, the choice, the resolution),
    ``cpu_latencies`` its CPU time in this thread, ``coordination`` the graph's counts summed over the run."""

    def __init__(self, inst: Instance, act: MarlAct | None, config: MarlConfig):
        self.inst, self.act, self.cfg = inst, act, config
        self.info = MarlInfo(inst, config)
        self.names = [f"agent_{i}" for i in range(len(self.info.groups))]
        self.latencies: list[float] = []
        self.cpu_latencies: list[float] = []
        self.coordination: dict[str, int] = {}

    def choose(self, d: MarlDecision) -> Sequence[Any]:
        """One action per agent (by index) at decision ``d``: the agents', on copies of their observations."""
        assert self.act is not None, "MarlAgentPolicy without act: override choose"
        acts = self.act({name: {k: v[i].copy() for k, v in d.obs.items()} for i, name in enumerate(self.names)})
        return [acts.get(name, 0) for name in self.names]

    def start_point(self, sim: Simulator) -> None:
        """Called once at each decision point before the first step (a subclass's hook)."""

    def decide(self, sim: Simulator) -> list:
        self.start_point(sim)
        forced_steps = 0
        for substep in itertools.count():
            t0, c0 = time.perf_counter(), time.thread_time()
            d = MarlDecision(sim, self.info, self.cfg, substep)    # the env's count of steps at this instant
            if d.only_noop:
                return []
            claims = []
            for i, act in enumerate(self.choose(d)):
                try:
                    a = int(np.asarray(act).item())
                except (TypeError, ValueError):
                    a = -1
                opt = d.option(i, a) if 0 < a < self.cfg.n_actions and d.obs["action_mask"][i, a] else None
                if opt is not None:
                    claims.append(Claim(i, opt))
            res = resolve(sim, self.info, claims)
            self.latencies.append(time.perf_counter() - t0)
            self.cpu_latencies.append(time.thread_time() - c0)
            for k, v in res.counts().items():
                self.coordination[k] = self.coordination.get(k, 0) + v
            if res.starts:
                sim.apply(res.starts)
            elif not d.forced:
                return []
            else:
                forced_steps += 1
                if forced_steps > 100 * len(self.inst.jobs):
                    raise PolicyError("the agents claim nothing that starts the jobs waiting on the idle cluster")
        return []  # pragma: no cover - the loop returns or raises


def marl_agent_factory(act: MarlAct, config: MarlConfig | None = None) -> Callable[..., MarlAgentPolicy]:
    """A policy factory of PettingZoo agents ``act`` with ``config`` (default: ``MarlConfig()``), as
    :func:`agent_factory`."""
    cfg = config or MarlConfig()

    def factory(inst: Instance, seed: int = 0, **_: Any) -> MarlAgentPolicy:
        return MarlAgentPolicy(inst, act, cfg)

    return factory


__all__ = ["AgentPolicy", "agent_factory", "MarlAgentPolicy", "marl_agent_factory"]
