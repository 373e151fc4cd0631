"""The exact special cases at 50 jobs: proven optimal through the oracle's front door within 1 s (floor of issue
45), per textbook problem. Warm calls (the solver libraries already imported); evaluation seeds (≥ 10 000).

    pytest benchmarks/bench_special.py --benchmark-only -s
"""

from __future__ import annotations

import numpy as np
import pytest

import oracle
from formulations.special.recognise import Textbook
from jctlab.model import Instance
from jctlab.replay import replay

JOBS = 50
SEED = 10_000


def _instance(kind: str, seed: int = SEED) -> Instance:
    """50 single-GPU jobs of 0.1-2 h; ``kind``: identical (8 V100s), uniform (8 GPUs of three types, one speed
    ratio per type), unrelated (8 GPUs of three types, per-job rates and per-GPU variability), one-gpu-weighted,
    srpt (one GPU, releases over 10 h, preemptive)."""
    rng = np.random.default_rng(seed)
    types = ["v100"] * 8 if kind == "identical" else ["v100", "v100", "v100", "p100", "p100", "p100", "k80", "k80"]
    if kind in ("one-gpu-weighted", "srpt"):
        types = ["v100"]
    ratio = {"v100": 1.0, "p100": 0.6, "k80": 0.25}
    jobs = []
    for j in range(JOBS):
        hours = rng.uniform(0.1, 2.0)
        rates = ({t: 100.0 * ratio[t] for t in ratio} if kind != "unrelated"
                 else {t: 100.0 * ratio[t] * rng.uniform(0.5, 1.5) for t in ratio})
        jobs.append({"name": f"j{j}", "arrival": float(rng.uniform(0, 36000)) if kind == "srpt" else 0.0,
                     "batch": 32.0, "iterations": hours * 3600 * 100.0 / 32.0, "samples_per_s": rates, "sizes": [1],
                     "class": "AB"[j % 2], "weight": float(rng.integers(1, 10))})
    gpus = [{"type": t, "variability": {"A": float(rng.uniform(1.0, 1.3))} if kind == "unrelated" else {}}
            for t in types]
    nodes = [{"name": f"n{i}", "cpus": 32, "mem_gb": 256, "gpus": gpus[i * 4:(i + 1) * 4]}
             for i in range((len(gpus) + 3) // 4)]
    return Instance.from_dict({"format": "jctlab.instance/1", "name": f"special-{kind}", "objective":
                               "weighted_jct" if kind == "one-gpu-weighted" else "mean_jct",
                               "problem": "preemptive" if kind == "srpt" else "offline",
                               "cluster": {"nodes": nodes, "restart_s": 0.0}, "jobs": jobs})


EXPECTED = {"identical": Textbook.P_SUM_C, "uniform": Textbook.Q_SUM_C, "unrelated": Textbook.R_SUM_C,
            "one-gpu-weighted": Textbook.ONE_WSUM_C, "srpt": Textbook.ONE_R_PMTN_SUM_C}


@pytest.mark.parametrize("kind", list(EXPECTED))
@pytest.mark.parametrize("method", ["cpsat", "auto"])
def test_special_case_proven_within_a_second(benchmark, kind, method):
    inst = _instance(kind)
    oracle.solve(_instance(kind, SEED + 1), method, time_limit=60)      # warm: imports
    r = benchmark.pedantic(lambda: oracle.solve(inst, method, time_limit=60), rounds=3, iterations=1)
    rep = replay(inst, r.claimed_schedule())
    print(f"\n{kind} {method}: {r.status} {r.params.get('algorithm')} objective {r.objective:.1f} "
          f"median {benchmark.stats['median']:.3f} s")
    assert r.status == "optimal" and r.params["special"] == EXPECTED[kind]
    assert rep.valid and rep.objective == pytest.approx(r.objective, rel=1e-9)
    assert benchmark.stats["max"] <= 1.0
