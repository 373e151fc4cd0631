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

from jctlab import argtypes as T
from jctlab import limits as L
from jctlab.errors import InputError

from . import bc, dagger, mappo
from .envs import generator_source
from .hrl import train_hrl
from .observe import EnvConfig
from .ppo import Args, env_config, train
from .suites import EVAL_SEED, training_source

DAGGER = bc.DATA / "dagger" / "episodes.jsonl"
#: what --generator may set (offline_instance's arguments), each value parsed in its range: nodes (given, or
#: gpus // 4) within the env's tables, so that no drawn instance is refused in the middle of training
#: (offline_instance's default is 32 GPUs)
GENERATOR_KEYS: dict[str, L.Range | type] = {
    "gpus": L.Range(1, 4 * EnvConfig().max_nodes, integer=True),
    "nodes": L.Range(1, EnvConfig().max_nodes, integer=True),
    "jobs": L.Range(1, 1_000, integer=True), "max_size": L.Range(1, 1_024, integer=True),
    "interarrival_s": L.Range(0, 1e6, lo_open=True), "elastic": L.Range(0, 1), "variability": L.Range(0, 10),
    "locality_penalty": L.LOCALITY, "interference": L.INTERFERENCE, "restart_s": L.TIME,
    "cpu_mem": bool, "ps": bool, "topology": bool, "types": str,
}


def _families(raw: str) -> str:
    """--suite: a comma list of at least one family name (kept as the text Args and BCArgs take)."""
    return ",".join(T.names(raw))


def _generator_value(key: str, raw: str) -> object:
    kind = GENERATOR_KEYS[key]
    if kind is str:
        return T.text(raw)
    if kind is bool:
        if raw.lower() not in ("true", "false"):
            raise ValueError(f"expected true or false, got {L.shorten(raw)}")
        return raw.lower() == "true"
    return T.parse_number(raw, kind)


def _generator(spec: str):
    """``key=value,key=v1/v2`` -> a generator source (``/`` separates values drawn per instance), every
    key one of GENERATOR_KEYS and every value in its range."""
    kw: dict[str, object] = {}
    for item in spec.split(","):
        if not item.strip():
            continue
        key, eq, val = (x.strip() for x in item.partition("="))
        if not eq:
            raise InputError("command line", "--generator", f"expected key=value, got {item!r}")
        if key not in GENERATOR_KEYS:
            raise InputError("command line", "--generator", f"unknown key {key!r} (known: {', '.join(GENERATOR_KEYS)})")
        if key in kw:
            raise InputError("command line", "--generator", f"{key} given twice")
        try:
            vals = [_generator_value(key, v) for v in val.split("/")]
        except (ValueError, argparse.ArgumentTypeError) as e:
            raise InputError("command line", "--generator", f"{key}: {e}") from None
        kw[key] = vals if len(vals) > 1 else vals[0]
    if "types" in kw:
        kw["types"] = tuple(kw["types"]) if isinstance(kw["types"], list) else (kw["types"],)
    drawn = {k: v if isinstance(v, list) else [v] for k, v in kw.items()}
    if "nodes" in kw and min(drawn.get("gpus", [32])) < max(drawn["nodes"]):   # every draw, not only the first
        raise InputError("command line", "--generator", "some draw has fewer gpus than nodes")
    try:
        src = generator_source(**kw)
        src(np.random.default_rng(0))          # a bad combination fails here, not in the middle of training
    except (TypeError, ValueError, InputError) as e:
        raise InputError("command line", "--generator", str(e)) from None
    return src


def run(a: argparse.Namespace) -> int:
    if a.steps == 0 and a.bc_epochs == 0:
        raise InputError("command line", "--steps/--bc-epochs", "both 0: nothing to train")
    if a.policy == "maifs":
        return mappo.run(a)
    a.suite = a.suite or "small,queue"
    if a.bc_first_seed + a.bc_instances > EVAL_SEED:
        raise InputError("command line", "--bc-first-seed", f"demonstrations use training seeds: "
                         f"{a.bc_first_seed} + {a.bc_instances} instances passes {EVAL_SEED}")
    # every option checked before the output folder is made
    source = _generator(a.generator) if a.generator else None
    training_source(a.suite, a.problem)        # the families named exist (BC draws from them too)
    out = Path(a.out)
    args = Args(policy=a.policy, suite=a.suite, steps=a.steps, seed=a.seed, out=str(out), threads=a.threads,
                num_envs=a.num_envs, rollout_steps=a.rollout_steps, problem=a.problem)
    cfg = env_config(args)
    init = out / "bc.pt"
    demos, bargs, extra = None, None, None
    if a.bc_epochs > 0 and not init.exists():
        bargs = bc.BCArgs(suite=a.suite, instances=a.bc_instances, time_limit=a.bc_time_limit, epochs=a.bc_epochs,
                          first_seed=a.bc_first_seed)
        demos = bc.demonstrations(bargs, Path(a.demos) if a.demos else bc.DATA)
        if not demos:
            raise InputError("command line", "--demos", "no demonstration could be made")
        if a.dagger != "none":
            path = Path(a.dagger) if a.dagger else DAGGER
            if a.dagger or path.exists():
                if not path.exists():
                    raise InputError(str(path), "", "no such DAgger file (make one: python -m rl.dagger)")
                extra = dagger.all_steps(dagger.load(path, cfg), cfg, bargs.reward_scale, str(path))
    out.mkdir(parents=True, exist_ok=True)       # the demonstrations read (or made): the run's folder now
    if demos is not None:
        bc.clone(a.policy, demos, bargs, cfg, args.hidden, a.seed, out, a.threads, extra=extra)
    if init.exists():
        args.init = str(init)
    final = (train_hrl(args, source) if a.policy == "hrl" else train(args, source)) if a.steps > 0 else init
    print(json.dumps({"policy": a.policy, "checkpoint": str(final), "steps": a.steps, "seed": a.seed}))
    return 0


def register(sub) -> None:
    p = sub.add_parser("train", help="train a learned policy (behaviour cloning from the oracles, then PPO)")
    p.add_argument("--policy", required=True, choices=["ppo", "hrl", "maifs"])
    p.add_argument("--suite", type=_families, default=None, help="training families (seeds < 10,000): of rl.suites "
                   "for ppo/hrl (default small,queue), of rl.maifs_workloads for maifs (default: all four)")
    p.add_argument("--generator", type=T.text, default=None,
                   help="instead of --suite: offline_instance key=value,... (a/b: drawn)")
    p.add_argument("--problem", default="offline", choices=["offline", "preemptive"])
    p.add_argument("--steps", type=T.integer(0, 10**9), default=20_000, help="PPO budget in environment steps")
    p.add_argument("--seed", type=T.SEED, default=0)
    p.add_argument("--out", required=True, type=T.out_dir)
    p.add_argument("--threads", type=T.THREADS, default=1)
    p.add_argument("--num-envs", type=T.integer(1, 1_024), default=4)
    p.add_argument("--rollout-steps", type=T.integer(1, 10**7), default=256)
    p.add_argument("--demos", type=T.out_dir, default=None, help="folder of demonstrations (default: the shipped ones)")
    p.add_argument("--bc-instances", type=T.integer(1, EVAL_SEED), default=80)
    p.add_argument("--bc-first-seed", type=T.integer(0, EVAL_SEED - 1), default=100,
                   help="first training seed of the demonstrations (seeds stay below 10,000)")
    p.add_argument("--bc-time-limit", type=T.TIME_LIMIT, default=10.0)
    p.add_argument("--bc-epochs", type=T.integer(0, 100_000), default=30, help="0: no behaviour cloning")
    p.add_argument("--dagger", type=T.text, default=None,
                   help="DAgger-labelled episodes cloned with the demonstrations (default: the shipped "
                        "rl/data/dagger/episodes.jsonl where present; 'none': demonstrations only)")
    p.set_defaults(func=run)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m rl.train")
    register(parser.add_subparsers(dest="verb", required=True))
    ns = parser.parse_args(["train"] + sys.argv[1:])
    sys.exit(ns.func(ns))
