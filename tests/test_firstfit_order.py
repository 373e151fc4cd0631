"""fifo-firstfit spreads a job over nodes taking each node's free GPUs in GPU order (its schedule once
depended on the iteration order of a set of GPU ids, that is, on PYTHONHASHSEED)."""

from __future__ import annotations

from jctlab.model import Instance
from jctlab.policies import FifoFirstFit
from jctlab.simulate import simulate


def test_spread_takes_free_gpus_in_gpu_order():
    nodes = [{"name": f"n{k}", "cpus": 64.0, "mem_gb": 512.0, "gpus": [{"type": "v100"}] * 16} for k in range(2)]
    jobs = [{"name": name, "arrival": 0.0, "batch": 1, "iterations": 100.0, "samples_per_s": {"v100": 1.0},
             "sizes": [n]} for name, n in (("a", 10), ("b", 20))]
    inst = Instance.from_dict({"format": "jctlab.instance/1", "name": "spread", "problem": "offline",
                               "objective": "mean_jct", "cluster": {"nodes": nodes}, "jobs": jobs}, "<test>")
    sched, rep = simulate(inst, FifoFirstFit(inst))
    assert rep.valid
    got = {s.job: s.alloc.gpus for s in sched.segments}
    assert got["a"] == tuple(f"n0:{i}" for i in range(10))
    # b: n0's six free GPUs, then the first fourteen of n1 (of 16, which two are left depends on the order)
    assert got["b"] == tuple(f"n0:{i}" for i in range(10, 16)) + tuple(f"n1:{i}" for i in range(14))
