"""MAPPO for the MAIFS-like agents (centralized training, decentralized execution), CleanRL-style.

One file, one loop, like :mod:`rl.ppo`:

1. **behaviour cloning** from the decentralized greedy rule (:mod:`rl.maifs_teacher`) on ``bc_episodes``
   training episodes (seeds < 9,000): cross-entropy of every agent's action + the critic regressed on the
   episode's returns-to-go -> ``OUT/bc.pt`` (``bc_epochs=0`` skips it);
2. **MAPPO** from it: a vector of :class:`rl.marl_env.MaifsParallelEnv`, whole episodes per update (at least
   ``rollout_steps`` joint steps), GAE on the shared reward with the centralized critic's values, clipped
   PPO with each agent's own probability ratio and the team's advantage (Yu et al., "The Surprising
   Effectiveness of PPO in Cooperative Multi-Agent Games"), over the agents that had a choice, parameters
   shared by all agents. Kickstarting (Schmitt et al., 2018): the teacher's cross-entropy on the states the
   learner visits is added to the loss with a weight decaying from ``kick_coef`` to 0 over the first
   ``kick_frac`` of the budget, so the learner leaves the teacher gradually instead of drifting from it.

Reproducible and resumable as :mod:`rl.ppo`: the budget is in joint environment steps; every update resets
its envs with seeds from (seed, update, env); ``OUT/last.pt`` (every ``checkpoint_every`` updates) holds the
network, the optimizer and the RNG state, so a killed run resumed with the same arguments ends with the same
weights; ``torch.use_deterministic_algorithms`` and one thread. ``OUT/log.csv`` has one row per update:
returns, the mean objective, losses, and the coordination graph's counts of that update's episodes (claims,
conflicts, each outcome, recruited agents, interacting groups). A progress bar shows the steps.

    jctlab train --policy maifs --steps 30000 --seed 0 --out runs/maifs
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from jctlab.errors import InputError

from . import ppo
from .coordination import OUTCOMES
from .maifs_policy import CHECKPOINT_FORMAT
from .maifs_teacher import greedy_actions
from .maifs_workloads import DEV_SEED, FAMILIES, TRAIN_FAMILIES, family, training_source
from .marl_env import MaifsParallelEnv
from .marl_nets import MaifsNet, batch_obs, entropy, joint_log_prob
from .marl_observe import MarlConfig
from .ppo import CsvLog, gae, load_checkpoint, normalized, optimize, resume_from, seed_everything

COORD_FIELDS = ("claims", "conflicts") + OUTCOMES + ("recruited", "groups")


@dataclass
class Args(ppo.Args):
    """:class:`rl.ppo.Args` (the PPO hyper-parameters, the checkpoint and resume settings) with the MAIFS-like
    defaults: ``suite`` names :mod:`rl.maifs_workloads` families (training seeds < 9,000); ``problem`` is
    offline; ``steps`` counts joint steps (one per decision of all agents)."""

    policy: str = "maifs"
    suite: str = TRAIN_FAMILIES
    steps: int = 100_000
    out: str = "runs/maifs"
    lr: float = 2e-4
    ent_coef: float = 0.005
    bc_episodes: int = 400              # teacher episodes for behaviour cloning
    bc_epochs: int = 20
    bc_lr: float = 1e-3
    kick_coef: float = 1.0              # weight of the teacher's cross-entropy during MAPPO (kickstarting) ...
    kick_frac: float = 0.5              # ... decaying linearly to 0 over this fraction of the budget


def env_config(a: Args) -> MarlConfig:
    return MarlConfig(**a.env)


def save(path: Path, net: MaifsNet, opt, a: Args, update: int, global_step: int, extra: dict | None = None) -> None:
    """Atomic save of everything a resumed run (or the policy) needs."""
    state = {"format": CHECKPOINT_FORMAT, "policy": "maifs", "args": dataclasses.asdict(a),
             "env": dataclasses.asdict(net.cfg), "hidden": net.d, "model": net.state_dict(),
             "optimizer": None if opt is None else opt.state_dict(), "update": update, "global_step": global_step,
             "torch_rng": torch.get_rng_state(), **(extra or {})}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


# ---------------------------------------------------------------------------- rollouts


@dataclass
class Rollout:
    """Whole episodes, concatenated: per joint step the stacked observations of its agents."""

    obs: list[dict[str, np.ndarray]]
    actions: list[np.ndarray]
    teacher: list[np.ndarray]           # the greedy rule's action of every agent in the same state
    logprobs: list[np.ndarray]
    values: torch.Tensor
    rewards: torch.Tensor
    dones: torch.Tensor
    returns: list[float]
    objectives: list[float]
    coordination: dict[str, int]


def _stack(obs: dict[str, dict[str, np.ndarray]], agents: list[str]) -> dict[str, np.ndarray]:
    return {k: np.stack([obs[a][k] for a in agents]) for k in obs[agents[0]]}


def collect(net: MaifsNet, envs: list[MaifsParallelEnv], min_steps: int, seeds: list[int]) -> Rollout:
    """Run every env for whole episodes until ``min_steps`` joint steps are collected (all envs together)."""
    per_env: list[list[tuple]] = [[] for _ in envs]
    cur = [_stack(e.reset(seed=s)[0], e.agents) for e, s in zip(envs, seeds)]
    rets, objs, coord = [], [], {k: 0 for k in COORD_FIELDS}
    ep_ret = [0.0] * len(envs)
    episode = [0] * len(envs)
    active = list(range(len(envs)))
    total = 0
    while active:
        o = batch_obs([cur[i] for i in active])
        with torch.no_grad():
            logits, v = net(o)
            g = -torch.log(-torch.log(torch.rand(logits.shape).clamp(1e-12, 1 - 1e-12)))
            act = (logits + g).argmax(-1)                               # a sample of every agent's policy
            lp = joint_log_prob(logits, act, o["agent_mask"])
        nxt = []
        for k, i in enumerate(active):
            env = envs[i]
            names = list(env.agents)
            A = len(names)
            a_np = act[k, :A].numpy()
            teach = greedy_actions(env.decision)
            obs, rew, term, trunc, infos = env.step({n: int(x) for n, x in zip(names, a_np)})
            r = rew[names[0]]
            done = term[names[0]] or trunc[names[0]]
            per_env[i].append((cur[i], a_np, lp[k, :A].numpy(), float(v[k]), r, done, teach))
            ep_ret[i] += r
            total += 1
            if done:
                rets.append(ep_ret[i])
                objs.append(infos[names[0]].get("objective", float("nan")))
                for key in COORD_FIELDS:
                    coord[key] += env.coordination_totals.get(key, 0)
                ep_ret[i] = 0.0
                episode[i] += 1
                if total >= min_steps:
                    continue
                obs, _ = env.reset(seed=seeds[i] + 7919 * episode[i])
            cur[i] = _stack(obs, env.agents)
            nxt.append(i)
        active = nxt
    flat = [t for steps in per_env for t in steps]
    return Rollout([t[0] for t in flat], [t[1] for t in flat], [t[6] for t in flat], [t[2] for t in flat],
                   torch.tensor([t[3] for t in flat]), torch.tensor([t[4] for t in flat], dtype=torch.float32),
                   torch.tensor([float(t[5]) for t in flat]), rets, objs, coord)


def _pad(rows: list[np.ndarray], A: int) -> torch.Tensor:
    out = np.zeros((len(rows), A), rows[0].dtype)
    for b, r in enumerate(rows):
        out[b, : len(r)] = r
    return torch.as_tensor(out)


def _chosen(o: dict[str, torch.Tensor]) -> torch.Tensor:
    """Agents that had a choice (two or more valid actions): those the policy loss is taken over."""
    return ((o["action_mask"].sum(-1) >= 2) & (o["agent_mask"] > 0)).float()


def kick_weight(a: Args, global_step: int) -> float:
    """The teacher term's weight: ``kick_coef`` at the start, 0 after ``kick_frac`` of the budget."""
    if a.kick_frac <= 0:
        return 0.0
    return a.kick_coef * max(0.0, 1.0 - global_step / (a.kick_frac * max(1, a.steps)))


def mappo_update(net: MaifsNet, opt, ro: Rollout, adv: torch.Tensor, ret: torch.Tensor, a: Args,
                 global_step: int = 0) -> dict[str, float]:
    """Clipped PPO epochs: each agent's ratio, the team's advantage, the critic on the team's return, and
    (kickstarting) the teacher's cross-entropy with a weight decaying to 0."""
    A = max(x["node"].shape[0] for x in ro.obs)
    acts, old = _pad(ro.actions, A).long(), _pad(ro.logprobs, A).float()
    teach = _pad(ro.teacher, A).long()
    kick = kick_weight(a, global_step)
    stats: dict[str, list[float]] = {"pg": [], "v": [], "ent": [], "kl": [], "kick": []}
    n = len(ro.obs)
    mb = max(1, n // a.minibatches)
    for _ in range(a.epochs):
        perm = torch.randperm(n)
        for s in range(0, n, mb):
            idx = perm[s: s + mb]
            o = batch_obs([ro.obs[int(i)] for i in idx], A)
            logits, v = net(o)
            w = _chosen(o)
            lp = joint_log_prob(logits, acts[idx], o["agent_mask"])
            logratio = (lp - old[idx]) * w
            ad = normalized(adv[idx])[:, None].expand_as(lp)
            ratio = logratio.exp()
            pg_each = torch.max(-ad * ratio, -ad * ratio.clamp(1 - a.clip, 1 + a.clip))
            pg = (pg_each * w).sum() / w.sum().clamp(min=1.0)
            vloss = 0.5 * (v - ret[idx]).pow(2).mean()
            ent = (entropy(logits, o["agent_mask"]) * w).sum() / w.sum().clamp(min=1.0)
            ce = -(joint_log_prob(logits, teach[idx], o["agent_mask"]) * w).sum() / w.sum().clamp(min=1.0)
            optimize(net, opt, pg + a.vf_coef * vloss - a.ent_coef * ent + kick * ce, a)
            stats["kick"].append(ce.item())
            stats["pg"].append(pg.item())
            stats["v"].append(vloss.item())
            stats["ent"].append(ent.item())
            stats["kl"].append(float(((old[idx] - lp.detach()) * w).sum() / w.sum().clamp(min=1.0)))
    return {k: float(np.mean(v)) for k, v in stats.items()}


# ---------------------------------------------------------------------------- behaviour cloning


def teacher_episodes(a: Args, cfg: MarlConfig, progress: bool = True):
    """(observations, teacher actions, returns-to-go) of ``bc_episodes`` teacher episodes on training seeds."""
    env = MaifsParallelEnv(training_source(a.suite), cfg, reward_scale=a.reward_scale)
    obs_l, act_l, rtg_l = [], [], []
    for k in tqdm(range(a.bc_episodes), desc="teacher episodes", disable=not progress, leave=False):
        seed = int(np.random.default_rng([a.seed, 4747, k]).integers(DEV_SEED))
        obs, _ = env.reset(seed=seed)
        rews = []
        while env.agents:
            names = list(env.agents)
            act = greedy_actions(env.decision)
            obs_l.append(_stack(obs, names))
            act_l.append(act)
            obs, rew, *_ = env.step({n: int(x) for n, x in zip(names, act)})
            rews.append(rew[names[0]])
        rtg_l += list(np.cumsum(rews[::-1])[::-1])
    return obs_l, act_l, np.array(rtg_l, np.float32)


def clone(a: Args, cfg: MarlConfig, out: Path, progress: bool = True) -> Path:
    """Behaviour-clone the teacher; returns ``out/bc.pt`` (its accuracy over the agents with a choice kept)."""
    seed_everything(a.seed, a.threads)
    obs, acts, rtg = teacher_episodes(a, cfg, progress)
    net = MaifsNet(cfg, a.hidden)
    opt = torch.optim.Adam(net.parameters(), lr=a.bc_lr)
    A = max(x["node"].shape[0] for x in obs)
    y, g = _pad(acts, A).long(), torch.as_tensor(rtg)
    n = len(obs)
    for _ in tqdm(range(a.bc_epochs), desc=f"behaviour cloning ({n} joint steps)", disable=not progress, leave=False):
        perm = torch.randperm(n)
        for s in range(0, n, 64):
            idx = perm[s: s + 64]
            o = batch_obs([obs[int(i)] for i in idx], A)
            logits, v = net(o)
            w = _chosen(o)
            ce = -(joint_log_prob(logits, y[idx], o["agent_mask"]) * w).sum() / w.sum().clamp(min=1.0)
            loss = ce + a.vf_coef * (v - g[idx]).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    hit = tot = 0.0
    with torch.no_grad():
        for s in range(0, n, 256):
            o = batch_obs(obs[s: s + 256], A)
            w = _chosen(o)
            hit += float(((net.actor(o).argmax(-1) == y[s: s + 256]).float() * w).sum())
            tot += float(w.sum())
    path = out / "bc.pt"
    save(path, net, None, a, 0, 0, {"bc_accuracy": hit / max(tot, 1.0), "bc_steps": n})
    return path


# ---------------------------------------------------------------------------- the loop


def train(a: Args, source=None, progress: bool = True) -> Path:
    """Behaviour cloning (unless ``bc_epochs`` is 0 or ``OUT/bc.pt`` exists), then MAPPO; returns
    ``OUT/final.pt``."""
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = env_config(a)
    init = out / "bc.pt"
    if a.bc_epochs > 0 and not init.exists():
        clone(a, cfg, out, progress)
    seed_everything(a.seed, a.threads)
    net = MaifsNet(cfg, a.hidden)
    opt = torch.optim.Adam(net.parameters(), lr=a.lr, eps=1e-5)
    update, global_step = 0, 0
    ckpt = out / "last.pt"
    if a.resume and ckpt.exists():
        update, global_step = resume_from(ckpt, net, opt)
    elif init.exists():
        net.load_state_dict(load_checkpoint(init)["model"])
    source = source or training_source(a.suite)
    envs = [MaifsParallelEnv(source, cfg, reward_scale=a.reward_scale) for _ in range(a.num_envs)]
    fields = ["update", "global_step", "episodes", "mean_return", "mean_objective", "pg", "v", "ent", "kl", "kick",
              *COORD_FIELDS, "wall_s"]
    log = CsvLog(out / "log.csv", fields, append=update > 0)
    t0 = time.perf_counter()
    bar = tqdm(total=a.steps, initial=global_step, unit="step", desc=f"maifs seed {a.seed}", leave=False,
               disable=not progress)
    while global_step < a.steps:
        seeds = [int(np.random.default_rng([a.seed, update, i]).integers(2**31)) for i in range(a.num_envs)]
        ro = collect(net, envs, min(a.rollout_steps, a.steps - global_step), seeds)
        adv, ret = gae(ro.rewards, ro.values, ro.dones, a.gamma, a.gae_lambda)
        stats = mappo_update(net, opt, ro, adv, ret, a, global_step)
        update += 1
        global_step += len(ro.obs)
        bar.update(len(ro.obs))
        log.row(update=update, global_step=global_step, episodes=len(ro.returns),
                mean_return=float(np.mean(ro.returns)), mean_objective=float(np.nanmean(ro.objectives)),
                wall_s=round(time.perf_counter() - t0, 1), **stats, **ro.coordination)
        if update % a.checkpoint_every == 0 or global_step >= a.steps:
            save(ckpt, net, opt, a, update, global_step)
    bar.close()
    final = out / "final.pt"
    save(final, net, None, a, update, global_step)
    return final


def run(ns) -> int:
    """``jctlab train --policy maifs``: the shared flags of :mod:`rl.train` mapped onto :class:`Args`."""
    if ns.generator:
        raise InputError("command line", "--generator", "the maifs policy trains on --suite families of "
                         f"rl.maifs_workloads ({', '.join(FAMILIES)})")
    if ns.problem != "offline":
        raise InputError("command line", "--problem", "the maifs policy trains on the offline class")
    families = ns.suite or TRAIN_FAMILIES
    for name in families.split(","):
        family(name.strip())                       # an unknown family is a clear error before any work
    a = Args(suite=families, steps=ns.steps, seed=ns.seed, out=str(ns.out), threads=ns.threads,
             num_envs=ns.num_envs, rollout_steps=ns.rollout_steps, bc_epochs=ns.bc_epochs)
    final = train(a)
    print(json.dumps({"policy": "maifs", "checkpoint": str(final), "steps": a.steps, "seed": a.seed}))
    return 0
