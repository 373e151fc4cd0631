"""Trained policies as jctlab online policies: ``ppo``, ``hrl``, ``ppo:CHECKPOINT``, ``hrl:CHECKPOINT``.

Entry point ``jctlab.policy_families`` ``rl = rl.families:resolve_rl``, so ``jctlab simulate INST --policy
hrl`` runs the shipped checkpoint (``rl/checkpoints/hrl.pt``), ``--policy hrl:runs/hrl/final.pt`` a
trained one, and every tool that resolves policies through :func:`jctlab.registry.policy_factory`
(the evaluation harness included) knows the names.

At each decision point the policy builds :class:`rl.observe.Decision` on the simulator, takes the
network's most probable valid action (``deterministic=True``; ``False`` samples with the policy's seed),
applies it at once through ``sim.apply`` (so the next choice sees the GPUs it took, as in the env), and
stops at the no-op. ``time_scale="auto"`` (the default) stretches the trained time scale by how much
longer than an hour the arrived jobs' median run time is, so that a checkpoint trained on jobs of hours
sees days-long Philly jobs within its trained feature range (without it, it waits for GPUs through
days: 6-9x the best baseline's mean JCT on the Philly windows); on training-like jobs it changes
nothing. ``idle_wait=False`` also masks the no-op on an idle cluster where a job can start (off by
default: on the ``small`` family it cost more than it saved). The tables are sized for the instance (up to 64 waiting jobs, every node): the
network has no size-dependent parameter. ``latencies`` keeps the wall time of each decision (one
action: the observation and one forward pass), ``point_latencies`` that of each decision point (all its
actions, the no-op included).
"""

from __future__ import annotations

from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Callable

import torch

from jctlab.errors import InputError
from jctlab.model import Instance
from jctlab.simulate import Preempt, Simulator, Start

from .agent import AgentPolicy
from .observe import Decision, EnvConfig
from .ppo import build_net, load_checkpoint


def shipped(policy: str) -> Path:
    return Path(str(resources.files("rl") / "checkpoints" / f"{policy}.pt"))


class LearnedPolicy(AgentPolicy):
    """A trained network acting in the simulator (see the module docstring): an agent of the env
    (:class:`rl.agent.AgentPolicy`) whose choice is the network's."""

    def __init__(self, inst: Instance, checkpoint: str | Path, seed: int = 0, deterministic: bool = True,
                 preempt: bool | None = None, threads: int = 1, idle_wait: bool = True,
                 time_scale: str | float = "auto"):
        try:
            st = load_checkpoint(checkpoint)
        except (OSError, RuntimeError, EOFError) as e:
            raise InputError(str(checkpoint), "", f"cannot read the checkpoint ({e.__class__.__name__})") from None
        if not isinstance(st, dict) or st.get("format") != "jctlab.rl-checkpoint/1":
            raise InputError(str(checkpoint), "format", "not a jctlab RL checkpoint")
        base = EnvConfig(**st["env"])
        cfg = replace(base.sized_for(inst), idle_wait=bool(idle_wait))
        self.trained_scale = base.time_scale
        self.auto_scale = time_scale == "auto"
        if not self.auto_scale:
            try:
                scale = float(time_scale)
            except (TypeError, ValueError):
                scale = -1.0
            if not scale > 0:
                raise InputError("command line", "--time-scale", f"'auto' or seconds > 0, got {time_scale!r}")
            cfg = replace(cfg, time_scale=scale)
        super().__init__(inst, None, cfg)
        self.net = build_net(st["policy"], self.cfg, st["hidden"])
        self.net.load_state_dict(st["model"])
        self.net.eval()
        self.deterministic = deterministic
        trained_preemptive = st["args"].get("problem", "offline") == "preemptive"
        self.preempt = trained_preemptive if preempt is None else bool(preempt)
        self.gen = torch.Generator().manual_seed(int(seed))
        self.threads = threads

    def start_point(self, sim: Simulator) -> None:
        torch.set_num_threads(self.threads)
        if self.auto_scale and sim.arrived:
            self.cfg = replace(self.cfg, time_scale=self._scale(sim))

    def choose(self, d: Decision) -> int:
        if not self.preempt:
            d.obs["action_mask"][1: 1 + self.cfg.max_running] = 0
        with torch.inference_mode():
            return self.net.act({k: torch.from_numpy(v)[None] for k, v in d.trimmed().items()},
                                None if self.deterministic else self.gen)

    def _scale(self, sim: Simulator) -> float:
        """The trained time scale, stretched by how much longer the jobs that have arrived are than the
        training jobs (median run time alone against one hour): durations stay in the trained range."""
        ref = sorted(self.info.ref[j] for j in sim.arrived)
        med = ref[len(ref) // 2]
        return self.trained_scale * max(1.0, med / 3600.0) if med < float("inf") else self.trained_scale


def factory_for(policy: str, checkpoint: str | None) -> Callable[..., LearnedPolicy]:
    def factory(inst: Instance, seed: int = 0, deterministic: bool = True, preempt=None, threads: int = 1,
                idle_wait: bool = True, time_scale: str | float = "auto"):
        path = checkpoint or shipped(policy)
        if not Path(path).exists():
            raise InputError(str(path), "", f"no {policy} checkpoint here (train one: jctlab train --policy {policy})")
        return LearnedPolicy(inst, path, seed=seed, deterministic=deterministic, preempt=preempt, threads=threads,
                             idle_wait=idle_wait, time_scale=time_scale)

    factory.__name__ = policy if checkpoint is None else f"{policy}:{checkpoint}"
    return factory


__all__ = ["LearnedPolicy", "factory_for", "shipped", "Preempt", "Start"]
