"""Offline oracle figures (pytest-benchmark, 2 threads, 60 s per solve), through ``oracle.solve(method="cpsat")``
as ``jctlab solve --method cpsat`` runs it (instances with busy periods are solved block by block).

    pytest benchmarks/bench_oracle_offline.py --benchmark-only -s

Floors (asserted): 30 jobs on 32 GPUs proven optimal within 60 s; 50 jobs on 64 GPUs with a certified gap
(objective − bound)/bound below 10 % within 60 s (all three seeds are proven too, which is printed). Each case
prints status, objective, bound, certified gap and the phases; ``docs/benchmarks.md`` holds the figures.
"""

from __future__ import annotations

import pytest

import oracle
from jctlab.generators import offline_instance
from jctlab.replay import replay

CASES = {"30j-32g": (32, 4, 30), "50j-64g": (64, 8, 50)}
#: the floor of each case: proven optimal, or a certified gap below this
MAX_GAP = {"30j-32g": 0.0, "50j-64g": 0.10}


def _inst(gpus, nodes, jobs, seed):
    return offline_instance(gpus=gpus, nodes=nodes, jobs=jobs, interarrival_s=900, duration_h=(0.1, 2), max_size=8,
                            variability=0.05, locality_penalty=1.2, seed=seed)


PARAMS = [(c, s) for c in CASES for s in ((0, 1, 2, 3, 4) if c == "30j-32g" else (0, 1, 2))]


@pytest.mark.parametrize(("case", "seed"), PARAMS)
def test_cpsat_offline(benchmark, case, seed):
    inst = _inst(*CASES[case], seed)
    r = benchmark.pedantic(lambda: oracle.solve(inst, "cpsat", time_limit=60, threads=2, seed=0), rounds=1,
                           iterations=1)
    rep = replay(inst, r.claimed_schedule())
    assert rep.valid, rep.error
    gap = (r.objective - r.lower_bound) / r.lower_bound
    benchmark.extra_info.update(status=r.status, objective=r.objective, lower_bound=r.lower_bound, gap=gap,
                                runtime_s=r.runtime_s, model=r.params.get("model"))
    print(f"\n{case} seed={seed}: {r.status} obj={r.objective:.2f} lb={r.lower_bound:.2f} gap={gap:.4%} "
          f"t={r.runtime_s:.1f}s model={r.params.get('model')}")
    for b in r.params.get("blocks", []):
        print(f"  block of {b['jobs']} jobs: {b['status']} obj={b['objective']:.2f} lb={b['lower_bound']:.2f} "
              f"t={b['runtime_s']:.1f}s")
    for ph in r.params.get("phases", []):
        print(f"  {ph['phase']}: {ph['status']} bound={ph['bound']:.2f} obj={ph['objective']:.2f} t={ph['t']:.1f}s")
    assert r.lower_bound <= r.objective * (1 + 1e-9)
    if MAX_GAP[case] == 0.0:
        assert r.status == "optimal", f"{case} seed {seed}: floor lost (proven optimal within 60 s)"
    else:
        assert gap < MAX_GAP[case], f"{case} seed {seed}: floor lost (certified gap {gap:.2%})"
