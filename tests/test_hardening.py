"""Issue 44, finding by finding: every hostile input gets a clear answer (exit 2, one line naming the file or
flag and field, nothing written), work stays bounded, and the cache returns only what it can check."""

from __future__ import annotations

import json
import logging
import re
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jctlab import limits
from jctlab.cli import main
from jctlab.errors import InputError
from jctlab.generators import offline_instance, static_instance
from jctlab.loaders import pal, philly
from jctlab.model import Instance, load_instance

from .conftest import tiny_dict


def write(path: Path, obj) -> Path:
    path.write_bytes(obj if isinstance(obj, bytes) else (obj if isinstance(obj, str) else json.dumps(obj)).encode())
    return path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def refused(capsys, *argv, names=()):
    """Run ``argv``; it must exit 2 with one stderr line naming each of ``names``, and print nothing."""
    code, out, err = run(capsys, *argv)
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert code == 2 and out == "" and len(lines) == 1 and lines[0].startswith("jctlab: error: "), (code, out, err)
    for n in names:
        assert str(n) in lines[0], (n, lines[0])
    return lines[0]


def raw_instance(tmp_path: Path, replace: dict[str, str], base=None) -> Path:
    """``tiny`` with values spliced in as raw JSON text (numbers Python's json cannot write)."""
    d = base or tiny_dict()
    for i, path in enumerate(replace):
        obj = d
        keys = path.split(".")
        for k in keys[:-1]:
            obj = obj[int(k)] if k.isdigit() else obj[k]
        obj[int(keys[-1]) if keys[-1].isdigit() else keys[-1]] = f"@@{i}@@"
    text = json.dumps(d)
    for i, raw in enumerate(replace.values()):
        text = text.replace(f'"@@{i}@@"', raw)
    return write(tmp_path / "i.json", text)


# ----------------------------------------------------------------------------- tracebacks that became exit 2
@pytest.mark.parametrize("raw", ["1" + "0" * 400, "9" * 5000, "1e400", "NaN", "-Infinity"])
def test_huge_and_non_finite_numbers_name_their_field(tmp_path, capsys, raw):
    inst = raw_instance(tmp_path, {"jobs.0.batch": raw})
    refused(capsys, "simulate", inst, "--policy", "fifo-firstfit", names=(inst, "jobs[0].batch"))


def test_deep_nesting_even_in_an_unknown_field_is_refused_before_parsing(tmp_path, capsys):
    d = tiny_dict()
    d["x_extra"] = "@@0@@"
    inst = write(tmp_path / "i.json", json.dumps(d).replace('"@@0@@"', "[" * 5000 + "]" * 5000))
    refused(capsys, "replay", inst, inst, names=(inst, "nested 5001 levels deep"))
    ok = tiny_dict()
    ok["x_extra"] = {"a": [[[["kept"]]]], "s": "[[[[]]]] {{{{"}
    assert Instance.from_dict(limits.loads(json.dumps(ok), "t")).extra["x_extra"] == ok["x_extra"]


def test_nesting_counts_brackets_outside_strings_only():
    assert limits.nesting(b'[[[[ "]]]" , [[[[1]]]] , "[[[" ]]]]') == 8
    assert limits.nesting(b'{"a": "x\\\\", "b": "\\"[[[", "c": [[]]}') == 3
    assert limits.nesting(b'"[[["') == 0


def test_a_file_over_the_size_limit_is_refused_before_reading(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("JCTLAB_MAX_FILE_MB", "0.01")
    inst = write(tmp_path / "i.json", dict(tiny_dict(), x_pad="x" * 20_000))
    refused(capsys, "replay", inst, inst, names=(inst, "larger than the limit", "JCTLAB_MAX_FILE_MB"))


@pytest.mark.parametrize("raw", ["1e308", "1e10"])
def test_absurd_batch_is_refused_before_any_solver(tmp_path, capsys, raw):
    inst = raw_instance(tmp_path, {"jobs.0.batch": raw})
    refused(capsys, "solve", inst, "--method", "milp-cbc", "--time-limit", "1", names=(inst, "jobs[0].batch", "(0, 1e+09]"))


@pytest.mark.parametrize("argv, flag", [
    (["solve", "{inst}", "--method", "sampling", "--samples", "abc"], "--samples"),
    (["solve", "{inst}", "--method", "sampling", "--fairness", "abc"], "--fairness"),
    (["simulate", "{inst}", "--policy", "las+pal", "--lam", "abc"], "--lam"),
    (["make-instance", "static", "--types", "", "--out", "{out}"], "--types"),
    (["make-instance", "static", "--interference", "inf", "--out", "{out}"], "--interference"),
    (["make-instance", "offline", "--max-hours", "inf", "--out", "{out}"], "--max-hours"),
    (["solve", "{inst}", "--method", "cpsat", "--time-limit", "nan"], "--time-limit"),
    (["solve", "{inst}", "--method", "sampling", "--samples", "1.5"], "--samples"),
    (["solve", "{inst}", "--method", "sampling", "--fairness", "nan"], "--fairness"),
    (["solve", "{inst}", "--method", "sampling", "--fairness", "inf"], "--fairness"),
    (["solve", "{inst}", "--method", "sampling", "--sampler", "bogus"], "--sampler"),
    (["solve", "{inst}", "--method", "sampling", "--temperature", "-1"], "--temperature"),
    (["solve", "{inst}", "--method", "matching", "--market-step", "0"], "--market-step"),
    (["simulate", "{inst}", "--policy", "las+pal", "--lam", "-1"], "--lam"),
    (["make-instance", "static", "--variability", "nan", "--out", "{out}"], "--variability"),
    (["make-instance", "static", "--name", "", "--out", "{out}"], "--name"),
    (["solve", "{inst}", "--method", "cpsat", "--out", ""], "--out"),
    (["solve", "{inst}", "--method", "cpsat", "--seed", "-3"], "--seed"),
    (["simulate", "{inst}", "--policy", "fifo-firstfit", "--round", "inf"], "--round"),
    (["solve", "{inst}", "--method", "cpsat", "--threads", "0"], "--threads"),
])
def test_nonsense_options_name_their_flag(tmp_path, capsys, argv, flag):
    inst = write(tmp_path / "st.json", static_instance(gpus=4, nodes=2, jobs=2, sizes=(1, 2), seed=1).to_dict())
    out = tmp_path / "o.json"
    refused(capsys, *[a.format(inst=inst, out=out) for a in argv], names=(flag,))
    assert not out.exists()


@pytest.mark.parametrize("target", ["dir", "under-file", "no-permission"])
def test_out_is_checked_before_solving(tmp_path, capsys, monkeypatch, target):
    import oracle.methods

    inst = write(tmp_path / "i.json", tiny_dict())
    (tmp_path / "d").mkdir()
    (tmp_path / "f").write_text("x")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    out = {"dir": tmp_path / "d", "under-file": tmp_path / "f" / "o.json", "no-permission": ro / "o.json"}[target]
    if target == "no-permission" and (ro / "probe").exists() is False:
        try:
            (ro / "probe").write_text("x")
            pytest.skip("running as a user who may write anywhere (root)")
        except PermissionError:
            pass
    monkeypatch.setattr(oracle.methods, "dispatch", lambda *a, **k: pytest.fail("solved before --out was checked"))
    refused(capsys, "solve", inst, "--method", "cpsat", "--out", out, names=("--out",))


# ----------------------------------------------------------------------------- nonsense that was accepted
@pytest.mark.parametrize("path, raw, field", [
    ("jobs.0.comm_mb", "false", "jobs[0].comm_mb"), ("cluster.interference", "[]", "cluster.interference"),
    ("cluster.interference", '""', "cluster.interference"), ("cluster.interference", "0", "cluster.interference"),
    ("cluster.nodes.0.gpus.0.variability", "[]", "cluster.nodes[0].gpus[0].variability"),
    ("cluster.nodes.0.gpus.0.variability", "0", "cluster.nodes[0].gpus[0].variability"),
    ("jobs.0.measured", '""', "jobs[0].measured"), ("jobs.0.measured", "[]", "jobs[0].measured"),
    ("jobs.0.weight", "true", "jobs[0].weight"), ("jobs.0.sizes.0", '"2"', "jobs[0].sizes[0]"),
])
def test_falsy_values_of_the_wrong_type_are_errors_not_defaults(tmp_path, capsys, path, raw, field):
    inst = raw_instance(tmp_path, {path: raw})
    refused(capsys, "simulate", inst, "--policy", "fifo-firstfit", names=(inst, f"{field}: expected"))


def test_null_keeps_its_documented_default(tmp_path, capsys):
    d = tiny_dict()
    d["jobs"][0]["comm_mb"] = None
    d["cluster"]["interference"] = None
    d["cluster"]["nodes"][0]["gpus"][0]["variability"] = None
    inst = Instance.from_dict(d)
    assert inst.jobs[0].comm_mb == 0.0 and inst.cluster.interference == {}


def test_ps_nodes_of_the_wrong_type_in_a_schedule(tmp_path, capsys):
    inst = write(tmp_path / "i.json", tiny_dict())
    for raw in ("{}", "0", '""'):
        s = {"format": "jctlab.schedule/1", "instance": "tiny", "segments": [
            {"job": "a", "start": 0, "gpus": ["n0:0"], "ps_nodes": "@@"}, {"job": "b", "start": 5, "gpus": ["n0:1"]}]}
        sched = write(tmp_path / "s.json", json.dumps(s).replace('"@@"', raw))
        refused(capsys, "replay", inst, sched, names=(sched, "segments[0].ps_nodes"))


def test_a_last_segment_ending_after_its_job_completes_is_invalid(tmp_path, capsys):
    inst = write(tmp_path / "i.json", dict(tiny_dict(), problem="preemptive"))
    s = {"format": "jctlab.schedule/1", "instance": "tiny", "segments": [
        {"job": "a", "start": 0, "end": 1e6, "gpus": ["n0:0"]}, {"job": "b", "start": 5, "end": None, "gpus": ["n0:1"]}]}
    code, out, _ = run(capsys, "replay", inst, write(tmp_path / "s.json", s), "--json")
    assert code == 1 and "before its segment 0 ends" in json.loads(out)["error"]
    s["segments"][0]["end"] = None
    assert run(capsys, "replay", inst, write(tmp_path / "s.json", s))[0] == 0


@pytest.mark.parametrize("method, problem, field", [("brute", "preemptive", "problem"), ("bnb", "static", "problem"),
                                                    ("bnb", "preemptive", "problem")])
def test_methods_refuse_classes_they_do_not_cover(tmp_path, capsys, method, problem, field):
    d = tiny_dict()
    d["problem"] = problem
    if problem == "static":
        d["jobs"][1]["arrival"] = 0.0
    inst = write(tmp_path / "i.json", d)
    refused(capsys, "solve", inst, "--method", method, names=(inst, f"{field}: method {method}"))


def test_max_ps_beyond_what_the_cpus_hold_is_refused(tmp_path, capsys):
    d = offline_instance(gpus=4, nodes=2, jobs=2, ps=True, seed=0).to_dict()
    d["jobs"][1]["ps"]["max_ps"] = 100_000
    inst = write(tmp_path / "i.json", d)
    refused(capsys, "solve", inst, "--method", "cpsat", "--time-limit", "2", names=(inst, "jobs[1].ps.max_ps"))
    d["jobs"][1]["ps"]["max_ps"] = 100
    refused(capsys, "solve", write(tmp_path / "i.json", d), "--method", "cpsat", names=("CPUs hold at most",))


def test_a_subnormal_ps_cpus_loads(tmp_path, capsys):
    """Found by the fuzz (seed 5707): ``ps_cpus`` of 1e-320 is in range (> 0), and the count of servers the CPUs
    hold overflowed in int(inf) while the instance loaded (a traceback). Each node's count is capped first."""
    d = offline_instance(gpus=4, nodes=2, jobs=2, ps=True, seed=0).to_dict()
    d["jobs"][1]["ps"]["ps_cpus"] = 1e-320
    inst = write(tmp_path / "i.json", d)
    assert load_instance(inst).jobs[1].ps.ps_cpus == 1e-320
    assert main(["solve", str(inst), "--method", "cpsat", "--time-limit", "2"]) == 0
    capsys.readouterr()


# ----------------------------------------------------------------------------- simulator work
@pytest.mark.parametrize("restart, rnd, field", [(1e8, None, "cluster.restart_s"), (1e12, None, "cluster.restart_s"),
                                                (30.0, "1e-9", "restart"), (0.0, "1e-9", "--round")])
def test_simulation_refuses_rounds_that_would_never_end(tmp_path, capsys, restart, rnd, field):
    d = offline_instance(gpus=4, nodes=2, jobs=3, problem="preemptive", seed=1, max_size=2).to_dict()
    d["cluster"]["restart_s"] = restart
    inst = write(tmp_path / "i.json", d)
    t0 = time.perf_counter()
    refused(capsys, "simulate", inst, "--policy", "las+pal", *(["--round", rnd] if rnd else []), names=(field,))
    assert time.perf_counter() - t0 < 5


def test_long_restarts_within_the_limit_still_simulate(tmp_path, capsys):
    d = offline_instance(gpus=4, nodes=2, jobs=3, problem="preemptive", seed=1, max_size=2).to_dict()
    d["cluster"]["restart_s"] = 360.0 * 500
    inst = write(tmp_path / "i.json", d)
    code, out, _ = run(capsys, "simulate", inst, "--policy", "las+pal", "--json")
    assert code == 0 and json.loads(out)["valid"]


# ----------------------------------------------------------------------------- the cache
def _solve_json(capsys, inst, db):
    code, out, err = run(capsys, "solve", inst, "--method", "brute", "--cache", db, "--json")
    assert code == 0, err
    return json.loads(out), err


def _edit(db, **changes):
    con = sqlite3.connect(db)
    (key, p), = con.execute("SELECT key, payload FROM results").fetchall()
    d = json.loads(p)
    d.update(changes)
    con.execute("UPDATE results SET payload = ?", (json.dumps(d),))
    con.commit()
    con.close()


@pytest.mark.parametrize("changes", [
    {"status": "optimal", "lower_bound": 1e9, "schedule": None},
    {"status": "infeasible", "schedule": None, "objective": None, "lower_bound": None},
    {"status": "bound_only", "schedule": None, "objective": None},
    {"lower_bound": 1e9},
])
def test_an_edited_cache_entry_is_recomputed(tmp_path, capsys, changes):
    inst = write(tmp_path / "i.json", static_instance(gpus=3, nodes=1, jobs=2, sizes=(1,), seed=4).to_dict())
    db = tmp_path / "c.sqlite"
    first, _ = _solve_json(capsys, inst, db)
    _edit(db, **changes)
    again, _ = _solve_json(capsys, inst, db)
    assert again["status"] == first["status"] == "optimal" and again["objective"] == pytest.approx(first["objective"])
    assert again["lower_bound"] == pytest.approx(first["lower_bound"])


def test_an_entry_edited_with_its_digest_still_replays(tmp_path):
    """Even a forged digest cannot make the cache return a bound above the schedule's own objective."""
    from oracle import cache as C
    from oracle import methods

    inst = static_instance(gpus=3, nodes=1, jobs=2, sizes=(1,), seed=4)
    db = tmp_path / "c.sqlite"
    a = methods.solve(inst, "brute", cache=str(db))
    con = sqlite3.connect(db)
    (key, p), = con.execute("SELECT key, payload FROM results").fetchall()
    d = json.loads(p)
    d["lower_bound"] = a.objective * 2
    p2 = json.dumps(d)
    con.execute("UPDATE results SET payload = ?, digest = ?", (p2, C._digest(key, p2)))
    con.commit()
    con.close()
    b = methods.solve(inst, "brute", cache=str(db))
    assert b.params.get("cache") is None and b.lower_bound == pytest.approx(a.lower_bound)


@pytest.mark.parametrize("content", ["bytes", "foreign", "old-format"])
def test_an_unusable_cache_file_is_moved_aside_with_a_warning(tmp_path, capsys, content):
    inst = write(tmp_path / "i.json", static_instance(gpus=3, nodes=1, jobs=2, sizes=(1,), seed=4).to_dict())
    db = tmp_path / "c.sqlite"
    if content == "bytes":
        db.write_bytes(bytes(range(256)) * 20)
    else:
        con = sqlite3.connect(db)
        cols = "a, b" if content == "foreign" else "key TEXT PRIMARY KEY, method TEXT, instance TEXT, created REAL, payload TEXT"
        con.execute(f"CREATE TABLE results ({cols})")
        con.commit()
        con.close()
    res, err = _solve_json(capsys, inst, db)
    assert res["status"] == "optimal"
    assert err.startswith("jctlab: warning: ") and "moved aside" in err and len(err.strip().splitlines()) == 1
    assert len(list(tmp_path.glob("c.sqlite.unusable-*"))) == 1
    again, err = _solve_json(capsys, inst, db)
    assert err == "" and again["objective"] == res["objective"]


def test_a_cache_that_is_a_directory_is_bad_input(tmp_path, capsys):
    inst = write(tmp_path / "i.json", tiny_dict())
    (tmp_path / "c").mkdir()
    refused(capsys, "solve", inst, "--method", "brute", "--cache", tmp_path / "c", names=(tmp_path / "c", "directory"))


def test_the_cache_key_changes_with_the_code(monkeypatch):
    from oracle import cache as C

    inst = static_instance(gpus=3, nodes=1, jobs=2, sizes=(1,), seed=4)
    k = C.cache_key(inst, "cpsat", {"seed": 0})
    monkeypatch.setattr(C, "code_hash", lambda: "another version of formulations/")
    assert C.cache_key(inst, "cpsat", {"seed": 0}) != k


def test_code_hash_covers_the_formulations_sources():
    from oracle import cache as C

    root = Path(C.__file__).resolve().parent.parent
    assert (root / "formulations" / "offline" / "cpsat.py").is_file() and "formulations" in C.CODE_PACKAGES
    assert len(C.code_hash()) == 64 and C.code_hash() == C.code_hash()


# ----------------------------------------------------------------------------- real data (synthetic copies)
PHILLY_CSV = """timestamp,duration,num_gpus,gpu_time,cluster
2017-10-01 00:00:00,100,1,100,a
2017-10-01 00:30:00,200,1,200,a
2017-10-01 01:00:00,300,2,600,b
2017-10-01 02:00:00,400,1,400,a
2017-10-02 00:00:00,500,1,500,b
"""


@pytest.mark.parametrize("start, end, arrivals", [
    (None, "7200", [0, 1800, 3600]), ("3600", None, [0, 3600, 82800]), ("1800", "3601", [0, 1800]),
    ("2017-10-01 00:30", "2017-10-01 02:00", [0, 1800]), (100000, None, None),
])
def test_philly_window_in_seconds_and_dates(tmp_path, start, end, arrivals):
    csv = write(tmp_path / "philly.csv", PHILLY_CSV)
    if arrivals is None:
        with pytest.raises(InputError, match="no job left"):
            philly.load_philly(csv, start=start, end=end, nodes=1, gpus_per_node=2)
        return
    inst = philly.load_philly(csv, start=start, end=end, nodes=1, gpus_per_node=2)
    assert [j.arrival for j in inst.jobs] == arrivals


@pytest.mark.parametrize("bad", ["nan", "1e300", "2017-10-01T00:00Z", "soon"])
def test_philly_window_refuses_what_is_neither_seconds_nor_a_date(tmp_path, capsys, bad):
    csv = write(tmp_path / "philly.csv", PHILLY_CSV)
    refused(capsys, "make-instance", "philly", "--trace", csv, "--start", bad, "--nodes", 1, "--gpus-per-node", 2,
            "--out", tmp_path / "o.json", names=("--start",))


def _profiles(folder: Path, names: dict[str, str]) -> Path:
    folder.mkdir()
    for exp, fname in names.items():
        rows = "\n".join(f"{exp},{100 + (i * 37) % 11},c00{i % 3},{i % 5},{i % 4}" for i in range(40))
        (folder / fname).write_text(f"exp,perf,cabinet,node,device\n{rows}\n")
    return folder


WORKLOAD = "job_id,num_gpus,submit_time,duration,model\n0,1,0,1000,resnet50\n1,2,10,500,BERT\n2,1,20,300,PointNet\n"


def test_pal_profiles_of_any_cluster_are_read_by_their_exp_column(tmp_path, capsys):
    wl = write(tmp_path / "w.csv", WORKLOAD)
    fr = _profiles(tmp_path / "frontera", {"resnet": "frontera-resnet-agg.csv", "bert": "frontera-bert-agg.csv",
                                           "pagerank": "frontera-pagerank-agg.csv"})
    (fr / "notes.csv").write_text("a,b\n1,2\n")          # a CSV without exp/perf columns is skipped
    out = tmp_path / "p.json"
    code, _, err = run(capsys, "make-instance", "pal", "--workload", wl, "--profiles", fr, "--nodes", 1,
                       "--gpus-per-node", 4, "--out", out)
    assert code == 0, err
    factors = [g["variability"]["A"] for n in json.loads(out.read_text())["cluster"]["nodes"] for g in n["gpus"]]
    pool = pal.read_profiles(fr)["per_run"]["resnet"]
    assert all(f in pool for f in factors) and len(set(pool)) > 1


def test_pal_profiles_name_a_class_that_no_profile_covers(tmp_path, capsys):
    wl = write(tmp_path / "w.csv", WORKLOAD)
    ls6 = _profiles(tmp_path / "ls6", {"resnet": "resnet-ls6-agg.csv"})
    refused(capsys, "make-instance", "pal", "--workload", wl, "--profiles", ls6, "--nodes", 1, "--gpus-per-node", 4,
            "--out", tmp_path / "p.json", names=(ls6, "exp", "class B (bert)"))
    only_a = write(tmp_path / "a.csv", "job_id,num_gpus,submit_time,duration,model\n0,1,0,1000,resnet50\n")
    assert run(capsys, "make-instance", "pal", "--workload", only_a, "--profiles", ls6, "--nodes", 1,
               "--gpus-per-node", 4, "--out", tmp_path / "p.json")[0] == 0


def test_pal_profiles_in_two_files_are_ambiguous(tmp_path):
    fr = _profiles(tmp_path / "x", {"resnet": "a.csv"})
    (fr / "b.csv").write_text((fr / "a.csv").read_text())
    with pytest.raises(InputError, match="also in"):
        pal.read_profiles(fr)


# ----------------------------------------------------------------------------- messages
def test_hint_errors_name_the_hint_file(tmp_path, capsys):
    inst = write(tmp_path / "i.json", tiny_dict())
    hint = write(tmp_path / "h.json", {"format": "jctlab.schedule/1", "instance": "tiny", "segments": [
        {"job": "zz", "start": 0, "gpus": ["n0:0"]}]})
    refused(capsys, "solve", inst, "--method", "cpsat", "--hint", hint, names=(hint, "segments[0].job"))


@pytest.mark.parametrize("flag, value", [("--restart", "-5"), ("--locality-penalty", "0.5")])
def test_loader_option_errors_name_the_flag_not_the_csv(tmp_path, capsys, flag, value):
    wl = write(tmp_path / "w.csv", WORKLOAD)
    line = refused(capsys, "make-instance", "pal", "--workload", wl, "--variability", "none", flag, value,
                   "--out", tmp_path / "p.json", names=(flag,))
    assert str(wl) not in line


def test_schema_accepts_json_like_every_verb(capsys):
    code, out, _ = run(capsys, "schema", "instance", "--json")
    assert code == 0 and json.loads(out)["title"].startswith("jctlab instance")


def test_unknown_cluster_node_and_gpu_fields_are_kept_by_synergy_base(tmp_path, capsys):
    d = tiny_dict()
    d["cluster"]["x_site"] = {"rack": 3}
    d["cluster"]["nodes"][0]["x_label"] = "fast"
    d["cluster"]["nodes"][0]["gpus"][0]["x_serial"] = "A1"
    base, out = write(tmp_path / "b.json", d), tmp_path / "o.json"
    assert run(capsys, "make-instance", "synergy", "--base", base, "--out", out)[0] == 0
    o = json.loads(out.read_text())
    assert o["cluster"]["x_site"] == {"rack": 3} and o["cluster"]["nodes"][0]["x_label"] == "fast"
    assert o["cluster"]["nodes"][0]["gpus"][0]["x_serial"] == "A1"
    assert load_instance(out).to_dict() == o


def test_non_finite_numbers_in_unknown_fields_are_refused(tmp_path, capsys):
    d = tiny_dict()
    d["x_extra"] = {"a": "@@"}
    inst = write(tmp_path / "i.json", json.dumps(d).replace('"@@"', "[1, NaN]"))
    refused(capsys, "replay", inst, inst, names=(inst, "x_extra.a[1]"))


def test_library_warnings_are_one_line_on_the_cli_stderr(capsys):
    assert main(["schema", "schedule"]) == 0
    logging.getLogger("jctlab.cache").warning("probe %s", 1)
    assert capsys.readouterr().err == "jctlab: warning: probe 1\n"


def test_spec_lists_the_limits_of_the_code():
    spec = (Path(__file__).resolve().parent.parent / "docs" / "SPEC.md").read_text()
    section = spec[spec.index("## 7. Limits"):]
    for name, rng in limits.TABLE:
        row = next((ln for ln in section.splitlines() if ln.startswith(f"| {name} |")), None)
        assert row is not None, name
        m = re.search(r"([\[(])([-0-9.e+]+), ([-0-9.e+]+)\]", row)
        assert m is not None, row
        assert (m.group(1) == "(") == rng.lo_open and float(m.group(2)) == rng.lo and float(m.group(3)) == rng.hi, row
        assert ("0 or" in row) == rng.zero, row


def test_the_installed_command_answers_hostile_files_in_one_line(tmp_path):
    """Subprocess: a deeply nested file and a 5,000-digit integer, through the real entry point."""
    deep = write(tmp_path / "deep.json", "[" * 100_000 + "]" * 100_000)
    digits = raw_instance(tmp_path, {"jobs.1.iterations": "7" * 5000})
    for f in (deep, digits):
        p = subprocess.run([sys.executable, "-m", "jctlab.cli", "simulate", str(f), "--policy", "fifo-firstfit",
                            "--out", str(tmp_path / "o.json")], capture_output=True, text=True, timeout=120)
        assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1
        assert str(f) in p.stderr and not (tmp_path / "o.json").exists()


def test_far_future_starts_replay_without_floating_point_warnings(tmp_path, capsys):
    """A valid schedule may start a job at 1e300 s: its metrics overflow to inf (null in JSON), silently."""
    import warnings

    from jctlab.metrics import jain

    inst = write(tmp_path / "i.json", tiny_dict())
    s = {"format": "jctlab.schedule/1", "instance": "tiny", "segments": [
        {"job": "a", "start": 0, "gpus": ["n0:0"]}, {"job": "b", "start": 1e300, "gpus": ["n0:1"]}]}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        code, out, err = run(capsys, "replay", inst, write(tmp_path / "s.json", s), "--json")
    assert code == 0 and err == "" and json.loads(out)["valid"] is True
    assert jain([1e300, 1e300]) == 1.0 and jain([1e300, 0.0]) == pytest.approx(0.5)
