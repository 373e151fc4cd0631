"""The MAIFS-like network: per-agent actors sharing parameters, multi-agent attention, a centralized critic.

Inputs are :mod:`rl.marl_observe`'s per-agent tables stacked over agents: ``(B, A, ...)`` with an agent
mask (agents padded to the batch's largest cluster). For agent i:

Actor, for agent i:

1. its own nodes and the global features are embedded: e_i = MLP([node_i, glob]);
2. **multi-agent attention** (the resource-state sharing of MAIFS): e_i attends to every agent's
   embedding e_k (masked multi-head attention, so each agent's decision sees the others' free GPUs, CPUs,
   memory and co-located classes, whatever their number), then to the window's jobs (which attend to each
   other first): c_i;
3. each of its valid options (w, o) is scored from the option's features, its job's embedding and c_i
   (one MLP over their concatenation); the no-op from c_i and the pooled jobs. Masked options get −1e9.

The critic (centralized training, its own parameters) embeds every agent's nodes (attending to each
other), pools them (mean and max over agents) with the jobs and the global features into one value of the
joint state: the team's return (one shared reward). No parameter
depends on the number or order of agents, jobs or options: a network trained on 2-4 agents runs on 16
(tests permute agents and jobs and check the logits follow).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .marl_observe import F_GLOB, F_JOB, F_NODE, F_OPT, MarlConfig
from .nets import NEG, Attend, masked_mean, mlp

KEYS = ("jobs", "node", "opts", "opt_mask", "glob", "action_mask")


def batch_obs(obs: list[dict[str, np.ndarray]], agents: int | None = None) -> dict[str, torch.Tensor]:
    """Stack per-step observations (each ``(A_t, ...)``, every agent of that step) into ``(B, A, ...)``
    tensors padded to ``agents`` (default: the largest A_t), with ``agent_mask``."""
    A = agents or max(o["node"].shape[0] for o in obs)
    out = {}
    for k in KEYS:
        first = obs[0][k]
        buf = np.zeros((len(obs), A) + first.shape[1:], first.dtype)
        for b, o in enumerate(obs):
            buf[b, : o[k].shape[0]] = o[k]
        out[k] = torch.as_tensor(buf)
    am = np.zeros((len(obs), A), np.int8)
    for b, o in enumerate(obs):
        am[b, : o["node"].shape[0]] = 1
    out["agent_mask"] = torch.as_tensor(am)
    out["action_mask"][:, :, 0] |= (1 - out["agent_mask"]).to(out["action_mask"].dtype)   # padding: the no-op
    return out


class MaifsNet(nn.Module):
    """Actor (shared by every agent) and centralized critic, with no parameter in common (CTDE: the critic
    exists for training only; the policy runs on :meth:`actor` alone)."""

    def __init__(self, cfg: MarlConfig, d: int = 64):
        super().__init__()
        self.cfg = cfg
        self.d = d
        self.job = mlp(F_JOB, d, d)
        self.jobs_self = Attend(d)
        self.node = mlp(F_NODE + F_GLOB, d, d)
        self.agents = Attend(d)
        self.agent_jobs = Attend(d)
        self.opt = mlp(F_OPT, d, d)
        self.score = mlp(3 * d, d, 1)
        self.noop = mlp(2 * d, d, 1)
        # critic: its own encoders of the joint state
        self.v_job = mlp(F_JOB, d, d)
        self.v_node = mlp(F_NODE + F_GLOB, d, d)
        self.v_agents = Attend(d)
        self.value = mlp(3 * d + F_GLOB, d, 1)

    def actor(self, o: dict[str, torch.Tensor]) -> torch.Tensor:
        """Masked logits (B, A, 1 + W·O) of every agent."""
        jobs = o["jobs"][:, 0]                      # the same table for every agent
        jm = (jobs[..., 0] > 0).to(torch.int8)
        hj = self.job(jobs)
        hj = self.jobs_self(hj, hj, jm)
        e = self.node(torch.cat([o["node"], o["glob"]], -1))
        c = self.agents(e, e, o["agent_mask"])      # each agent sees the others' embeddings
        c = self.agent_jobs(c, hj, jm)
        B, A, W, O, _ = o["opts"].shape
        # only the valid options are scored (most slots are empty); the score MLP's first layer over
        # [option, job, agent] is split by blocks, so the job and agent parts are computed once each
        idx = o["opt_mask"].nonzero(as_tuple=True)
        first, act, last = self.score[0], self.score[1], self.score[2]
        d = self.d
        wo, wj, wc = first.weight[:, :d], first.weight[:, d: 2 * d], first.weight[:, 2 * d:]
        pj = hj @ wj.T                                   # (B, W, d)
        pc = c @ wc.T                                    # (B, A, d)
        pre = self.opt(o["opts"][idx]) @ wo.T + pj[idx[0], idx[2]] + pc[idx[0], idx[1]] + first.bias
        starts = torch.full((B, A, W, O), NEG, dtype=pre.dtype)
        starts[idx] = last(act(pre)).squeeze(-1)
        pooled = masked_mean(hj, jm)
        noop = self.noop(torch.cat([c, pooled[:, None].expand(-1, A, -1)], -1))
        return torch.cat([noop, starts.reshape(B, A, W * O)], -1).masked_fill(o["action_mask"] == 0, NEG)

    def critic(self, o: dict[str, torch.Tensor]) -> torch.Tensor:
        """Value (B,) of the joint state (every agent's nodes, the jobs, the global features)."""
        jobs = o["jobs"][:, 0]
        jm = (jobs[..., 0] > 0).to(torch.int8)
        am = o["agent_mask"]
        e = self.v_node(torch.cat([o["node"], o["glob"]], -1))
        c = self.v_agents(e, e, am)
        mean_c = masked_mean(c, am)
        max_c = c.masked_fill(am[..., None] == 0, -1e4).amax(1)
        pooled = masked_mean(self.v_job(jobs), jm)
        return self.value(torch.cat([mean_c, max_c, pooled, o["glob"][:, 0]], -1)).squeeze(-1)

    def forward(self, o: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        return self.actor(o), self.critic(o)


def joint_log_prob(logits: torch.Tensor, actions: torch.Tensor, agent_mask: torch.Tensor) -> torch.Tensor:
    """Per-agent log π(a_i | o) of the taken actions, (B, A), 0 for padding agents."""
    lp = torch.log_softmax(logits, -1).gather(-1, actions[..., None]).squeeze(-1)
    return lp * agent_mask.to(lp.dtype)


def entropy(logits: torch.Tensor, agent_mask: torch.Tensor) -> torch.Tensor:
    p = torch.softmax(logits, -1)
    h = -(p * torch.log_softmax(logits, -1)).sum(-1)
    return h * agent_mask.to(h.dtype)
