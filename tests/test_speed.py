"""The speed model (SPEC §2), each term against hand-computed values."""

from __future__ import annotations

import math

import numpy as np
import pytest

from jctlab.model import Allocation, Instance
from jctlab.speed import SpeedError, base_iteration_time, duration, iteration_time

from .conftest import tiny_dict


def t(inst: Instance, job: str, gpus: tuple[str, ...], **kw) -> float:
    return base_iteration_time(inst.job[job], Allocation(gpus, **kw), inst.cluster)


def test_single_gpu_is_batch_over_rate(tiny):
    assert t(tiny, "a", ("n0:0",)) == pytest.approx(64 / 100)
    assert t(tiny, "a", ("n1:0",)) == pytest.approx(64 / 50)


def test_variability_divides_the_rate_of_its_class_only(tiny):
    assert t(tiny, "a", ("n0:1",)) == pytest.approx(64 / (100 / 1.25))
    assert t(tiny, "b", ("n0:1",)) == pytest.approx(32 / 64)  # class B: factor absent = 1


def test_proportional_split_and_ring_allreduce_in_one_node(tiny):
    comm = 2 * 1 / 2 * 100 * 8 / 1000 / 100.0
    assert t(tiny, "a", ("n0:0", "n0:1")) == pytest.approx(64 / (100 + 80) + comm)


def test_equal_split_is_paced_by_the_slowest_gpu():
    d = tiny_dict(split="equal")
    inst = Instance.from_dict(d)
    comm = 2 * 1 / 2 * 100 * 8 / 1000 / 100.0
    assert t(inst, "a", ("n0:0", "n0:1")) == pytest.approx(64 / (2 * 80) + comm)


def test_spanning_nodes_uses_inter_node_bandwidth_and_locality_penalty(tiny):
    comm = 2 * 1 / 2 * 100 * 8 / 1000 / 25.0
    assert t(tiny, "a", ("n0:0", "n1:0")) == pytest.approx((64 / 150 + comm) * 1.5)


def test_pal_special_case_equal_split_max_variability_lambda():
    """PAL: iteration = base × largest per-GPU factor × λ when spanning nodes (split=equal, comm=0)."""
    d = tiny_dict(split="equal", locality_penalty=1.7)
    d["cluster"]["nodes"][1]["gpus"] = [{"type": "v100", "variability": {"A": 1.1}}, {"type": "v100"}]
    d["jobs"][0].update(batch=2, samples_per_s={"v100": 1 / 0.1754}, comm_mb=0.0)
    inst = Instance.from_dict(d)
    assert t(inst, "a", ("n0:0", "n0:1")) == pytest.approx(0.1754 * 1.25)
    assert t(inst, "a", ("n0:0", "n1:0")) == pytest.approx(0.1754 * 1.1 * 1.7)


def test_parameter_server_overhead_replaces_allreduce(tiny_d):
    tiny_d["jobs"][0]["ps"] = {"max_ps": 2, "ps_cpus": 1, "theta": [0.01, 0.02, 0.003, 0.004]}
    inst = Instance.from_dict(tiny_d)
    ps = 0.01 + 0.02 * 2 / 1 + 0.003 * 2 + 0.004 * 1
    assert t(inst, "a", ("n0:0", "n0:1"), ps_nodes=("n0",)) == pytest.approx(64 / 180 + ps)
    # a PS on the other node makes the job span two nodes: locality penalty
    assert t(inst, "a", ("n0:0", "n0:1"), ps_nodes=("n1",)) == pytest.approx((64 / 180 + ps) * 1.5)
    ps2 = 0.01 + 0.02 * 2 / 2 + 0.003 * 2 + 0.004 * 2
    assert t(inst, "a", ("n0:0", "n0:1"), ps_nodes=("n0", "n0")) == pytest.approx(64 / 180 + ps2)
    with pytest.raises(SpeedError):
        t(inst, "a", ("n0:0",))  # a PS job needs a PS
    with pytest.raises(SpeedError):
        t(inst, "a", ("n0:0",), ps_nodes=("n0", "n0", "n0"))  # more than max_ps


def test_measured_throughputs_take_precedence(tiny_d):
    tiny_d["jobs"][0]["measured"] = {"v100": {"2": 5.0, "1": 2.0}, "p100/spread": {"2": 0.5}}
    inst = Instance.from_dict(tiny_d)
    # consolidated: 1/measured × largest variability (1.25 on n0:1), no locality
    assert t(inst, "a", ("n0:0", "n0:1")) == pytest.approx(1 / 5.0 * 1.25)
    assert t(inst, "a", ("n0:0",)) == pytest.approx(1 / 2.0)
    # p100 over two nodes would need two nodes of p100: build one
    tiny_d["cluster"]["nodes"].append({"name": "n2", "cpus": 8, "mem_gb": 64, "gpus": [{"type": "p100"}]})
    inst = Instance.from_dict(tiny_d)
    assert t(inst, "a", ("n1:0", "n2:0")) == pytest.approx(1 / 0.5)  # spread table: no penalty
    # v100 spread without a spread entry: consolidated figure × locality penalty
    tiny_d["cluster"]["nodes"].append({"name": "n3", "cpus": 8, "mem_gb": 64, "gpus": [{"type": "v100"}]})
    inst = Instance.from_dict(tiny_d)
    assert t(inst, "a", ("n0:0", "n3:0")) == pytest.approx(1 / 5.0 * 1.5)
    # mixed types: formula
    comm = 100 * 8 / 1000 / 25.0
    assert t(inst, "a", ("n0:0", "n1:0")) == pytest.approx((64 / 150 + comm) * 1.5)


def test_cpu_mem_level_speedup(tiny_d):
    tiny_d["jobs"][0]["cpu_mem"] = {"levels": [[2, 16, 0.8], [4, 32, 1.0], [6, 48, 1.25]]}
    inst = Instance.from_dict(tiny_d)
    assert t(inst, "a", ("n0:0",), cpus_per_gpu=6, mem_gb_per_gpu=48) == pytest.approx(0.64 / 1.25)
    assert t(inst, "a", ("n0:0",), cpus_per_gpu=2, mem_gb_per_gpu=16) == pytest.approx(0.64 / 0.8)
    assert t(inst, "a", ("n0:0",)) == pytest.approx(0.64)  # null = fair share = 1.0
    with pytest.raises(SpeedError):
        t(inst, "a", ("n0:0",), cpus_per_gpu=5, mem_gb_per_gpu=48)


def test_interference_factor_sums_over_neighbours(tiny_d):
    tiny_d["cluster"]["interference"] = {"A": {"B": 0.1, "A": 0.2}}
    inst = Instance.from_dict(tiny_d)
    job, alloc = inst.job["a"], Allocation(("n0:0",))
    base = 0.64
    assert iteration_time(job, alloc, inst.cluster, ["B"]) == pytest.approx(base * 1.1)
    assert iteration_time(job, alloc, inst.cluster, ["B", "A", None]) == pytest.approx(base * 1.3)
    assert iteration_time(inst.job["b"], alloc, inst.cluster, ["A"]) == pytest.approx(0.5)


def test_duration_is_iterations_times_iteration_time(tiny):
    assert duration(tiny.job["a"], Allocation(("n0:0",)), tiny.cluster) == pytest.approx(100 * 0.64)


def test_type_that_cannot_host_is_rejected(tiny_d):
    tiny_d["jobs"][0]["samples_per_s"] = {"v100": 100.0, "p100": 0.0}
    inst = Instance.from_dict(tiny_d)
    with pytest.raises(SpeedError):
        t(inst, "a", ("n1:0",))
    assert math.isfinite(t(inst, "a", ("n0:0",)))


def test_a_job_without_cpu_mem_table_cannot_pick_a_level(tiny):
    with pytest.raises(SpeedError, match="no cpu_mem table"):
        t(tiny, "a", ("n0:0",), cpus_per_gpu=0, mem_gb_per_gpu=0)


def test_level_choices_are_the_fair_share_then_the_table(tiny_d):
    tiny_d["jobs"][0]["cpu_mem"] = {"levels": [[2, 16, 0.8], [6, 48, 1.25]]}
    inst = Instance.from_dict(tiny_d)
    assert inst.job["a"].level_choices == ((None, None), (2.0, 16.0), (6.0, 48.0))
    assert inst.job["b"].level_choices == ((None, None),)
    for c, m in inst.job["a"].level_choices:  # every choice is priced by the speed model
        assert t(inst, "a", ("n0:0",), cpus_per_gpu=c, mem_gb_per_gpu=m) > 0


# ----------------------------------------------------------------------------- vectorized pricing

from hypothesis import given, settings
from hypothesis import strategies as st

from jctlab.speed import step_time
from jctlab.speed_tables import step_times_by_counts


@st.composite
def _count_case(draw):
    """A cluster without variability (3 nodes, mixed types), one job with random speed features,
    and a random GPU subset (PS on its first node when the job has a PS)."""
    types = ["k80", "p100", "v100"]
    nodes = []
    for v in range(3):
        gt = draw(st.lists(st.sampled_from(types), min_size=1, max_size=4))
        nodes.append({"name": f"n{v}", "cpus": 16, "mem_gb": 64, "gpus": [{"type": t} for t in gt]})
    cluster = {"nodes": nodes, "intra_node_gbps": draw(st.sampled_from([10.0, 100.0])),
               "inter_node_gbps": draw(st.sampled_from([1.0, 25.0])),
               "locality_penalty": draw(st.sampled_from([1.0, 1.3])),
               "split": draw(st.sampled_from(["proportional", "equal"])), "interference": {}, "restart_s": 0.0}
    rates = {t: draw(st.sampled_from([0.0, 20.0, 55.5, 130.0])) for t in types}
    if not any(rates.values()):
        rates["v100"] = 100.0
    job = {"name": "j", "arrival": 0.0, "batch": draw(st.sampled_from([16, 64, 256])), "iterations": 10,
           "samples_per_s": rates, "comm_mb": draw(st.sampled_from([0.0, 40.0, 300.0])), "sizes": [1, 2, 3, 4]}
    if draw(st.booleans()):
        t = draw(st.sampled_from(types))
        job["measured"] = {t: {"1": 77.0, "2": 150.0}, f"{t}/spread": {"2": 120.0}}
    ps = draw(st.booleans())
    if ps:
        job["ps"] = {"max_ps": 2, "ps_cpus": 1, "theta": [0.01, 0.02, 0.003, 0.004]}
    inst = Instance.from_dict({"format": "jctlab.instance/1", "name": "v", "problem": "static",
                               "objective": "mean_jct", "cluster": cluster, "jobs": [job]})
    ids = [g.id for g in inst.cluster.gpus]
    gpus = tuple(draw(st.lists(st.sampled_from(ids), min_size=1, max_size=6, unique=True)))
    alloc = Allocation(gpus, (gpus[0].split(":")[0],) if ps else ())
    return inst, types, alloc


@settings(max_examples=300, deadline=None)
@given(_count_case())
def test_vectorized_step_times_equal_step_time(case):
    inst, types, alloc = case
    job, cl = inst.jobs[0], inst.cluster
    counts = [[sum(cl.gpu[g].type == t for g in alloc.gpus) for t in types]]
    spread = [len({g.split(":")[0] for g in alloc.gpus}) > 1]
    got = float(step_times_by_counts(job, cl, types, counts, spread)[0])
    try:
        want = step_time(job, alloc, cl)
    except SpeedError:
        assert math.isnan(got)
        return
    assert got == pytest.approx(want, rel=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(_count_case(), min_size=2, max_size=4))
def test_step_time_table_rows_equal_each_job_priced_alone(cases):
    """Several jobs priced at once (``step_time_table``) give, row by row, exactly what each job gets
    alone, on the first case's cluster and on every case's allocation as a count vector."""
    from jctlab.speed_tables import step_time_table

    inst, types, _ = cases[0]
    cl = inst.cluster
    jobs = [c[0].jobs[0] for c in cases]
    counts = np.array([[sum(c[0].cluster.gpu[g].type == t for g in c[2].gpus) for t in types] for c in cases])
    spread = np.array([len({g.split(":")[0] for g in c[2].gpus}) > 1 for c in cases])
    table = step_time_table(jobs, cl, types, counts, spread)
    for p, job in enumerate(jobs):
        alone = step_times_by_counts(job, cl, types, counts, spread)
        np.testing.assert_array_equal(table[p], alone)
