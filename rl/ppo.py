"""PPO with action masking, in the style of CleanRL's ``ppo.py``: the flat learned baseline.

One file, one loop: collect episodes from a vector of :class:`rl.envs.SchedulingEnv`, compute GAE
advantages, run clipped-PPO epochs over minibatches, log a CSV row, checkpoint. Masked actions get a
logit of −1e9 (Decima's convention), so the policy never samples one.

Reproducible by construction: the budget is in environment steps; every update collects whole
episodes from envs reset with seeds derived from (seed, update, env index), so the state between two
updates is the network, the optimizer and the RNG states, all in the checkpoint. A run killed and
resumed (``resume=True``, same ``out``) ends with the same weights as one that never stopped, and the
same seed on the same machine gives the same checkpoint (``torch.use_deterministic_algorithms``, one
thread by default).

    python -m rl.ppo --steps 20000 --seed 0 --out runs/ppo      # or: jctlab train --policy ppo ...
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from tqdm import tqdm

from .envs import SchedulingEnv
from .nets import NETS, window_cut
from .observe import EnvConfig
from .suites import training_source


@dataclass
class Args:
    policy: str = "ppo"                 # network: ppo (flat) | hrl (hierarchical, see rl.hrl)
    suite: str = "small,queue"          # training families (rl.suites), seeds < 10,000
    problem: str = "offline"            # offline | preemptive
    steps: int = 20_000                 # budget in environment steps
    seed: int = 0
    out: str = "runs/ppo"
    num_envs: int = 4
    rollout_steps: int = 256            # per update, at least (whole episodes)
    lr: float = 1e-4                    # fine-tuning from behaviour cloning
    gamma: float = 1.0                  # undiscounted: the return is -total JCT
    gae_lambda: float = 0.95
    epochs: int = 4
    minibatches: int = 4
    clip: float = 0.2
    ent_coef: float = 0.001
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    reward_scale: float = 3600.0        # reward in job-hours
    hidden: int = 64
    threads: int = 1
    init: str | None = None             # checkpoint to start from (e.g. behaviour cloning)
    checkpoint_every: int = 5           # updates
    resume: bool = True
    env: dict[str, Any] = field(default_factory=dict)   # EnvConfig overrides


def seed_everything(seed: int, threads: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)


def to_torch(obs: list[dict[str, np.ndarray]]) -> dict[str, torch.Tensor]:
    """Stack per-env observations into a batch."""
    return {k: torch.as_tensor(np.stack([o[k] for o in obs])) for k in obs[0]}


def cat_obs(batch: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    return {k: torch.cat([b[k] for b in batch]) for k in batch[0]}


def index_obs(o: dict[str, torch.Tensor], idx) -> dict[str, torch.Tensor]:
    return {k: v[idx] for k, v in o.items()}


@dataclass
class Rollout:
    """Whole episodes, concatenated (flat over steps)."""

    obs: dict[str, torch.Tensor]
    actions: torch.Tensor
    logprobs: torch.Tensor
    values: torch.Tensor
    rewards: torch.Tensor
    dones: torch.Tensor           # 1 at an episode's last step
    episode_returns: list[float]
    episode_objectives: list[float]


def collect(net, envs: list[SchedulingEnv], min_steps: int, seeds: list[int]) -> Rollout:
    """Run every env for whole episodes until ``min_steps`` steps are collected (all envs together)."""
    per_env: list[list[tuple]] = [[] for _ in envs]
    obs = [e.reset(seed=s)[0] for e, s in zip(envs, seeds)]
    rets, objs = [], []
    ep_ret = [0.0] * len(envs)
    active = list(range(len(envs)))
    total = 0
    episode = [0] * len(envs)
    while active:
        o = to_torch([obs[i] for i in active])
        with torch.no_grad():
            dist, v = net.dist(o)
            a = dist.sample()
            lp = dist.log_prob(a)
        nxt = []
        for k, i in enumerate(active):
            ob, r, done, trunc, info = envs[i].step(int(a[k]))
            per_env[i].append((index_obs(o, k), a[k], lp[k], v[k], r, done or trunc))
            ep_ret[i] += r
            total += 1
            if done or trunc:
                rets.append(ep_ret[i])
                objs.append(info.get("objective", float("nan")))
                ep_ret[i] = 0.0
                episode[i] += 1
                if total >= min_steps:
                    continue                       # this env is finished for this update
                ob, _ = envs[i].reset(seed=seeds[i] + 7919 * episode[i])
            obs[i] = ob
            nxt.append(i)
        active = nxt
    flat = [t for steps in per_env for t in steps]
    return Rollout(
        obs={k: torch.stack([t[0][k] for t in flat]) for k in flat[0][0]},
        actions=torch.stack([t[1] for t in flat]), logprobs=torch.stack([t[2] for t in flat]),
        values=torch.stack([t[3] for t in flat]),
        rewards=torch.tensor([t[4] for t in flat], dtype=torch.float32),
        dones=torch.tensor([float(t[5]) for t in flat]), episode_returns=rets, episode_objectives=objs)


def gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, gamma: float, lam: float):
    """Advantages and returns over concatenated whole episodes (no bootstrap past an episode's end)."""
    adv = torch.zeros_like(rewards)
    last = 0.0
    for t in reversed(range(len(rewards))):
        nonterminal = 1.0 - dones[t]
        next_v = values[t + 1] if t + 1 < len(rewards) else 0.0
        delta = rewards[t] + gamma * next_v * nonterminal - values[t]
        last = delta + gamma * lam * nonterminal * last
        adv[t] = last
    return adv, adv + values


def minibatches(n: int, a: Args):
    """Index tensors of the minibatches of every epoch (a fresh permutation per epoch)."""
    mb = max(1, n // a.minibatches)
    for _ in range(a.epochs):
        perm = torch.randperm(n)
        for s in range(0, n, mb):
            yield perm[s: s + mb]


def normalized(x: torch.Tensor) -> torch.Tensor:
    return (x - x.mean()) / (x.std() + 1e-8) if len(x) > 1 else x


def clipped(logratio: torch.Tensor, adv: torch.Tensor, clip: float) -> torch.Tensor:
    """PPO's clipped surrogate loss."""
    ratio = logratio.exp()
    return torch.max(-adv * ratio, -adv * ratio.clamp(1 - clip, 1 + clip)).mean()


def optimize(net, opt, loss: torch.Tensor, a: Args) -> None:
    opt.zero_grad()
    loss.backward()
    torch.nn.utils.clip_grad_norm_(net.parameters(), a.max_grad_norm)
    opt.step()


def ppo_update(net, opt, ro: Rollout, adv: torch.Tensor, ret: torch.Tensor, a: Args) -> dict[str, float]:
    """Clipped-PPO epochs over minibatches (advantages normalized per minibatch)."""
    stats: dict[str, list[float]] = {"pg": [], "v": [], "ent": [], "kl": []}
    for idx in minibatches(len(ro.actions), a):
        dist, v = net.dist(window_cut(index_obs(ro.obs, idx), net.cfg))
        new_lp = dist.log_prob(ro.actions[idx])
        old_lp = ro.logprobs[idx]
        pg = clipped(new_lp - old_lp, normalized(adv[idx]), a.clip)
        vloss = 0.5 * (v - ret[idx]).pow(2).mean()
        ent = dist.entropy().mean()
        optimize(net, opt, pg + a.vf_coef * vloss - a.ent_coef * ent, a)
        stats["pg"].append(pg.item())
        stats["v"].append(vloss.item())
        stats["ent"].append(ent.item())
        stats["kl"].append((old_lp - new_lp).mean().item())
    return {k: float(np.mean(v)) for k, v in stats.items()}


# ---------------------------------------------------------------------------- checkpoints


def save_checkpoint(path: Path, net, opt, a: Args, cfg: EnvConfig, update: int, global_step: int,
                    extra: dict | None = None) -> None:
    """Atomic save of everything a resumed run needs."""
    state = {"format": "jctlab.rl-checkpoint/1", "policy": a.policy, "args": dataclasses.asdict(a),
             "env": dataclasses.asdict(cfg), "hidden": a.hidden, "model": net.state_dict(),
             "optimizer": None if opt is None else opt.state_dict(), "update": update,
             "global_step": global_step, "torch_rng": torch.get_rng_state(), **(extra or {})}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: str | Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=False)


def resume_from(path: Path, net, opt) -> tuple[int, int]:
    """Load a run's ``last.pt`` into ``net`` and ``opt`` and restore torch's RNG state (so that a killed run
    resumed with the same arguments ends with the same weights); its update and step counts."""
    st = load_checkpoint(path)
    net.load_state_dict(st["model"])
    opt.load_state_dict(st["optimizer"])
    torch.set_rng_state(st["torch_rng"])
    return st["update"], st["global_step"]


def build_net(policy: str, cfg: EnvConfig, hidden: int):
    return NETS[policy](cfg, hidden)


def env_config(a: Args) -> EnvConfig:
    return EnvConfig(**a.env)


class CsvLog:
    def __init__(self, path: Path, fields: list[str], append: bool):
        self.path, self.fields = path, fields
        if not append or not path.exists():
            with open(path, "w", newline="") as f:
                csv.writer(f).writerow(fields)

    def row(self, **kw) -> None:
        with open(self.path, "a", newline="") as f:
            csv.writer(f).writerow([kw.get(k, "") for k in self.fields])


def train(a: Args, source=None, update_fn: Callable | None = None) -> Path:
    """Train and return the final checkpoint's path (``out/final.pt``); ``update_fn(net, opt, rollout,
    advantages, returns, args, global_step)`` replaces the PPO update (the hierarchical trainer's hook)."""
    seed_everything(a.seed, a.threads)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = env_config(a)
    net = build_net(a.policy, cfg, a.hidden)
    opt = torch.optim.Adam(net.parameters(), lr=a.lr, eps=1e-5)
    update, global_step = 0, 0
    ckpt = out / "last.pt"
    if a.resume and ckpt.exists():
        update, global_step = resume_from(ckpt, net, opt)
    elif a.init:
        net.load_state_dict(load_checkpoint(a.init)["model"])
    source = source or training_source(a.suite, a.problem)
    envs = [SchedulingEnv(source, cfg, reward_scale=a.reward_scale) for _ in range(a.num_envs)]
    log = CsvLog(out / "log.csv", ["update", "global_step", "episodes", "mean_return", "mean_objective", "pg", "v",
                                   "ent", "kl", "wall_s"], append=update > 0)
    t0 = time.perf_counter()
    bar = tqdm(total=a.steps, initial=global_step, unit="step", desc=f"{a.policy} seed {a.seed}", leave=False)
    with bar:        # closed (cleared) on an error too, before its message is printed
        while global_step < a.steps:
            seeds = [int(np.random.default_rng([a.seed, update, i]).integers(2**31)) for i in range(a.num_envs)]
            ro = collect(net, envs, min(a.rollout_steps, a.steps - global_step), seeds)
            adv, ret = gae(ro.rewards, ro.values, ro.dones, a.gamma, a.gae_lambda)
            stats = (update_fn or _ppo)(net, opt, ro, adv, ret, a, global_step)
            update += 1
            global_step += len(ro.actions)
            bar.update(len(ro.actions))
            log.row(update=update, global_step=global_step, episodes=len(ro.episode_returns),
                    mean_return=float(np.mean(ro.episode_returns)),
                    mean_objective=float(np.nanmean(ro.episode_objectives)),
                    wall_s=round(time.perf_counter() - t0, 1), **stats)
            if update % a.checkpoint_every == 0 or global_step >= a.steps:
                save_checkpoint(ckpt, net, opt, a, cfg, update, global_step)
    final = out / "final.pt"
    save_checkpoint(final, net, None, a, cfg, update, global_step)
    return final


def _ppo(net, opt, ro, adv, ret, a, global_step):
    return ppo_update(net, opt, ro, adv, ret, a)


def parse(argv=None, defaults: Args | None = None) -> Args:
    d = defaults or Args()
    p = argparse.ArgumentParser(description="PPO with action masking on jctlab's scheduling env")
    for f in dataclasses.fields(d):
        if f.name == "env":
            continue
        v = getattr(d, f.name)
        kind = type(v) if v is not None else str
        if kind is bool:
            p.add_argument(f"--{f.name.replace('_', '-')}", type=lambda s: s.lower() in ("1", "true", "yes"), default=v)
        else:
            p.add_argument(f"--{f.name.replace('_', '-')}", type=kind, default=v)
    return Args(**vars(p.parse_args(argv)))


if __name__ == "__main__":
    print(train(parse()))
