"""``jctlab train``: behaviour cloning from the oracles, then PPO (flat) or the hierarchical trainer.

    jctlab train --policy hrl --suite small,queue --steps 30000 --seed 0 --out runs/hrl
    jctlab train --policy ppo --generator gpus=8/16,jobs=10,interarrival_s=300 --steps 20000 --out runs/ppo

Steps (each resumes after a kill; the same arguments continue where the run stopped):
1. demonstrations: the oracle schedules shipped in ``rl/data/demos`` (``--demos`` another folder; a
   folder without them gets solved: ``--bc-instances`` training instances, ``--bc-time-limit`` s each),
   and the DAgger-labelled episodes shipped in ``rl/data/dagger`` (:mod:`rl.dagger`; ``--dagger``);
2. behaviour cloning on both -> ``OUT/bc.pt`` (``--bc-epochs 0`` skips it);
3. PPO from ``bc.pt`` for ``--steps`` environment steps -> ``OUT/last.pt`` (every few updates),
   ``OUT/final.pt``, ``OUT/log.csv``.
The budget is in environment steps, never wall-clock; same seed, same machine: same checkpoint.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from jctlab.errors import InputError

from . import bc, dagger
from .envs import generator_source
from .hrl import train_hrl
from .ppo import Args, env_config, train

DAGGER = bc.DATA / "dagger" / "episodes.jsonl"

def _generator(spec: str):
    """``key=value,key=v1/v2`` -> a generator source (``/`` separates values drawn per instance)."""
    kw = {}
    for item in spec.split(","):
        if not item.strip():
            continue
        key, eq, val = item.partition("=")
        if not eq:
            raise InputError("command line", "--generator", f"expected key=value, got {item!r}")
        vals = []
        for v in val.split("/"):
            try:
                vals.append(int(v))
            except ValueError:
                try:
                    vals.append(float(v))
                except ValueError:
                    vals.append(v)
        kw[key.strip()] = vals if len(vals) > 1 else vals[0]
    if "types" in kw and isinstance(kw["types"], list):
        kw["types"] = tuple(kw["types"])
    try:
        src = generator_source(**kw)
        src(np.random.default_rng(0))          # a bad key or value fails here, not in the middle of training
    except TypeError as e:
        raise InputError("command line", "--generator", str(e)) from None
    return src


def run(a: argparse.Namespace) -> int:
    if a.steps < 0 or a.bc_epochs < 0:
        raise InputError("command line", "--steps/--bc-epochs", "must be >= 0")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    args = Args(policy=a.policy, suite=a.suite, steps=a.steps, seed=a.seed, out=str(out), threads=a.threads,
                num_envs=a.num_envs, rollout_steps=a.rollout_steps, problem=a.problem)
    source = _generator(a.generator) if a.generator else None
    cfg = env_config(args)
    init = out / "bc.pt"
    if a.bc_epochs > 0 and not init.exists():
        bargs = bc.BCArgs(suite=a.suite, instances=a.bc_instances, time_limit=a.bc_time_limit, epochs=a.bc_epochs,
                          first_seed=a.bc_first_seed)
        demos = bc.demonstrations(bargs, Path(a.demos) if a.demos else bc.DATA)
        if not demos:
            raise InputError("command line", "--demos", "no demonstration could be made")
        extra = None
        if a.dagger != "none":
            path = Path(a.dagger) if a.dagger else DAGGER
            if a.dagger or path.exists():
                if not path.exists():
                    raise InputError(str(path), "", "no such DAgger file (make one: python -m rl.dagger)")
                extra = dagger.all_steps(dagger.load(path, cfg), cfg, bargs.reward_scale)
        bc.clone(a.policy, demos, bargs, cfg, args.hidden, a.seed, out, a.threads, extra=extra)
    if init.exists():
        args.init = str(init)
    final = (train_hrl(args, source) if a.policy == "hrl" else train(args, source)) if a.steps > 0 else init
    print(json.dumps({"policy": a.policy, "checkpoint": str(final), "steps": a.steps, "seed": a.seed}))
    return 0


def register(sub) -> None:
    p = sub.add_parser("train", help="train a learned policy (behaviour cloning from the oracles, then PPO)")
    p.add_argument("--policy", required=True, choices=["ppo", "hrl"])
    p.add_argument("--suite", default="small,queue", help="training families of rl.suites (seeds < 10,000)")
    p.add_argument("--generator", default=None, help="instead of --suite: offline_instance key=value,... (a/b: drawn)")
    p.add_argument("--problem", default="offline", choices=["offline", "preemptive"])
    p.add_argument("--steps", type=int, default=20_000, help="PPO budget in environment steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", required=True)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--rollout-steps", type=int, default=256)
    p.add_argument("--demos", default=None, help="folder of demonstrations (default: the shipped ones)")
    p.add_argument("--bc-instances", type=int, default=80)
    p.add_argument("--bc-first-seed", type=int, default=100)
    p.add_argument("--bc-time-limit", type=float, default=10.0)
    p.add_argument("--bc-epochs", type=int, default=30, help="0: no behaviour cloning")
    p.add_argument("--dagger", default=None,
                   help="DAgger-labelled episodes cloned with the demonstrations (default: the shipped "
                        "rl/data/dagger/episodes.jsonl where present; 'none': demonstrations only)")
    p.set_defaults(func=run)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m rl.train")
    register(parser.add_subparsers(dest="verb", required=True))
    ns = parser.parse_args(["train"] + sys.argv[1:])
    sys.exit(ns.func(ns))
