"""DAgger with a rollout expert: the states a policy visits, relabelled with the best of its likeliest actions.

Behaviour cloning sees only the states of the oracle's schedules; a cloned policy drifts off them and
its mistakes compound (Ross, Gordon & Bagnell, "A reduction of imitation learning ... to no-regret
online learning", 2011). DAgger asks an expert at the states the policy itself visits. The oracle cannot
be asked there (it solves whole instances from time 0, not a state with jobs already running), so the
expert here is a *one-step lookahead on the policy*: at a state it tries the policy's ``top_k`` most
probable actions and the no-op (where waiting is allowed), finishes the episode from each with the
policy (greedy), and labels the state with the action whose episode has the least total JCT (the
policy's own action on ties). The env is deterministic, so each action's value is exact for that
continuation and the lookahead is never worse than the policy (policy improvement: its choice includes
the policy's own action). It sees the whole training instance, future arrivals included, as the oracle
does: it is for training only, on training instances (seeds below 9,000).

One iteration: roll in greedily with the current network on ``episodes`` new training instances,
label every state, then behaviour-clone (:func:`rl.bc.clone`) on the oracle demonstrations plus every
state labelled so far (from the previous iteration's weights, ``epochs`` epochs). Episodes are stored as
JSON lines of (family, seed, actions taken, labels, returns-to-go): their states are replayed rather
than stored (the file is a few hundred kB for thousands of states), and a killed run resumes at the
next unfinished episode. The same arguments give the same file (greedy roll-ins and rollouts, seeded
training); ``workers`` processes share an iteration's episodes without changing any of them.

    python -m rl.dagger --policy hrl --iterations 3 --episodes 120 --workers 2 --out runs/dagger-hrl

The labelled episodes (``OUT/dagger.jsonl``) ship in ``rl/data/dagger/``; ``jctlab train`` clones on
them with the demonstrations (see :mod:`rl.train`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import multiprocessing as mp
import sys
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from jctlab import jsonl
from jctlab.errors import InputError
from jctlab.limits import loads
from jctlab.model import Instance

from . import bc
from .envs import SchedulingEnv
from .observe import EnvConfig
from .ppo import build_net, load_checkpoint, seed_everything, to_torch
from .suites import DEV_SEED, FAMILIES, family

FORMAT = "jctlab.rl-dagger/1"


@dataclasses.dataclass
class DaggerArgs:
    policy: str = "hrl"
    suite: str = "small,queue"       # training families, drawn in turn
    iterations: int = 3
    episodes: int = 120              # new training instances per iteration
    first_seed: int = 1000           # instance seeds first_seed + i (the demonstrations use 100-179)
    top_k: int = 4                   # the policy's likeliest actions the expert tries (plus the no-op)
    epochs: int = 10                 # behaviour-cloning epochs per iteration (from the previous weights)
    first_epochs: int = 30           # ... and for the first network (demonstrations only)
    seed: int = 0
    hidden: int = 64
    workers: int = 1
    threads: int = 1
    out: str = "runs/dagger"
    demos: str | None = None         # folder of demonstrations (default: the shipped ones)


@dataclasses.dataclass(frozen=True)
class Episode:
    """A labelled roll-in: the instance (family, seed), the actions taken and the expert's label and
    return-to-go (−remaining total JCT / reward scale under the expert's choice) at every state."""

    family: str
    seed: int
    actions: tuple[int, ...]
    labels: tuple[int, ...]
    returns: tuple[float, ...]

    def to_json(self) -> str:
        return json.dumps({"family": self.family, "seed": self.seed, "actions": list(self.actions),
                           "labels": list(self.labels), "returns": [round(x, 6) for x in self.returns]})

    @staticmethod
    def from_json(line: str) -> "Episode":
        return Episode.from_dict(json.loads(line))

    @staticmethod
    def from_dict(d: dict) -> "Episode":
        return Episode(d["family"], int(d["seed"]), tuple(d["actions"]), tuple(d["labels"]), tuple(d["returns"]))


def _greedy(net, env: SchedulingEnv) -> int:
    with torch.inference_mode():
        return net.act({k: torch.from_numpy(v)[None] for k, v in env.decision.trimmed().items()})


def _finish(net, env: SchedulingEnv, a: int) -> float:
    """Total JCT of the episode after action ``a``, the policy acting greedily from then on."""
    while True:
        _, _, done, _, _ = env.step(a)
        if done:
            return env.total_jct
        a = _greedy(net, env)


def _tried(net, env: SchedulingEnv, k: int, greedy: int) -> list[int]:
    """The greedy action, the next ``k - 1`` likeliest valid ones, and the no-op where allowed."""
    obs = env.decision.obs
    with torch.inference_mode():
        logits = net(to_torch([obs]))[0][0].numpy()
    valid = np.flatnonzero(obs["action_mask"])
    order = [int(a) for a in valid[np.argsort(-logits[valid], kind="stable")]]
    out = [greedy] + [a for a in order if a != greedy][: k - 1]
    if obs["action_mask"][0] and 0 not in out:
        out.append(0)
    return out


def roll_in(net, inst: Instance, cfg: EnvConfig, k: int, reward_scale: float) -> tuple[list[int], list[int], list[float]]:
    """One greedy episode of the network on a training instance: (actions taken, labels, returns-to-go),
    every state labelled by the lookahead."""
    env = SchedulingEnv(inst, cfg, reward_scale=reward_scale)
    env.reset(seed=0)
    actions, alternatives, so_far = [], [], []
    done = False
    while not done:
        a = _greedy(net, env)
        others = {b: _finish(net, env.fork(), b) for b in _tried(net, env, k, a)[1:]}
        actions.append(a)
        alternatives.append(others)
        so_far.append(env.total_jct)
        _, _, done, _, _ = env.step(a)
    final = env.total_jct              # the greedy action's value at every state of a greedy roll-in
    labels, returns = [], []
    for a, others, past in zip(actions, alternatives, so_far):
        best, cost = a, final
        for b, c in others.items():
            if c < cost * (1 - 1e-9):
                best, cost = b, c
        labels.append(best)
        returns.append(-(cost - past) / reward_scale)
    return actions, labels, returns


def instance_of(ep: Episode) -> Instance:
    assert ep.seed < DEV_SEED, "DAgger labels training instances only"
    return family(ep.family).make(ep.seed)


def episode_steps(ep: Episode, cfg: EnvConfig, reward_scale: float, inst: Instance | None = None) -> bc.Steps:
    """The labelled states of an episode, replayed (the actions must be valid: same code, same states)."""
    env = SchedulingEnv(inst or instance_of(ep), cfg, reward_scale=reward_scale)
    obs, _ = env.reset(seed=0)
    out = bc.Steps()
    for a, label, ret in zip(ep.actions, ep.labels, ep.returns):
        if not (obs["action_mask"][a] and obs["action_mask"][label]):
            raise ValueError(f"DAgger episode {ep.family}/{ep.seed}: action {a} or label {label} is not valid "
                             "when replayed (made by other code or another EnvConfig?)")
        out.add([obs], [label], [ret])
        obs, _, _, _, _ = env.step(a)
    return out


def load(path: str | Path, cfg: EnvConfig | None = None) -> list[Episode]:
    """The episodes of a DAgger file (its first line is the header: format, arguments, the EnvConfig the
    action indices belong to, which must be ``cfg`` when given). A file that is not one, or an episode of
    a seed outside the training range or with malformed fields, is an InputError naming the file and
    line; whether its family exists and its actions replay is checked by :func:`all_steps`."""
    src = str(path)
    try:
        lines = Path(path).read_text().splitlines()
    except FileNotFoundError:
        raise InputError(src, "", "file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(src, "", f"cannot read: {e.__class__.__name__}") from None
    head = loads(lines[0], src) if lines else {}
    if not isinstance(head, dict) or head.get("format") != FORMAT:
        raise InputError(src, "format", f"not a {FORMAT} file")
    if cfg is not None and head.get("env") != dataclasses.asdict(cfg):
        raise InputError(src, "env", "its action indices belong to another EnvConfig than the network's")
    episodes = []
    for i, line in enumerate(lines[1:], 2):
        if not line.strip():
            continue
        d = loads(line, f"{src} line {i}")
        try:
            ep = Episode(str(d["family"]), int(d["seed"]), tuple(int(x) for x in d["actions"]),
                         tuple(int(x) for x in d["labels"]), tuple(float(x) for x in d["returns"]))
        except (KeyError, TypeError, ValueError, OverflowError):
            raise InputError(src, f"line {i}", "expected an episode: family, seed, actions, labels, returns") from None
        if not 0 <= ep.seed < DEV_SEED:
            raise InputError(src, f"line {i}", f"DAgger labels training instances (seeds below {DEV_SEED:,}), "
                             f"not seed {ep.seed}")
        episodes.append(ep)
    return episodes


def all_steps(episodes: list[Episode], cfg: EnvConfig, reward_scale: float, source: str = "DAgger file") -> bc.Steps:
    """The labelled states of every episode, replayed; an episode whose actions do not replay (made by
    other code or for another EnvConfig) is an InputError naming ``source``."""
    out = bc.Steps()
    for ep in episodes:
        if ep.family not in FAMILIES:
            raise InputError(source, f"{ep.family}/{ep.seed}", f"unknown family (known: {', '.join(FAMILIES)})")
        try:
            s = episode_steps(ep, cfg, reward_scale)
        except (ValueError, IndexError) as e:
            raise InputError(source, f"{ep.family}/{ep.seed}", f"does not replay ({e.__class__.__name__})") from None
        out.add(s.obs, s.labels, s.returns)
    return out


def _work(job) -> str:
    ckpt, fam, seed, k, reward_scale, threads = job
    torch.set_num_threads(threads)
    st = load_checkpoint(ckpt)
    cfg = EnvConfig(**st["env"])
    net = build_net(st["policy"], cfg, st["hidden"])
    net.load_state_dict(st["model"])
    net.eval()
    ep = Episode(fam, seed, (), (), ())
    acts, labels, returns = roll_in(net, instance_of(ep), cfg, k, reward_scale)
    return Episode(fam, seed, tuple(acts), tuple(labels), tuple(returns)).to_json()


def run(a: DaggerArgs, progress: bool = True) -> Path:
    """All iterations; returns the DAgger file (``OUT/dagger.jsonl``). Resumes after a kill."""
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    names = [n.strip() for n in a.suite.split(",") if n.strip()]
    bargs = bc.BCArgs(suite=a.suite, epochs=a.first_epochs)
    demos = bc.demonstrations(bargs, Path(a.demos) if a.demos else bc.DATA, progress=progress)
    cfg = EnvConfig()
    ckpt = out / "iter0.pt"
    if not ckpt.exists():
        bc.clone(a.policy, demos, bargs, cfg, a.hidden, a.seed, out, a.threads, progress, name="iter0.pt")
    path = out / "dagger.jsonl"
    header = json.dumps({"format": FORMAT, "args": {k: v for k, v in dataclasses.asdict(a).items()
                                                    if k not in ("workers", "threads", "out")},
                         "env": dataclasses.asdict(cfg)})
    done: dict[tuple[str, int], Episode] = {}
    for d in jsonl.read_all(path, repair=True)[1:]:     # an episode cut short by a kill is rolled in again
        ep = Episode.from_dict(d)
        done[(ep.family, ep.seed)] = ep
    for it in range(1, a.iterations + 1):
        nxt = out / f"iter{it}.pt"
        if nxt.exists():
            ckpt = nxt
            continue
        jobs = []
        for e in range(a.episodes):
            i = (it - 1) * a.episodes + e
            key = (names[i % len(names)], a.first_seed + i)
            if key not in done:
                jobs.append((str(ckpt), key[0], key[1], a.top_k, bargs.reward_scale, a.threads))
        with jsonl.Writer(path) as f:
            if f.empty:
                f.write_json(header)
            bar = tqdm(total=len(jobs), desc=f"DAgger iteration {it}: roll-ins", disable=not progress, leave=False)
            pool = mp.get_context("spawn").Pool(a.workers) if a.workers > 1 and jobs else None
            try:
                for line in (pool.imap_unordered(_work, jobs) if pool else map(_work, jobs)):
                    ep = Episode.from_json(line)
                    done[(ep.family, ep.seed)] = ep
                    f.write_json(line)
                    bar.update()
            finally:
                if pool:
                    pool.close()
            bar.close()
        # every episode so far, in a fixed order (the file's order depends on the workers)
        eps = sorted(done.values(), key=lambda ep: (ep.seed, ep.family))
        extra = all_steps(eps, cfg, bargs.reward_scale)
        seed_everything(a.seed + it, a.threads)
        bc.clone(a.policy, demos, dataclasses.replace(bargs, epochs=a.epochs), cfg, a.hidden, a.seed + it, out,
                 a.threads, progress, extra=extra, init=ckpt, name=f"iter{it}.pt")
        ckpt = nxt
    return path


def parse(argv=None) -> DaggerArgs:
    d = DaggerArgs()
    p = argparse.ArgumentParser(prog="python -m rl.dagger", description=__doc__.splitlines()[0])
    for f in dataclasses.fields(d):
        v = getattr(d, f.name)
        p.add_argument(f"--{f.name.replace('_', '-')}", type=type(v) if v is not None else str, default=v)
    return DaggerArgs(**vars(p.parse_args(argv)))


if __name__ == "__main__":
    print(run(parse()))
    sys.exit(0)
