"""Behaviour cloning from the oracles: optimal schedules of small training instances as demonstrations.

1. :func:`demonstrations`: solve training instances (seeds < 10,000) with the oracle (``oracle.solve``,
   ``auto``, one thread, seed 0, ``time_limit`` s) and keep its schedules (all of them by default; the
   ones within ``max_gap`` of their bound otherwise: the oracle's incumbent is near-optimal even where
   the limit leaves its bound weak, and the status of each is kept); each is written to ``out/demos/<instance>.json`` as it is solved, so a killed
   run resumes without solving again.
2. :func:`expert_steps`: walk the env along a demonstration. At each decision point the expert's label
   is the start the schedule makes now (its job's oracle start ≤ now, earliest first) mapped onto the
   candidate list: the candidate with the same GPUs, else the same count and types, else the same
   count, else any; among those, the most GPUs and nodes in common, then the shortest run time; the no-op when the schedule starts nothing more now.
   :func:`coverage` replays the resulting episode: how close the candidate lists let an imitator come to
   the optimum (reported in docs/rl.md).
3. :func:`clone`: cross-entropy on the labels (the flat or hierarchical network's joint log-probability)
   plus a value regression on the demonstration's returns, minibatches of whole steps, fixed seeds.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from jctlab.errors import InputError
from jctlab.model import Instance, load_schedule, save_schedule, Schedule
from jctlab.replay import check_references, replay

from .envs import SchedulingEnv
from .observe import Decision, EnvConfig
from .nets import window_cut
from .ppo import Args, build_net, load_checkpoint, save_checkpoint, seed_everything
from .suites import EVAL_SEED, family


DATA = Path(__file__).parent / "data"       # the shipped demonstrations are DATA / "demos"


@dataclasses.dataclass
class BCArgs:
    suite: str = "small,queue"
    instances: int = 80           # training instances solved for demonstrations (the shipped: seeds 100-179)
    first_seed: int = 100
    time_limit: float = 10.0      # oracle seconds per instance
    max_gap: float = math.inf     # keep schedules within this gap to their bound (inf: every incumbent)
    epochs: int = 30
    batch: int = 128
    lr: float = 1e-3
    value_coef: float = 0.5
    reward_scale: float = 3600.0


def demonstrations(a: BCArgs, out: Path, progress: bool = True) -> list[tuple[Instance, Schedule]]:
    import oracle   # the oracles are only needed to make demonstrations, not to run a policy

    names = [n.strip() for n in a.suite.split(",") if n.strip()]
    folder = out / "demos"
    folder.mkdir(parents=True, exist_ok=True)
    demos = []
    # a with-block: the bar is cleared before an error (a bad demonstration file) is printed
    with tqdm(range(a.instances), desc="oracle demonstrations", disable=not progress, leave=False) as bar:
        for i in bar:
            seed = a.first_seed + i
            assert seed < EVAL_SEED, "demonstrations come from training seeds"
            inst = family(names[i % len(names)]).make(seed)
            path = folder / f"{inst.name}.json"
            skip = folder / f"{inst.name}.skip"
            if skip.exists():
                continue
            if path.exists():
                sched = load_schedule(path)
                check_references(inst, sched, str(path))
                rep = replay(inst, sched)
                if not rep.valid:
                    raise InputError(str(path), "", f"not a valid schedule of {inst.name}: {rep.error}")
                demos.append((inst, sched))
                continue
            r = oracle.solve(inst, "auto", time_limit=a.time_limit, threads=1, seed=0)
            gap = (r.objective - r.lower_bound) / r.objective if r.schedule is not None and r.lower_bound else math.inf
            ok = r.schedule is not None and (gap <= a.max_gap or math.isinf(a.max_gap))
            if not ok:
                skip.write_text(f"{r.status} {r.objective} {r.lower_bound}\n")
                continue
            sched = r.claimed_schedule()
            save_schedule(sched, path)
            demos.append((inst, sched))
    return demos


def _label(d: Decision, plan: dict[int, tuple[float, tuple[str, ...]]], now: float) -> int:
    """The expert's action at this decision point (see the module docstring)."""
    cl = d.sim.inst.cluster
    pending = sorted((plan[j][0], j) for j in d.window if j in plan and plan[j][0] <= now + 1e-6 * max(1.0, now))
    for _, j in pending:
        w = d.window.index(j)
        gpus = plan[j][1]
        types = sorted(cl.gpu[g].type for g in gpus)
        best = None
        for s, row in enumerate(d.cands[w]):
            for p, c in enumerate(row):
                if c is None:
                    continue
                ctypes = sorted(cl.gpu[g].type for g in c.alloc.gpus)
                tier = 0 if c.alloc.gpus == gpus else 1 if ctypes == types else 2 if len(ctypes) == len(types) else 3
                overlap = len(set(c.alloc.gpus) & set(gpus))
                nodes = len({g.split(":")[0] for g in c.alloc.gpus} & {g.split(":")[0] for g in gpus})
                key = (tier, -overlap, -nodes, c.iter_time)
                if best is None or key < best[0]:
                    best = (key, s, p)
        if best is not None:
            return d.index_of(j, best[1], best[2])
    if d.obs["action_mask"][0]:
        return 0
    return int(np.flatnonzero(d.obs["action_mask"])[0])


def expert_steps(inst: Instance, sched: Schedule, cfg: EnvConfig, reward_scale: float):
    """(observations, labels, returns-to-go, env) of one episode along the demonstration."""
    plan = {inst.index[s.job]: (s.start, s.alloc.gpus) for s in sched.segments}
    env = SchedulingEnv(inst, cfg, reward_scale=reward_scale)
    obs, _ = env.reset(seed=0)
    obs_l, lab, rew = [], [], []
    done = False
    while not done:
        a = _label(env.decision, plan, env.sim.now)
        obs_l.append(obs)
        lab.append(a)
        obs, r, done, _, _ = env.step(a)
        rew.append(r)
    rtg = np.cumsum(rew[::-1])[::-1].astype(np.float32)
    return obs_l, lab, rtg, env


def coverage(demos, cfg: EnvConfig) -> list[float]:
    """Per demonstration: objective of the expert-following episode / the oracle's objective − 1."""
    out = []
    for inst, sched in demos:
        _, _, _, env = expert_steps(inst, sched, cfg, 1.0)
        out.append(replay(inst, env.schedule).objective / sched.claimed.objective - 1.0)
    return out


@dataclasses.dataclass
class Steps:
    """Labelled states for behaviour cloning: observations, the expert's actions, returns-to-go."""

    obs: list[dict[str, np.ndarray]] = dataclasses.field(default_factory=list)
    labels: list[int] = dataclasses.field(default_factory=list)
    returns: list[float] = dataclasses.field(default_factory=list)

    def add(self, obs, labels, returns) -> None:
        self.obs += list(obs)
        self.labels += [int(x) for x in labels]
        self.returns += [float(x) for x in returns]

    def __len__(self) -> int:
        return len(self.labels)


def demo_steps(demos, cfg: EnvConfig, reward_scale: float) -> Steps:
    """The labelled states of the oracle demonstrations (:func:`expert_steps`)."""
    out = Steps()
    for inst, sched in demos:
        o, l, g, _ = expert_steps(inst, sched, cfg, reward_scale)
        out.add(o, l, g)
    return out


def clone(policy: str, demos, a: BCArgs, cfg: EnvConfig, hidden: int, seed: int, out: Path, threads: int = 1,
          progress: bool = True, extra: Steps | None = None, init: Path | None = None,
          name: str = "bc.pt") -> Path:
    """Behaviour-clone ``policy``'s network on the demonstrations (and the ``extra`` labelled states,
    :mod:`rl.dagger`'s), from ``init``'s weights when given; returns ``out/name``."""
    seed_everything(seed, threads)
    steps = demo_steps(demos, cfg, a.reward_scale)
    if extra is not None:
        steps.add(extra.obs, extra.labels, extra.returns)
    batch = {k: torch.as_tensor(np.stack([o[k] for o in steps.obs])) for k in steps.obs[0]}
    y = torch.as_tensor(steps.labels)
    g = torch.as_tensor(np.array(steps.returns, dtype=np.float32))
    net = build_net(policy, cfg, hidden)
    if init is not None:
        net.load_state_dict(load_checkpoint(init)["model"])
    opt = torch.optim.Adam(net.parameters(), lr=a.lr)
    n = len(y)
    for _ in tqdm(range(a.epochs), desc=f"behaviour cloning ({n} steps)", disable=not progress, leave=False):
        perm = torch.randperm(n)
        for s in range(0, n, a.batch):
            idx = perm[s: s + a.batch]
            o = window_cut({k: v[idx] for k, v in batch.items()}, cfg)
            dist, v = net.dist(o)
            loss = -dist.log_prob(y[idx]).mean() + a.value_coef * (v - g[idx]).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    with torch.no_grad():
        acc = float(sum((net.dist({k: v[i:i + 512] for k, v in batch.items()})[0].mode() == y[i:i + 512]).sum()
                        for i in range(0, n, 512)) / n)
    path = out / name
    args = Args(policy=policy, seed=seed, hidden=hidden, reward_scale=a.reward_scale, out=str(out),
                env={f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)})
    save_checkpoint(path, net, None, args, cfg, 0, 0, {"bc": dataclasses.asdict(a), "bc_accuracy": acc,
                                                        "bc_steps": n, "bc_demos": len(demos),
                                                        "bc_extra_steps": 0 if extra is None else len(extra)})
    return path


def accuracy(path: Path) -> float:
    return float(torch.load(path, weights_only=False).get("bc_accuracy", math.nan))
