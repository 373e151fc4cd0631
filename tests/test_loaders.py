"""Loaders and shipped tables: tables always; real data sets when the raw data directory exists."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from jctlab.errors import InputError
from jctlab.loaders import alibaba, default_data_dir, gavel, load_table, pal, philly, synergy
from jctlab.model import Allocation
from jctlab.speed import duration

DATA = default_data_dir()
needs_data = pytest.mark.skipif(
    DATA is None, reason="raw public data not found (set JCTLAB_DATA or place it at ../shared/data)")


# ------------------------------------------------------------------ shipped tables
def test_tables_are_small():
    tables = Path(gavel.__file__).resolve().parent.parent / "tables"
    total = sum(p.stat().st_size for p in tables.glob("*.json"))
    assert 0 < total < 1_000_000
    assert (tables / "SOURCES.md").is_file()


def test_gavel_table_shape_and_rates():
    types = gavel.job_types()
    assert len(types) == 26
    for name, jt in types.items():
        assert jt["comm_mb"] >= 0
        for t in ("k80", "p100", "v100"):
            one = jt["measured"].get(t, {}).get("1")
            if one is not None:
                assert jt["samples_per_s"][t] == pytest.approx(one * jt["batch"])
        assert "1" not in jt["measured"].get("v100/spread", {})


def test_gavel_fit_error_as_documented():
    rep = gavel.fit_report()
    errs = np.array([abs(p - m) / m for _, _, _, p, m in gavel.predicted_vs_measured()])
    assert errs.size == rep["points"]
    assert np.median(errs) == pytest.approx(rep["median_rel_err"], abs=1e-3)
    assert errs.max() <= rep["max_rel_err"] + 1e-3


def test_gavel_interference_table():
    it = gavel.interference_table()
    vals = [v for row in it.values() for v in row.values()]
    assert len(it) == 26 and all(v >= 0 for v in vals)
    sub = gavel.interference_table(["A3C", "CycleGAN"])
    assert set(sub) <= {"A3C", "CycleGAN"} and all(set(r) <= {"A3C", "CycleGAN"} for r in sub.values())


def test_pal_sampler_reproduces_artifact_table():
    art = load_table("pal_profiles.json")["artifact_seed42_64gpus"]["factors"]
    got = pal.sample_variability(64, "pal", 42)
    for c in "ABCD":
        assert got[c] == pytest.approx(art[c], rel=1e-15, abs=0)


def test_pal_bin_factors_median_one():
    for mode in ("artifact", "pal", "identity", "cluster32"):
        v = pal.sample_variability(64, mode, 3)
        for c in "ABCD":
            factors, assign = pal.bins(v[c])
            assert np.median(factors) == pytest.approx(1.0)
            assert len(assign) == 64 and set(assign) == set(range(len(factors)))
            assert pal.bin_factors(v[c]) == [factors[a] for a in assign]
    # the artifact: class A has one 2.83x outlier -> 3 bins, the others 2 (artifact README)
    art = pal.sample_variability(64, "artifact")
    assert [len(pal.bins(art[c])[0]) for c in "ABCD"] == [3, 2, 2, 2]


def test_pal_identity_keeps_one_gpu():
    prof = load_table("pal_profiles.json")
    v = pal.sample_variability(200, "identity", 0)
    # B and C are the same profile (BERT): a GPU measured there gets the same value in both
    assert v["B"] == v["C"]
    assert all(x in prof["per_gpu"]["resnet"].values() for x in v["A"])


def test_synergy_fair_share_is_one():
    for variant in ("models", "models-4", "models-5", "models-6"):
        for m, e in synergy.models(variant).items():
            lv = {(c, mem): s for c, mem, s in e["cpu_mem"]["levels"]}
            assert lv[(3, 62.5)] == 1.0, (variant, m)
    assert synergy.cpu_mem_for("ResNet-50 (batch size 64)") is not None
    assert synergy.cpu_mem_for("A3C") is None


def test_alibaba_shapes():
    tab = load_table("alibaba_pai_shapes.json")
    assert sum(s["count"] for s in tab["shapes"]) == tab["machines"] == 1897
    assert sum(s["count"] * s["gpus"] for s in tab["shapes"]) == tab["gpus"] == 6742
    nodes = alibaba.alibaba_nodes(10, sample="proportional")
    assert len(nodes) == 10 and {g["type"] for n in nodes for g in n["gpus"]} <= {"v100", "v100m32", "p100"}
    assert alibaba.alibaba_nodes(12, seed=5) == alibaba.alibaba_nodes(12, seed=5)


# ------------------------------------------------------------------ errors
def test_missing_column_names_file_and_column(tmp_path):
    f = tmp_path / "philly.csv"
    f.write_text("timestamp,duration,cluster\n2017-10-01 00:00:00,10,abc\n")
    with pytest.raises(InputError) as e:
        philly.load_philly(f)
    assert e.value.source == str(f) and e.value.field == "num_gpus"
    assert str(f) in str(e.value) and "num_gpus" in str(e.value)

    w = tmp_path / "workload-9.csv"
    w.write_text("job_id,num_gpus,submit_time,model\n0,1,0,vgg19\n")
    with pytest.raises(InputError) as e:
        pal.load_pal(path=w)
    assert e.value.field == "duration" and str(w) in str(e.value)


def test_bad_values_and_files(tmp_path):
    f = tmp_path / "philly.csv"
    f.write_text("timestamp,duration,num_gpus,cluster\n2017-10-01 00:00:00,-3,1,abc\n")
    with pytest.raises(InputError) as e:
        philly.load_philly(f)
    assert e.value.field == "duration" and "row 2" in e.value.reason
    with pytest.raises(InputError):
        philly.load_philly(tmp_path / "nope.csv")
    w = tmp_path / "w.csv"
    w.write_text("job_id,num_gpus,submit_time,duration,model\n0,1,0,10,alexnet\n")
    with pytest.raises(InputError) as e:
        pal.load_pal(path=w)
    assert e.value.field == "model"
    t = tmp_path / "x.trace"
    t.write_text("NoSuchType\tcmd\tdir\t-n\t1\t100\t1\t1\t-1\t0\n")
    with pytest.raises(InputError):
        gavel.load_trace(t)
    with pytest.raises(InputError):
        gavel.gavel_cluster("4:4")


def test_small_synthetic_files(tmp_path):
    """Loaders on tiny hand-written files (no raw data needed)."""
    t = tmp_path / "mini.trace"
    t.write_text("ResNet-50 (batch size 64)\tpython3 x\tdir\t-n\t1\t1000\t2\t1\t-1.000000\t0\n"
                 "A3C\tpython3 y\tdir\t-n\t1\t500\t1\t2\t-1.000000\t30\n")
    inst = gavel.load_trace(t, "2:2:0", "2")
    assert [j.sizes for j in inst.jobs] == [(2,), (1,)] and inst.jobs[1].weight == 2.0
    assert inst.cluster.gpu_types == ("p100", "v100")
    j = inst.jobs[0]
    alloc = Allocation(gpus=("n0:0", "n0:1"))
    assert duration(j, alloc, inst.cluster) == pytest.approx(1000 / j.measured["v100"][2])

    f = tmp_path / "philly.csv"
    f.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                 "2017-10-01 00:00:10,100,1,100,a\n2017-10-01 00:00:00,3600,16,57600,b\n"
                 "2017-10-01 00:01:00,50,4,200,a\n")
    inst = philly.load_philly(f, nodes=2, gpus_per_node=8, seed=1)
    assert [j.arrival for j in inst.jobs] == [0.0, 10.0, 60.0]
    _check_philly_durations(inst, [3600, 100, 50], gpus_per_node=8)
    assert len(philly.load_philly(f, vc="a").jobs) == 2


def test_pal_workload_format(tmp_path):
    """A workload in PAL's Sia-Philly format (job_id, num_gpus, submit_time, duration, model) with its
    background file: rigid jobs, equal split, PAL's iteration time (base × worst factor × λ across nodes)."""
    d = tmp_path / "pal_sia_philly_workloads"
    (d / "artifact_inputs").mkdir(parents=True)
    (d / "workload-9.csv").write_text("job_id,num_gpus,submit_time,duration,model\n"
                                      "0,1,98,1481.0,vgg19\n1,4,115,4037.0,DCGAN\n2,2,300,10.0,resnet50\n")
    (d / "artifact_inputs" / "workload-9-background.csv").write_text("job_id,copy_of_job_id,submit_time\n3,0,500.0\n")
    inst = pal.load_pal(9, data_dir=tmp_path, nodes=2, gpus_per_node=2, variability="none", background=True)
    assert [j.name for j in inst.jobs] == ["j0", "j1", "j2", "bg3"]
    assert [j.sizes for j in inst.jobs] == [(1,), (4,), (2,), (1,)] and inst.cluster.split == "equal"
    assert inst.jobs[3].extra.get("tracked") is False and inst.jobs[3].arrival == 500.0
    j = inst.jobs[1]      # 4 GPUs over both nodes: spans nodes, λ = 1.7
    alloc = Allocation(("n0:0", "n0:1", "n1:0", "n1:1"))
    assert duration(j, alloc, inst.cluster) == pytest.approx(4037.0 * pal.BASE_ITER_S["DCGAN"] * 1.7)
    (d / "workload-8.csv").write_text("job_id,num_gpus,submit_time,duration,model\n0,1,0,10,alexnet\n")
    with pytest.raises(InputError) as e:
        pal.load_pal(8, data_dir=tmp_path, nodes=2, gpus_per_node=2, variability="none")
    assert e.value.field == "model"


def test_gavel_philly_vc_format(tmp_path):
    """Gavel's Philly-VC trace format: one VC is chosen (named in the error when several), arrivals start at
    0, jobs larger than the cluster are dropped and counted, each job type priced by Gavel's tables."""
    d = tmp_path / "gavel_philly_vc_traces"
    d.mkdir()
    (d / "philly_vc_traces_seed0.csv").write_text(
        "vc,job_index,job_type,total_steps,arrival_time_s,scale_factor_gpus\n"
        "aa,0,Transformer (batch size 128),95121,10.0,1\n"
        "aa,1,Recommendation (batch size 8192),10000,16.0,2\n"
        "aa,2,Transformer (batch size 128),500,20.0,16\n"
        "bb,0,A3C,100,0.0,1\n")
    with pytest.raises(InputError) as e:
        gavel.load_philly_vc(data_dir=tmp_path)
    assert "aa" in str(e.value) and "bb" in str(e.value)
    inst = gavel.load_philly_vc("aa", "4:0:0", "4", data_dir=tmp_path)
    assert [j.arrival for j in inst.jobs] == [0.0, 6.0] and [j.sizes for j in inst.jobs] == [(1,), (2,)]
    assert inst.extra["source"]["dropped_too_large"] == 1
    assert inst.jobs[0].iterations == 95121


def test_synergy_and_alibaba_compose_with_a_trace_file(tmp_path):
    """Synergy's CPU/memory tables and Alibaba's machine shapes (both shipped) on an instance read from a trace
    in Gavel's format: jobs of a profiled model get ``cpu_mem`` levels, the fair share at speed 1; the jobs move
    onto PAI-shaped nodes of the table's GPU types with their work unchanged."""
    t = tmp_path / "mini.trace"
    t.write_text("ResNet-50 (batch size 64)\tpython3 x\tdir\t-n\t1\t1000\t2\t1\t-1.000000\t0\n"
                 "A3C\tpython3 y\tdir\t-n\t1\t500\t1\t2\t-1.000000\t30\n")
    base = gavel.load_trace(t, "2:2:0", "2")
    s = synergy.attach_cpu_mem(base)
    assert s.jobs[0].cpu_mem is not None and s.jobs[1].cpu_mem is None
    assert s.jobs[0].cpu_mem.speedup(3, 62.5) == 1.0 and s.extra["source"]["cpu_mem_jobs"] == 1
    a = alibaba.load_alibaba(base, 6, seed=2)
    assert len(a.cluster.nodes) == 6 and set(a.cluster.gpu_types) <= {"v100", "v100m32", "p100"}
    assert [j.name for j in a.jobs] == [j.name for j in base.jobs]
    assert all(math.isfinite(j.iterations) and j.iterations > 0 for j in a.jobs)


# ------------------------------------------------------------------ helpers
def _packed(inst, n, gpus_per_node):
    gpus = []
    for node in inst.cluster.nodes:
        for g in node.gpus:
            if len(gpus) < n:
                gpus.append(g.id)
    return Allocation(gpus=tuple(gpus))


def _check_philly_durations(inst, durations, gpus_per_node):
    for j, d in zip(inst.jobs, durations):
        got = duration(j, _packed(inst, j.sizes[0], gpus_per_node), inst.cluster)
        assert got == pytest.approx(d, rel=1e-9), (j.name, j.model, j.sizes)


# ------------------------------------------------------------------ real data
@needs_data
def test_gavel_traces_load():
    for trace in sorted((DATA / "gavel_traces").glob("*.trace")):
        inst = gavel.load_trace(trace, "4:4:4", "4", interference=True)
        assert len(inst.jobs) >= 8 and inst.problem == "preemptive"
        classes = {j.job_class for j in inst.jobs}
        assert set(inst.cluster.interference) <= classes
        assert all(set(row) <= classes for row in inst.cluster.interference.values())
    med = gavel.load_trace(DATA / "gavel_traces" / "medium_test.trace")
    assert len(med.jobs) == 20 and all(j.sizes == (1,) for j in med.jobs)


@needs_data
def test_gavel_philly_vc_loads():
    with pytest.raises(InputError) as e:
        gavel.load_philly_vc(data_dir=DATA)
    assert "6214e9" in str(e.value)
    inst = gavel.load_philly_vc("6214e9", "64:0:0", "8", data_dir=DATA)
    assert len(inst.jobs) == 2000
    assert min(j.arrival for j in inst.jobs) == 0.0
    small = gavel.load_philly_vc("0e4a51", "8:0:0", "8", max_jobs=50, data_dir=DATA)
    assert len(small.jobs) + small.extra["source"]["dropped_too_large"] == 50


@needs_data
def test_philly_full_trace_loads_exactly():
    """Every job of the full trace; durations on the reference allocation equal the trace's
    (load time is measured in benchmarks/bench_core.py)."""
    inst = philly.load_philly(data_dir=DATA, nodes=16, gpus_per_node=8, seed=0)
    assert len(inst.jobs) == 82247
    df = philly.read_trace(data_dir=DATA)
    idx = np.random.default_rng(1).choice(len(df), 200, replace=False)
    sub = [inst.jobs[i] for i in idx]
    for j, d in zip(sub, df["duration"].to_numpy()[idx]):
        got = duration(j, _packed(inst, j.sizes[0], 8), inst.cluster)
        assert got == pytest.approx(d, rel=1e-9)


@needs_data
def test_philly_selection():
    a = philly.load_philly(data_dir=DATA, vc="6c71a0", max_jobs=300, seed=3)
    b = philly.load_philly(data_dir=DATA, vc="6c71a0", max_jobs=300, seed=3)
    assert a.to_dict() == b.to_dict() and len(a.jobs) + a.extra["source"]["dropped_too_large"] == 300
    w = philly.load_philly(data_dir=DATA, vc="6c71a0", start=0, end=86400.0)
    assert max(j.arrival for j in w.jobs) < 86400.0
    with pytest.raises(InputError):
        philly.load_philly(data_dir=DATA, vc="nosuchvc")
    s = philly.load_philly(data_dir=DATA, max_jobs=20, problem="static", nodes=2)
    assert all(j.arrival == 0 for j in s.jobs)


@needs_data
def test_pal_workloads_load_and_price_like_pal():
    files = sorted((DATA / "pal_sia_philly_workloads").glob("workload-*.csv"))
    assert files
    for f in files:
        inst = pal.load_pal(path=f)
        assert len(inst.jobs) == 160 and inst.cluster.split == "equal"
    inst = pal.load_pal(1, data_dir=DATA)
    lam = inst.cluster.locality_penalty
    for j in inst.jobs[:40]:
        n = j.sizes[0]
        alloc = _packed(inst, n, 4)
        gpus = [inst.cluster.gpu[g] for g in alloc.gpus]
        spans = len({g.node for g in gpus}) > 1
        want = j.iterations * pal.BASE_ITER_S[j.model] * max(g.factor(j.job_class) for g in gpus) * (lam if spans else 1)
        assert duration(j, alloc, inst.cluster) == pytest.approx(want, rel=1e-12)


@needs_data
def test_pal_artifact_inputs():
    root = DATA / "pal_sia_philly_workloads"
    csv = root / "artifact_inputs" / "perfvar_seed42_64gpus.csv"
    shipped = pal.sample_variability(64, "artifact")
    assert pal.sample_variability(64, "artifact", artifact_csv=csv) == shipped
    inst = pal.load_pal(1, data_dir=DATA, background=True)
    bg = [j for j in inst.jobs if j.extra.get("tracked") is False]
    assert bg and len(inst.jobs) == 160 + len(bg)


@needs_data
def test_synergy_and_alibaba_compose_with_real_trace():
    base = gavel.load_trace(DATA / "gavel_traces" / "small_test.trace")
    s = synergy.attach_cpu_mem(base)
    assert s.extra["source"]["cpu_mem_jobs"] > 0
    a = alibaba.load_alibaba(base, 6, seed=2)
    assert set(a.cluster.gpu_types) <= {"v100", "v100m32", "p100"}
    assert not math.isnan(sum(j.iterations for j in a.jobs))


def _kinds_argv(data):
    tr = data / "gavel_traces" / "small_test.trace"
    return {
        "static": ["--variability", "0.1", "--cpu-mem", "--ps"],
        "offline": ["--interference", "0.1", "--problem", "preemptive"],
        "gavel": ["--trace", str(tr), "--cluster", "2:2:2", "--gpus-per-server", "2"],
        "gavel-philly-vc": ["--vc", "6214e9", "--max-jobs", "50", "--data-dir", str(data)],
        "philly": ["--max-jobs", "200", "--data-dir", str(data)],
        "pal": ["--workload", "2", "--data-dir", str(data), "--variability", "identity"],
    }


@pytest.mark.skipif(default_data_dir() is None, reason="needs the raw data directory (../shared/data or $JCTLAB_DATA)")
def test_every_make_instance_kind_validates_against_the_exported_schema(tmp_path, capsys):
    """Each builder, through the command line, writes a file the JSON Schema accepts and the reader re-reads."""
    import json

    import jsonschema

    from jctlab.cli import main
    from jctlab.model import load_instance
    from jctlab.schema import instance_schema

    data = default_data_dir()
    schema = instance_schema()
    base = None
    for kind, argv in _kinds_argv(data).items():
        out = tmp_path / f"{kind}.json"
        assert main(["make-instance", kind, *argv, "--out", str(out)]) == 0, capsys.readouterr().err
        jsonschema.validate(json.loads(out.read_text()), schema)
        load_instance(out)
        base = base or out
    for kind in ("synergy", "alibaba"):
        out = tmp_path / f"{kind}.json"
        assert main(["make-instance", kind, "--base", str(tmp_path / "gavel.json"), "--out", str(out)]) == 0
        jsonschema.validate(json.loads(out.read_text()), schema)


@needs_data
def test_pal_profiles_from_the_raw_folder_equal_the_shipped_table():
    raw = pal.read_profiles(DATA / "pal_gpu_variability")
    shipped = load_table("pal_profiles.json")
    assert raw["per_run"] == shipped["per_run"] and raw["per_gpu"] == shipped["per_gpu"]
    a = pal.load_pal(1, data_dir=DATA, variability="identity", seed=3, profiles_dir=DATA / "pal_gpu_variability")
    b = pal.load_pal(1, data_dir=DATA, variability="identity", seed=3)
    assert a.cluster == b.cluster
