"""PAL / PM-First / Packed placements on hand-made clusters, the k-means binning, and the artifact match."""

from __future__ import annotations

import pytest

from baselines.pal import ARTIFACT_MEAN_JCT, run
from baselines.placement import PAL, Bins, Packed, PMFirst
from jctlab.loaders import default_data_dir
from jctlab.model import Instance

DATA = default_data_dir()
needs_data = pytest.mark.skipif(
    DATA is None, reason="raw public data not found (set JCTLAB_DATA or place it at ../shared/data)")


def cluster_instance(factors: list[list[float]], jobs=None, lam: float = 1.7) -> Instance:
    """Nodes of V100s whose class-A factors are ``factors[node]``; PAL-style jobs (split equal, comm 0)."""
    nodes = [{"name": f"n{k}", "cpus": 4.0 * len(fs), "mem_gb": 64.0 * len(fs),
              "gpus": [{"type": "v100", "variability": {"A": f}} for f in fs]} for k, fs in enumerate(factors)]
    jobs = jobs or [{"name": "j0", "arrival": 0.0, "batch": 2, "iterations": 100.0, "samples_per_s": {"v100": 10.0},
                     "sizes": [2], "class": "A"}]
    d = {"format": "jctlab.instance/1", "name": "hand", "problem": "preemptive", "objective": "mean_jct",
         "cluster": {"nodes": nodes, "locality_penalty": lam, "split": "equal", "restart_s": 0.0}, "jobs": jobs}
    return Instance.from_dict(d, "<test>")


def free_all(inst):
    return {nd.name: [g.id for g in nd.gpus] for nd in inst.cluster.nodes}


def test_bins_two_clusters_median_normalised():
    inst = cluster_instance([[1.0, 1.0, 1.3, 1.3], [1.0, 1.3, 1.3, 1.3]])
    sf = Bins(inst).of("A")
    lo, hi = 1.0 / 1.15, 1.3 / 1.15          # centres 1.0 and 1.3, median centre 1.15
    assert sf["n0:0"] == pytest.approx(lo) and sf["n1:0"] == pytest.approx(lo)
    assert sf["n0:2"] == pytest.approx(hi) and sf["n1:3"] == pytest.approx(hi)
    assert Bins(inst).of(None)["n0:0"] == 1.0     # classless jobs see no variability


def test_bins_outlier_gets_its_own_bin():
    vals = [[1.0, 1.01, 1.0, 1.02], [1.1, 1.11, 1.1, 1.12], [1.0, 1.01, 1.1, 1.11], [1.0, 1.1, 1.02, 3.0]]
    sf = Bins(cluster_instance(vals)).of("A")
    assert len({round(v, 9) for v in sf.values()}) == 3
    # median of the three centres is the upper normal bin, so it maps to exactly 1.0
    assert sf["n1:0"] == pytest.approx(1.0)
    assert sf["n3:3"] == pytest.approx(3.0 / sf_centre_upper(vals))
    assert max(sf.values()) == sf["n3:3"]


def sf_centre_upper(vals):
    flat = [v for fs in vals for v in fs if v < 2]
    up = [v for v in flat if v >= 1.05]
    return sum(up) / len(up)


def test_pmfirst_prefers_fast_then_best_matching_node():
    # node0: one fast GPU; node1: two fast GPUs -> a 2-GPU job takes node1's pair (locality |2-2| = 0)
    inst = cluster_instance([[1.0, 1.3, 1.3, 1.3], [1.3, 1.0, 1.0, 1.3]])
    got = PMFirst(inst).place(0, 2, free_all(inst))
    assert sorted(got) == ["n1:1", "n1:2"]
    # a 1-GPU job: the fast GPU whose node has exactly one fast GPU free
    got1 = PMFirst(inst).place(0, 1, free_all(inst))
    assert got1 == ["n0:0"]


def test_pal_walk_depends_on_lambda():
    # one fast GPU per node: 2 fast GPUs only across nodes; 2 slow GPUs within a node
    inst = cluster_instance([[1.0, 1.3, 1.3, 1.3], [1.0, 1.3, 1.3, 1.3]])
    free = free_all(inst)
    pal = PAL(inst, lam=1.7)            # options: lo·1, hi·1, lo·1.7, hi·1.7 -> within node, slow
    opts = pal.options("A")
    assert [o[1] for o in opts] == [1, 1, 0, 0]
    got = pal.place(0, 2, free)
    assert len({g.split(":")[0] for g in got}) == 1
    assert got == ["n0:0", "n0:1"]                 # first combo at max slowdown 'hi' (as the artifact)
    assert max(pal.bins.of("A")[g] for g in got) > 1
    pal2 = PAL(inst, lam=1.1)           # lo·1.1 < hi·1: the two fast GPUs across nodes
    got2 = pal2.place(0, 2, free)
    assert sorted(got2) == ["n0:0", "n1:0"]


def test_pal_within_node_takes_least_max_slowdown():
    inst = cluster_instance([[1.3, 1.0, 1.3, 1.0], [1.0, 1.0, 1.0, 1.3]])
    got = PAL(inst).place(0, 2, free_all(inst))
    # both nodes offer two fast GPUs; node n1 has more (3) -> its first two
    assert got == ["n1:0", "n1:1"]
    got3 = PAL(inst).place(0, 3, free_all(inst))
    assert got3 == ["n1:0", "n1:1", "n1:2"]


def test_packed_rules():
    inst = cluster_instance([[1.0] * 4, [1.0] * 4, [1.0] * 4])
    p = Packed(inst)
    free = {"n0": ["n0:0", "n0:1", "n0:2"], "n1": ["n1:0", "n1:1"], "n2": ["n2:0", "n2:1", "n2:2", "n2:3"]}
    assert p.place(0, 2, free) == ["n1:0", "n1:1"]                 # exact match
    assert p.place(0, 1, free) == ["n1:0"]                         # fewest sufficient
    assert p.place(0, 6, free) == ["n2:0", "n2:1", "n2:2", "n2:3", "n0:0", "n0:1"]   # emptiest first
    assert p.place(0, 10, free) is None


def test_round_end_jct_rule_on_the_grid_from_zero():
    jobs = [{"name": "j0", "arrival": 100.0, "batch": 1, "iterations": 50.0, "samples_per_s": {"v100": 1.0},
             "sizes": [1], "class": "A"}]
    inst = cluster_instance([[1.0, 1.0]], jobs)
    r = run(inst, "fifo+pal", round_s=360.0)
    # rounds at 0, 360: starts at 360, runs 50 s, finishes in the round ending at 720
    assert r.mean_jct == pytest.approx(720.0 - 100.0)
    assert r.mean_jct_exact == pytest.approx(410.0 - 100.0)


@needs_data
def test_artifact_workload1_exact_inputs():
    from jctlab.loaders.pal import load_pal

    inst = load_pal(1, data_dir=DATA, variability="artifact", background=True, restart_s=0.0)
    ref = ARTIFACT_MEAN_JCT[1]
    for name, pol in (("Default-Packed-NS", "fifo+packed-nonsticky"), ("Default-Packed-S", "fifo+packed-sticky"),
                      ("PAL", "fifo+pal"), ("PM-First", "fifo+pm-first")):
        r = run(inst, pol)
        assert abs(r.mean_jct - ref[name]) / ref[name] < 0.05, (name, r.mean_jct, ref[name])
    assert run(inst, "fifo+packed-nonsticky").mean_jct == pytest.approx(ref["Default-Packed-NS"], rel=1e-3)
