"""The hierarchical allocation-and-placement policy's training (:class:`rl.nets.HierNet`).

Level 1 (allocator) picks the job and its shape (GPU count, type, parameter servers), or waits; level 2
(placer) picks how the shape lands on nodes, sockets and GPUs (:mod:`rl.candidates`' placements).
Each level has its own reward term:

- level 1: the environment's −(jobs in the system) × Δt (its return is −total JCT), advantages by GAE;
- level 2: −(run time of the chosen placement − run time of the shape's best placement) at the moment
  of the start, as the speed model prices them (locality, variability, sockets, the interference it
  meets), per start; in the joint phase level 2 also gets level 1's advantage (its choice moves every
  later completion), weighted by ``joint_weight``.

Phases, in environment steps (``Args.steps`` split by ``phases``): ``place`` trains level 2 under the
fixed allocator (level 1 frozen), ``alloc`` trains level 1 under the fixed placer (level 2 frozen), then
``joint`` trains both. Both start from behaviour cloning when ``init`` names its checkpoint (``jctlab
train --policy hrl`` does, see :mod:`rl.train`). PPO's clipped objective is applied per level with the
level's own log-probability ratio. The loop, the rollouts and the checkpoints are :mod:`rl.ppo`'s.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from .nets import window_cut
from .ppo import Args, Rollout, clipped, index_obs, minibatches, normalized, optimize, train

PHASES = ("place", "alloc", "joint")
CAND_LOG_TIME = 12   # rl.observe candidate feature: log(1 + run time / time_scale)


def phase_of(a: Args, global_step: int, split: tuple[float, float]) -> str:
    """Which phase a step belongs to: the first ``split[0]`` of the budget places, the next ``split[1]``
    allocates, the rest is joint."""
    f = global_step / max(1, a.steps)
    return "place" if f < split[0] else "alloc" if f < split[0] + split[1] else "joint"


def placement_reward(ro: Rollout, a: Args, time_scale: float, max_running: int, shapes: int, rules: int) -> torch.Tensor:
    """Level 2's reward of every step (0 for the no-op and preemptions)."""
    act = ro.actions
    start = act > max_running
    k = (act - 1 - max_running).clamp(min=0)
    w, rest = k // (shapes * rules), k % (shapes * rules)
    s, p = rest // rules, rest % rules
    i = torch.arange(len(act))
    B, W, K, F = ro.obs["cand"].shape
    cand = ro.obs["cand"].reshape(B, W, shapes, rules, F)[i, w, s]      # (B, rules, F)
    m = ro.obs["cand_mask"].reshape(B, W, shapes, rules)[i, w, s].bool()
    t = torch.expm1(cand[..., CAND_LOG_TIME].double()) * time_scale
    chosen = t[i, p]
    best = torch.where(m, t, torch.full_like(t, math.inf)).amin(-1)
    r = -(chosen - best) / a.reward_scale
    return torch.where(start & torch.isfinite(r), r, torch.zeros_like(r)).float()


def hrl_update(split: tuple[float, float] = (0.2, 0.3), joint_weight: float = 0.5):
    """The update hook for :func:`rl.ppo.train`: clipped PPO per level, with the phase's frozen level."""

    def update(net, opt, ro: Rollout, adv1: torch.Tensor, ret: torch.Tensor, a: Args, global_step: int) -> dict[str, float]:
        cfg = net.cfg
        phase = phase_of(a, global_step, split)
        r2 = placement_reward(ro, a, cfg.time_scale, cfg.max_running, cfg.max_shapes, cfg.rules)
        is_start = ro.actions > cfg.max_running
        with torch.no_grad():
            old1, old2 = [], []
            for s in range(0, len(ro.actions), 512):
                d, _ = net.dist(index_obs(ro.obs, slice(s, s + 512)))
                l1, l2 = d.log_probs(ro.actions[s: s + 512])
                old1.append(l1)
                old2.append(l2)
            old1, old2 = torch.cat(old1), torch.cat(old2)
        adv2 = r2 + (joint_weight * adv1 if phase == "joint" else 0.0)
        train1, train2 = phase in ("alloc", "joint"), phase in ("place", "joint")
        for p in net.level_parameters(1):
            p.requires_grad_(train1)
        for p in net.level_parameters(2):
            p.requires_grad_(train2)
        stats: dict[str, list[float]] = {"pg": [], "v": [], "ent": [], "kl": []}
        for idx in minibatches(len(ro.actions), a):
            dist, v = net.dist(window_cut(index_obs(ro.obs, idx), cfg))
            l1, l2 = dist.log_probs(ro.actions[idx])
            loss = torch.zeros(())
            if train1:
                loss = loss + clipped(l1 - old1[idx], normalized(adv1[idx]), a.clip)
                loss = loss + a.vf_coef * 0.5 * (v - ret[idx]).pow(2).mean() - a.ent_coef * dist.entropy().mean()
            if train2:
                sel = is_start[idx]
                if sel.any():
                    loss = loss + clipped((l2 - old2[idx])[sel], normalized(adv2[idx][sel]), a.clip)
            if loss.requires_grad:
                optimize(net, opt, loss, a)
            stats["pg"].append(float(loss.detach()))
            stats["v"].append(float((v.detach() - ret[idx]).pow(2).mean()))
            stats["ent"].append(float(dist.entropy().detach().mean()))
            stats["kl"].append(float((old1[idx] - l1.detach()).mean()))
        for p in net.parameters():
            p.requires_grad_(True)
        return {k: float(np.mean(v)) for k, v in stats.items()}

    return update


def train_hrl(a: Args, source=None, split: tuple[float, float] = (0.2, 0.3), joint_weight: float = 0.5):
    """:func:`rl.ppo.train` with the hierarchical network and update."""
    a.policy = "hrl"
    return train(a, source, update_fn=hrl_update(split, joint_weight))
