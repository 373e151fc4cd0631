"""Train sb3-contrib's MaskablePPO on jctlab's Gymnasium env, then score it through the harness.

    python examples/sb3-agent/agent.py --steps 20000 --out runs/sb3/model.zip      # training seeds only
    JCTLAB_SB3_MODEL=runs/sb3/model.zip PYTHONPATH=examples/sb3-agent \\
        jctlab evaluate --suite queue-small --methods agent:factory,hrl,sjf+pal --out runs/sb3-eval --report

Training draws instances of the ``queue`` family (rl/suites.py) from training seeds (below 9,000); the suites
hold seeds from 10,000 on, so the agent is scored on instances it never saw. ``factory`` is what
``--methods agent:factory`` names: the model of ``$JCTLAB_SB3_MODEL`` as a jctlab policy
(:func:`rl.agent.agent_factory`), deciding in the simulator as it did in the env. The budget is in environment
steps and every random choice takes ``--seed``: the same command gives the same model.
"""

from __future__ import annotations

import argparse
import functools
import os
from pathlib import Path
from typing import Any

import torch
from sb3_contrib import MaskablePPO

from rl.agent import AgentPolicy, agent_factory
from rl.envs import make_env
from rl.observe import EnvConfig

CONFIG = EnvConfig()            # the observation the agent is trained on and scored with
REWARD_SCALE = 3600.0           # return = −(total JCT) / 1 h


def train(steps: int, out: Path, seed: int = 0, family: str = "queue") -> Path:
    torch.set_num_threads(1)
    env = make_env(family=family, config=CONFIG, reward_scale=REWARD_SCALE)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=256, batch_size=64, seed=seed, verbose=0)
    model.learn(steps)
    out.parent.mkdir(parents=True, exist_ok=True)
    model.save(out)
    return out


@functools.lru_cache(maxsize=None)
def _model(path: str) -> MaskablePPO:
    return MaskablePPO.load(path, device="cpu")


def factory(inst: Any, seed: int = 0, **options: Any) -> AgentPolicy:
    """The trained model of ``$JCTLAB_SB3_MODEL`` as a jctlab policy."""
    path = os.environ.get("JCTLAB_SB3_MODEL")
    if not path:
        raise RuntimeError("set JCTLAB_SB3_MODEL to the model file (python examples/sb3-agent/agent.py --out FILE)")
    model = _model(path)
    act = functools.partial(_predict, model)
    return agent_factory(act, CONFIG)(inst, seed)


def _predict(model: MaskablePPO, obs: dict) -> int:
    return int(model.predict(obs, action_masks=obs["action_mask"], deterministic=True)[0])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20_000, help="environment steps")
    ap.add_argument("--out", type=Path, default=Path("runs/sb3/model.zip"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--family", default="queue", help="training family or families (rl/suites.py)")
    a = ap.parse_args(argv)
    print(train(a.steps, a.out, a.seed, a.family))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
