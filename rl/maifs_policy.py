"""The MAIFS-like policy as a jctlab online policy: ``maifs``, ``maifs:CHECKPOINT``, ``maifs-greedy``.

Entry point ``jctlab.policy_families`` ``maifs = rl.families:resolve_maifs``: ``jctlab simulate INST --policy
maifs`` runs the shipped checkpoint (``rl/checkpoints/maifs.pt``), ``maifs:PATH`` a trained one,
``maifs-greedy`` the decentralized greedy rule (:mod:`rl.maifs_teacher`), and the evaluation harness knows
the names. It runs on any instance: jobs without ``cpu_mem`` tables get the fair share, clusters with more
nodes than the checkpoint's ``max_agents`` get agents of node groups.

At each decision point (decentralized execution): every agent's observation (:mod:`rl.marl_observe`), one
batched forward pass (each agent's policy head, agents exchanging embeddings through attention), every
agent's most probable valid claim (``deterministic``; false samples with the policy's seed), the claims
resolved over the coordination graph (:mod:`rl.coordination`) and applied at once through ``sim.apply``;
then again at the same instant until a step starts nothing. ``latencies`` keeps the wall time of each step
(observations of every agent, the forward pass, the resolution), ``cpu_latencies`` its CPU time in this thread
(what a loaded machine's wall time overstates), ``coordination`` the summed counts of
the graph (conflicts, outcomes, edges). Durations are seen on the trained time scale stretched by the
arrived jobs' median run time over one hour (the lesson of ``hrl`` on Philly's days-long jobs, taken over
before measuring this policy there).
"""

from __future__ import annotations

from dataclasses import replace
from importlib import resources
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from jctlab.errors import InputError
from jctlab.model import Instance
from jctlab.simulate import Simulator

from .agent import MarlAgentPolicy
from .maifs_teacher import greedy_actions
from .marl_nets import MaifsNet, batch_obs
from .marl_observe import MarlConfig, MarlDecision
from .ppo import load_checkpoint

CHECKPOINT_FORMAT = "jctlab.maifs-checkpoint/1"
RUNTIME_WINDOW = 32      # waiting jobs each agent sees at run time (16 in training; no parameter depends on it)


def shipped() -> Path:
    return Path(str(resources.files("rl") / "checkpoints" / "maifs.pt"))


class MaifsPolicy(MarlAgentPolicy):
    """Agents acting in the simulator through ``chooser(decision) -> one action per agent``: agents of the env
    (:class:`rl.agent.MarlAgentPolicy`) whose choice is ``chooser``'s, seeing ``RUNTIME_WINDOW`` waiting jobs."""

    def __init__(self, inst: Instance, cfg: MarlConfig, chooser: Callable[[MarlDecision], np.ndarray],
                 auto_scale: bool = False):
        super().__init__(inst, None, replace(cfg, max_jobs=max(cfg.max_jobs, min(RUNTIME_WINDOW, len(inst.jobs)))))
        self.chooser = chooser
        self.trained_scale = cfg.time_scale
        self.auto_scale = auto_scale

    def choose(self, d: MarlDecision) -> np.ndarray:
        return self.chooser(d)

    def start_point(self, sim: Simulator) -> None:
        if self.auto_scale and sim.arrived:
            self.cfg = replace(self.cfg, time_scale=self._scale(sim))

    def _scale(self, sim: Simulator) -> float:
        """The trained time scale stretched by the arrived jobs' median run time alone over one hour (as
        :class:`rl.policy.LearnedPolicy` does): days-long jobs stay within the trained feature range."""
        ref = sorted(self.info.ref[j] for j in sim.arrived)
        med = ref[len(ref) // 2]
        return self.trained_scale * max(1.0, med / 3600.0) if med < float("inf") else self.trained_scale


class _Network:
    """The trained network as a chooser: a batched forward pass over every agent, masked argmax or a sample."""

    def __init__(self, net: MaifsNet, deterministic: bool, seed: int, threads: int):
        self.net, self.deterministic, self.threads = net, deterministic, threads
        self.gen = torch.Generator().manual_seed(int(seed))

    def __call__(self, d: MarlDecision) -> np.ndarray:
        torch.set_num_threads(self.threads)
        with torch.no_grad():
            logits = self.net.actor(batch_obs([d.obs]))[0]
            if self.deterministic:
                return logits.argmax(-1).numpy()
            u = torch.rand(logits.shape, generator=self.gen).clamp(1e-12, 1 - 1e-12)
            return (logits - torch.log(-torch.log(u))).argmax(-1).numpy()      # Gumbel-max sample


def load_net(path: str | Path) -> tuple[MaifsNet, MarlConfig]:
    try:
        st = load_checkpoint(path)
    except (OSError, RuntimeError, EOFError) as e:
        raise InputError(str(path), "", f"cannot read the checkpoint ({e.__class__.__name__})") from None
    if not isinstance(st, dict) or st.get("format") != CHECKPOINT_FORMAT:
        raise InputError(str(path), "format", "not a MAIFS-like checkpoint (jctlab train --policy maifs)")
    cfg = MarlConfig(**st["env"])
    net = MaifsNet(cfg, st["hidden"])
    net.load_state_dict(st["model"])
    net.eval()
    return net, cfg


def learned(inst: Instance, checkpoint: str | Path, seed: int = 0, deterministic: bool = True,
            threads: int = 1, idle_wait: bool = True) -> MaifsPolicy:
    net, cfg = load_net(checkpoint)
    return MaifsPolicy(inst, replace(cfg, idle_wait=bool(idle_wait)), _Network(net, deterministic, seed, threads),
                       auto_scale=True)


def greedy(inst: Instance, seed: int = 0, max_agents: int = 16) -> MaifsPolicy:
    """The decentralized greedy rule (:mod:`rl.maifs_teacher`) through the same agents and graph."""
    return MaifsPolicy(inst, MarlConfig(max_agents=int(max_agents)), greedy_actions)


def factory_for(checkpoint: str | None) -> Callable[..., MaifsPolicy]:
    def factory(inst: Instance, seed: int = 0, deterministic: bool = True, threads: int = 1, idle_wait: bool = True):
        path = checkpoint or shipped()
        if not Path(path).exists():
            raise InputError(str(path), "", "no maifs checkpoint here (train one: jctlab train --policy maifs)")
        return learned(inst, path, seed=seed, deterministic=deterministic, threads=threads, idle_wait=idle_wait)

    factory.__name__ = "maifs" if checkpoint is None else f"maifs:{checkpoint}"
    return factory
