"""A PettingZoo parallel environment over the core simulator: one agent per node (or node group).

``MaifsParallelEnv(source, config, reward_scale)``, ``source`` an instance or a callable
``source(rng) -> Instance`` (a new instance per ``reset(seed=...)``, as :mod:`rl.envs`). Event-driven like
:class:`rl.envs.SchedulingEnv`: the simulator stops at decision points (arrivals and completions) and the
agents act there, all at once, each claiming one waiting job with a GPU count and a CPU/memory level on its
node(s), a joint multi-node allocation, or nothing (:mod:`rl.marl_observe`). The claims are resolved over
the coordination graph (:mod:`rl.coordination`), the starts applied through ``sim.apply`` (the engine's
rules, so every start is valid by construction), and:

- if something started, the agents act again at the same instant (deferred claims are re-made there, on the
  state the starts left), until a step starts nothing or no agent has anything to claim;
- a step that starts nothing moves time to the next decision point.

Reward (shared by every agent: the team's objective): −(jobs in the system) × Δt / ``reward_scale`` between
steps, so an episode's return is exactly −(total JCT) / ``reward_scale`` (tests check it against the replayed
schedule, :attr:`schedule`). On an idle cluster with nothing left to arrive every agent that can claim must
(its no-op is masked), as the single-agent env does.

PettingZoo conventions: ``possible_agents`` are ``agent_0 .. agent_{max_agents-1}``, ``agents`` those of the
episode's instance; ``observation_space(agent)`` / ``action_space(agent)`` return one cached object per
agent; the mask is ``obs[agent]["action_mask"]`` and ``infos[agent]["action_mask"]``; an invalid action
(masked or out of range) is the no-op (``infos[agent]["invalid_action"]``); ``infos[agent]`` also holds the
agent's claim outcome and the step's coordination counts (:meth:`rl.coordination.Resolution.counts`);
:attr:`coordination_totals` sums them over the episode. ``max_cycles`` truncates an episode (the
PettingZoo test sets it). ``state()`` is the centralized critic's view (every agent's node row and the
global features).
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any, Callable

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv, ParallelEnv
from pettingzoo.utils.conversions import parallel_to_aec

from jctlab.model import Instance, Schedule, load_instance
from jctlab.replay import Replay
from jctlab.simulate import Simulator

from .coordination import OUTCOMES, Claim, Resolution, resolve
from .maifs_workloads import TRAIN_FAMILIES, training_source
from .marl_observe import (
    F_GLOB,
    F_NODE,
    MarlConfig,
    MarlDecision,
    MarlInfo,
    observation_space,
)

Source = Callable[[np.random.Generator], Instance]


class _NoPolicy:
    def decide(self, sim):  # pragma: no cover - the env drives the simulator itself
        return []


class MaifsParallelEnv(ParallelEnv):
    metadata = {"name": "jctlab_maifs_v0", "render_modes": []}

    def __init__(self, source: Instance | Source, config: MarlConfig | None = None, reward_scale: float = 1.0,
                 max_cycles: int | None = None):
        self.cfg = config or MarlConfig()
        if isinstance(source, Instance):
            inst = source
            source = lambda rng: inst  # noqa: E731
        self.source = source
        self.reward_scale = float(reward_scale)
        self.max_cycles = max_cycles
        self.render_mode = None          # nothing to render (PettingZoo's wrappers read the attribute)
        self.possible_agents = [f"agent_{i}" for i in range(self.cfg.max_agents)]
        self.agents: list[str] = []
        obs_space = observation_space(self.cfg)
        act_space = spaces.Discrete(self.cfg.n_actions)
        self._obs_spaces = {a: obs_space for a in self.possible_agents}
        self._act_spaces = {a: act_space for a in self.possible_agents}
        self.state_space = spaces.Box(-1e4, 1e4, shape=(self.cfg.max_agents * F_NODE + F_GLOB,), dtype=np.float32)
        self.sim: Simulator | None = None
        self.decision: MarlDecision | None = None
        self.schedule: Schedule | None = None
        self.replay: Replay | None = None
        self.np_random = np.random.default_rng()

    def observation_space(self, agent: str) -> spaces.Dict:
        return self._obs_spaces[agent]

    def action_space(self, agent: str) -> spaces.Discrete:
        return self._act_spaces[agent]

    # ------------------------------------------------------------------ API
    def reset(self, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.np_random = np.random.default_rng(seed)
        inst = (options or {}).get("instance") or self.source(self.np_random)
        if inst.problem != "offline":
            inst = replace(inst, problem="offline")   # static: every arrival 0; preemptive: run without preempting
        self.inst = inst
        self.info = MarlInfo(inst, self.cfg)
        self.agents = self.possible_agents[: len(self.info.groups)]
        self.sim = Simulator(inst, _NoPolicy(), method="maifs-env")
        self.t0 = time.perf_counter()
        self.schedule = self.replay = None
        self.total_jct = 0.0
        self.cycles = 0
        self.substep = 0
        self.last: Resolution | None = None
        self.coordination_totals: dict[str, int] = {}
        self._advance()
        obs = self._observations()
        return obs, self._infos({a: False for a in self.agents})

    def step(self, actions: dict[str, Any]):
        assert self.sim is not None, "call reset() first"
        self.cycles += 1
        d = self.decision
        claims, invalid = [], {}
        for i, name in enumerate(self.agents):
            a = actions.get(name, 0)
            try:
                a = int(np.asarray(a).item())
            except (TypeError, ValueError):
                a = -1
            ok = 0 <= a < self.cfg.n_actions and d is not None and bool(d.obs["action_mask"][i, a])
            invalid[name] = not ok
            opt = d.option(i, a) if ok and a > 0 else None
            if opt is not None:
                claims.append(Claim(i, opt))
        res = resolve(self.sim, self.info, claims)
        self.last = res
        for k, v in res.counts().items():
            self.coordination_totals[k] = self.coordination_totals.get(k, 0) + v
        if res.starts:
            self.sim.apply(res.starts)
            reward = self._settle()
        elif d is not None and d.forced:
            reward = 0.0          # nothing started where waiting is not allowed: the agents claim again
            self.substep += 1
            if self.substep > 100 * len(self.inst.jobs):
                raise RuntimeError(f"instance {self.inst.name}: no claim can start the jobs waiting on the idle cluster")
            self.decision = MarlDecision(self.sim, self.info, self.cfg, self.substep)
        else:
            reward = self._advance()
        done = self.sim.done == len(self.inst.jobs)
        if done:
            self.schedule, self.replay = self.sim.finish(time.perf_counter() - self.t0)
        trunc = not done and self.max_cycles is not None and self.cycles >= self.max_cycles
        names = list(self.agents)
        obs = self._observations()
        infos = self._infos(invalid)
        rewards = {a: reward for a in names}
        terms = {a: done for a in names}
        truncs = {a: trunc for a in names}
        if done or trunc:
            self.agents = []
        return obs, rewards, terms, truncs, infos

    def state(self) -> np.ndarray:
        out = np.zeros(self.state_space.shape, np.float32)
        if self.decision is not None:
            rows = self.decision.obs["node"].reshape(-1)
            out[: len(rows)] = rows
            out[-F_GLOB:] = self.decision.obs["glob"][0]
        return out

    # ------------------------------------------------------------------ internals
    def _elapse(self) -> tuple[bool, float]:
        """Move the simulator to its next decision point: (whether jobs remain, jobs in the system × the time
        that passed, which is what the total JCT grows by)."""
        sim = self.sim
        t, in_system = sim.now, len(sim.waiting) + len(sim.engine.running)
        more = sim.advance()
        area = in_system * (sim.now - t)
        self.total_jct += area
        return more, area

    def _advance(self) -> float:
        """To the next decision point where some agent can claim something; the reward on the way."""
        area = 0.0
        while True:
            more, da = self._elapse()
            area += da
            if not more:
                self.decision = None
                break
            self.substep = 0
            self.decision = MarlDecision(self.sim, self.info, self.cfg, 0)
            if not self.decision.only_noop:
                break
            if self.sim.stuck():
                raise RuntimeError(f"instance {self.inst.name}: waiting jobs fit nowhere on the idle cluster")
        return -area / self.reward_scale

    def _settle(self) -> float:
        """After starts: stay at this instant while some agent can claim, else move on."""
        self.substep += 1
        self.decision = MarlDecision(self.sim, self.info, self.cfg, self.substep)
        return 0.0 if not self.decision.only_noop else self._advance()

    def _observations(self) -> dict[str, dict[str, np.ndarray]]:
        d = self.decision
        out = {}
        for i, name in enumerate(self.agents):
            if d is None:
                sp = self._obs_spaces[name]
                o = {k: np.zeros(s.shape, s.dtype) for k, s in sp.spaces.items()}
                o["action_mask"][0] = 1
            else:
                o = {k: v[i].copy() for k, v in d.obs.items()}
            out[name] = o
        return out

    def _infos(self, invalid: dict[str, bool]) -> dict[str, dict[str, Any]]:
        res = self.last
        counts = res.counts() if res is not None else {}
        out = {}
        for i, name in enumerate(self.agents):
            info: dict[str, Any] = {"time": self.sim.now, "invalid_action": invalid.get(name, False),
                                    "claim": (res.outcomes.get(i, "none") if res is not None else "none"),
                                    "coordination": counts}
            if self.decision is not None:
                info["action_mask"] = self.decision.obs["action_mask"][i].copy()
            else:
                info["action_mask"] = np.eye(1, self.cfg.n_actions, 0, dtype=np.int8)[0]
            if self.replay is not None:
                info["objective"] = self.replay.objective
                info["total_jct"] = self.total_jct
            out[name] = info
        return out


def parallel_env(source: Instance | Source | None = None, *, family: str = TRAIN_FAMILIES,
                 instance: str | os.PathLike | None = None, config: MarlConfig | None = None, reward_scale: float = 1.0,
                 max_cycles: int | None = None) -> MaifsParallelEnv:
    """PettingZoo's constructor (``rl.marl_env.parallel_env(...)``, as ``pistonball_v6.parallel_env()``): the env
    over ``source`` (an instance or a source), else over the instance file ``instance``, else over the training
    seeds (below 9,000) of ``family`` (:mod:`rl.maifs_workloads`; comma-separated: a family per episode). The
    other arguments are :class:`MaifsParallelEnv`'s."""
    if source is None:
        source = load_instance(instance) if instance is not None else training_source(family)
    return MaifsParallelEnv(source, config, reward_scale=reward_scale, max_cycles=max_cycles)


def env(**kwargs: Any) -> AECEnv:
    """The AEC form of :func:`parallel_env` (``pettingzoo.utils.parallel_to_aec``): agents act in turn, and the
    joint step runs once every agent has acted."""
    return parallel_to_aec(parallel_env(**kwargs))


__all__ = ["MaifsParallelEnv", "MarlConfig", "OUTCOMES", "parallel_env", "env"]
