"""The speed model (SPEC §2), each term against hand-computed values."""

from __future__ import annotations

import math

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
