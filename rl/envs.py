"""Gymnasium environments over the core simulator, for the ``offline`` and ``preemptive`` classes.

``SchedulingEnv(instance | source, config, problem=None, reward_scale=1.0)`` is event-driven: it
stops at decision points (arrivals and completions; for ``preemptive`` also every ``round_s``) and asks
for actions there until the agent chooses the no-op (or nothing else is possible). The observation and
the action indices are :mod:`rl.observe`'s; the mask is in the observation (``action_mask``) and from
:meth:`SchedulingEnv.action_masks` (sb3-contrib's convention).

An invalid action (masked out, or out of range) is the no-op where waiting is allowed, and changes
nothing where it is not (jobs waiting on an idle cluster with no arrival to come); it never raises
(``info["invalid_action"]`` says so). Gymnasium's checker samples unmasked actions.

Reward: −(jobs in the system) × Δt / ``reward_scale`` between consecutive decision points, so an
episode's return is exactly −(total JCT) / ``reward_scale``; the emitted schedule
(:attr:`SchedulingEnv.schedule`, a normal ``jctlab.schedule/1`` replayed by :func:`jctlab.replay.replay`)
has that total JCT (tests check the identity).

A *source* gives a new instance at every reset: any callable ``source(rng) -> Instance`` (``rng`` a
:class:`numpy.random.Generator` seeded by ``reset(seed=...)``); :func:`generator_source` makes one from
the seeded generators, :func:`suite_source` from a list of instances. ``reset(options={"instance":
inst})`` runs a given instance once.
"""

from __future__ import annotations

import copy
import os
import time
from dataclasses import replace
from typing import Any, Callable, Sequence

import gymnasium as gym
import numpy as np

from jctlab.generators import offline_instance
from jctlab.model import Instance, Schedule, load_instance
from jctlab.replay import Replay
from jctlab.simulate import Preempt, Simulator, Start

from .observe import Decision, EnvConfig, InstanceInfo, observation_space
from .suites import training_source

Source = Callable[[np.random.Generator], Instance]


def generator_source(problem: str = "offline", seeds: tuple[int, int] = (0, 10_000), **gen: Any) -> Source:
    """Instances of :func:`jctlab.generators.offline_instance` with seeds drawn from ``seeds`` (training
    seeds stay below 10,000, the project's evaluation range); list-valued keyword arguments (``jobs=[8, 12]``,
    ``gpus=[8, 16]``; lists, not tuples) are drawn per instance too."""
    lo, hi = seeds

    def source(rng: np.random.Generator) -> Instance:
        kw = {k: (v[int(rng.integers(len(v)))] if isinstance(v, list) else v) for k, v in gen.items()}
        if "gpus" in kw and "nodes" not in kw:
            kw["nodes"] = max(1, kw["gpus"] // 4)
        return offline_instance(seed=int(rng.integers(lo, hi)), problem=problem, **kw)

    return source


def suite_source(instances: Sequence[Instance]) -> Source:
    """The instances of a list, drawn uniformly."""
    insts = list(instances)
    return lambda rng: insts[int(rng.integers(len(insts)))]


class SchedulingEnv(gym.Env):
    metadata = {"render_modes": []}

    def __init__(self, source: Instance | Source, config: EnvConfig | None = None, problem: str | None = None,
                 reward_scale: float = 1.0):
        self.cfg = config or EnvConfig()
        if isinstance(source, Instance):
            inst = source
            self.cfg = self.cfg.sized_for(inst) if config is None else self.cfg
            source = lambda rng: inst  # noqa: E731
        self.source = source
        self.problem = problem
        self.reward_scale = float(reward_scale)
        self.observation_space = observation_space(self.cfg)
        self.action_space = gym.spaces.Discrete(self.cfg.n_actions)
        self.sim: Simulator | None = None
        self.decision: Decision | None = None
        self.schedule: Schedule | None = None
        self.replay: Replay | None = None

    # ------------------------------------------------------------------ gym API
    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        inst = (options or {}).get("instance") or self.source(self.np_random)
        if self.problem is not None and inst.problem != self.problem:
            inst = replace(inst, problem=self.problem)
        if inst.problem == "static":
            inst = replace(inst, problem="offline")        # every arrival is 0: the offline rules hold
        if len(inst.cluster.nodes) > self.cfg.max_nodes:
            raise ValueError(f"instance {inst.name} has {len(inst.cluster.nodes)} nodes; the env's tables hold "
                             f"{self.cfg.max_nodes} (EnvConfig.max_nodes)")
        self.inst = inst
        self.info_ = InstanceInfo(inst)
        round_s = self.cfg.round_s if inst.problem == "preemptive" else None
        self.sim = Simulator(inst, _NoPolicy(), round_s=round_s, method="rl-env")
        self.t0 = time.perf_counter()
        self.started: set[int] = set()
        self.stopped: set[int] = set()
        self.schedule = self.replay = None
        self.total_jct = 0.0
        self.steps = 0
        self._advance()          # nothing is in the system before the first decision point: reward 0
        return self._obs(), self._info()

    def step(self, action):
        assert self.sim is not None, "call reset() first"
        self.steps += 1
        a = int(action) if np.isscalar(action) or np.ndim(action) == 0 else int(np.asarray(action).item())
        d = self.decision
        invalid = not (0 <= a < self.cfg.n_actions) or not d.obs["action_mask"][a]
        if invalid:
            a = 0
            if not d.obs["action_mask"][0]:          # waiting is not allowed: nothing happens
                return self._obs(), 0.0, False, False, self._info(invalid=True)
        act = d.action(a) if a else None
        if act is None:
            reward = self._advance()
        else:
            self.sim.apply([act])
            (self.started if isinstance(act, Start) else self.stopped).add(act.job)
            reward = self._settle()
        done = self.sim.done == len(self.inst.jobs)
        if done:
            self.schedule, self.replay = self.sim.finish(time.perf_counter() - self.t0)
        return self._obs(), reward, done, False, self._info(invalid=invalid)

    def fork(self) -> "SchedulingEnv":
        """A copy of the episode in progress, stepped on its own (rollouts from this state: the instance,
        its constants, the planner's memo and the engine's constants and memo of base times are shared, they are
        pure; the simulator's state is copied)."""
        assert self.sim is not None, "call reset() first"
        new = copy.copy(self)
        eng = self.sim.engine
        memo = {id(self.inst): self.inst, id(self.info_): self.info_, id(self.sim.policy): self.sim.policy}
        memo.update((id(o), o) for o in eng.shared())
        new.sim = copy.deepcopy(self.sim, memo)
        new.started, new.stopped = set(self.started), set(self.stopped)
        if self.decision is not None:
            new.decision = copy.copy(self.decision)
            new.decision.sim = new.sim
        return new

    def action_masks(self) -> np.ndarray:
        """sb3-contrib's ``MaskablePPO`` reads the mask here (a bool copy of ``obs["action_mask"]``)."""
        return self._obs()["action_mask"].astype(bool)

    # ------------------------------------------------------------------ internals
    def _in_system(self) -> int:
        return len(self.sim.waiting) + len(self.sim.engine.running)

    def _advance(self) -> float:
        """Advance the simulator until a decision with a choice, accumulating −N·Δt."""
        sim = self.sim
        reward = 0.0
        while True:
            t_prev, n_prev = sim.now, self._in_system()
            if not sim.advance():
                reward -= n_prev * (sim.now - t_prev)
                self.total_jct += n_prev * (sim.now - t_prev)
                self.decision = None
                return reward / self.reward_scale
            reward -= n_prev * (sim.now - t_prev)
            self.total_jct += n_prev * (sim.now - t_prev)
            self.started, self.stopped = set(), set()
            if self._decide_here():
                return reward / self.reward_scale

    def _settle(self) -> float:
        """After an action: stay at this point while there is a choice, else move on."""
        return 0.0 if self._decide_here() else self._advance()

    def _decide_here(self) -> bool:
        self.decision = Decision(self.sim, self.info_, self.cfg, self.started, self.stopped)
        if not self.decision.only_noop:
            return True
        if not self.decision.obs["action_mask"][0]:
            raise RuntimeError(f"instance {self.inst.name}: waiting jobs fit nowhere on the idle cluster")
        return False

    def _obs(self) -> dict[str, np.ndarray]:
        if self.decision is None:                   # the episode is over: an empty, valid observation
            obs = {k: np.zeros(s.shape, s.dtype) for k, s in self.observation_space.spaces.items()}
            obs["action_mask"][0] = 1
            return obs
        return {k: v.copy() for k, v in self.decision.obs.items()}

    def _info(self, invalid: bool = False) -> dict[str, Any]:
        info: dict[str, Any] = {"time": self.sim.now, "invalid_action": invalid}
        if self.replay is not None:
            info["objective"] = self.replay.objective
            info["total_jct"] = self.total_jct
        return info


class _NoPolicy:
    """The env decides through ``step``; the simulator's own loop is never run."""

    def decide(self, sim):  # pragma: no cover - never called
        return []


#: the env's Gymnasium id, registered when this module is imported (``gymnasium.make("rl.envs:" + ENV_ID)``
#: imports it first)
ENV_ID = "jctlab/Scheduling-v0"


def make_env(source: Instance | Source | None = None, *, family: str = "small",
             instance: str | os.PathLike | None = None, config: EnvConfig | None = None, problem: str | None = None,
             reward_scale: float = 1.0) -> SchedulingEnv:
    """The entry point of :data:`ENV_ID`: an env over ``source`` (an instance or a source), else over the
    instance file ``instance``, else over the training seeds (below 9,000) of ``family`` (:mod:`rl.suites`; a
    comma-separated list draws a family per episode). The other arguments are :class:`SchedulingEnv`'s."""
    if source is None:
        source = load_instance(instance) if instance is not None else training_source(family, problem or "offline")
    return SchedulingEnv(source, config, problem=problem, reward_scale=reward_scale)


if ENV_ID not in gym.registry:
    gym.register(id=ENV_ID, entry_point=make_env)

__all__ = ["SchedulingEnv", "EnvConfig", "ENV_ID", "make_env", "generator_source", "suite_source", "Preempt", "Start"]
