"""The command line: verbs, --json output, exit codes, and bad input (one line, exit 2, nothing written)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from jctlab.cli import main
from jctlab.schema import instance_schema, schedule_schema

from .conftest import tiny_dict


def write(path: Path, obj) -> Path:
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_make_instance_simulate_replay_round_trip(tmp_path, capsys):
    inst, sch = tmp_path / "i.json", tmp_path / "s.json"
    assert run(capsys, "make-instance", "offline", "--gpus", 8, "--nodes", 2, "--jobs", 6, "--out", inst)[0] == 0
    code, out, err = run(capsys, "simulate", inst, "--policy", "fifo-firstfit", "--out", sch, "--json")
    assert code == 0
    assert err == ""         # the progress bar is for terminals: nothing on a captured stderr
    sim = json.loads(out)
    code, out, _ = run(capsys, "replay", inst, sch, "--json")
    rep = json.loads(out)
    assert code == 0 and rep["valid"] is True
    assert set(rep) >= {"instance", "method", "status", "valid", "objective", "lower_bound", "runtime_s", "metrics"}
    assert set(rep["metrics"]) >= {"mean_jct", "p99_jct", "makespan", "utilization"}
    assert rep["objective"] == pytest.approx(sim["objective"])
    jsonschema.validate(json.loads(inst.read_text()), instance_schema())
    jsonschema.validate(json.loads(sch.read_text()), schedule_schema())


def test_invalid_schedule_exits_1(tmp_path, capsys):
    inst = write(tmp_path / "i.json", tiny_dict())
    s = {"format": "jctlab.schedule/1", "instance": "tiny", "method": "x",
         "segments": [{"job": "a", "start": 0, "end": None, "gpus": ["n0:0"]},
                      {"job": "b", "start": 5, "end": None, "gpus": ["n0:0"]}]}
    code, out, _ = run(capsys, "replay", inst, write(tmp_path / "s.json", s), "--json")
    assert code == 1 and json.loads(out)["valid"] is False and "hosts job" in json.loads(out)["error"]


def _bad_instance_cases():
    d = tiny_dict(); del d["jobs"][0]["batch"]; yield "missing", d, "jobs[0].batch"
    d = tiny_dict(); d["jobs"][1]["arrival"] = -3; yield "negative", d, "jobs[1].arrival"
    d = tiny_dict(); d["jobs"][0]["sizes"] = [8]; yield "too big", d, "jobs[0].sizes"
    d = tiny_dict(); d["format"] = "jctlab.instance/9"; yield "format", d, "format"
    d = tiny_dict(); d["cluster"]["split"] = "random"; yield "choice", d, "cluster.split"
    d = tiny_dict(); d["jobs"][0]["samples_per_s"] = {"v100": "fast"}; yield "type", d, "jobs[0].samples_per_s.v100"
    yield "malformed", '{"format": "jctlab.instance/1", ', "malformed JSON"


@pytest.mark.parametrize("label, content, field", list(_bad_instance_cases()))
def test_bad_instance_is_one_line_exit_2_and_nothing_written(tmp_path, capsys, label, content, field):
    inst = write(tmp_path / "i.json", content)
    out_file = tmp_path / "out.json"
    code, out, err = run(capsys, "simulate", inst, "--policy", "fifo-firstfit", "--out", out_file)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and str(inst) in err and field in err
    assert not out_file.exists() and out == ""


def test_unknown_gpu_id_is_bad_input(tmp_path, capsys):
    inst = write(tmp_path / "i.json", tiny_dict())
    s = {"format": "jctlab.schedule/1", "instance": "tiny", "segments": [{"job": "a", "start": 0, "gpus": ["n7:0"]}]}
    code, _, err = run(capsys, "replay", inst, write(tmp_path / "s.json", s))
    assert code == 2 and "segments[0].gpus[0]" in err and "unknown GPU id" in err


def test_csv_with_a_missing_column_is_bad_input(tmp_path, capsys):
    csv = write(tmp_path / "w.csv", "job_id,num_gpus,submit_time,model\n0,1,0,vgg19\n")
    out_file = tmp_path / "p.json"
    code, _, err = run(capsys, "make-instance", "pal", "--workload", csv, "--variability", "none", "--out", out_file)
    assert code == 2 and "duration" in err and str(csv) in err and len(err.strip().splitlines()) == 1
    assert not out_file.exists()


@pytest.mark.parametrize("argv, field", [
    (["simulate", "{inst}", "--policy", "nope"], "--policy"),
    (["solve", "{inst}", "--method", "nope"], "--method"),
    (["simulate", "{inst}", "--policy", "fifo-firstfit", "--round", "-1"], "--round"),
    (["simulate", "{inst}", "--policy", "fifo-firstfit", "--bogus", "1"], "--bogus"),
    (["make-instance", "static", "--gpus", "2", "--nodes", "4", "--out", "{out}"], "--gpus"),
    (["replay", "{missing}", "{inst}"], "no such file"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_options_are_one_line_exit_2(tmp_path, capsys, argv, field):
    inst = write(tmp_path / "i.json", tiny_dict())
    subst = {"inst": str(inst), "out": str(tmp_path / "o.json"), "missing": str(tmp_path / "missing.json")}
    code, _, err = run(capsys, *[a.format(**subst) for a in argv])
    assert code == 2 and field in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o.json").exists()


def test_an_unknown_policy_lists_the_families_and_their_parts(tmp_path, capsys):
    # "fifo" alone is a queue without a placement: the error says which queues and placements combine
    inst = write(tmp_path / "i.json", tiny_dict())
    code, _, err = run(capsys, "simulate", inst, "--policy", "fifo")
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "QUEUE+PLACEMENT" in err and "fifo|sjf" in err and "pal" in err and "gavel-max-min-fairness" in err


def test_a_method_refusing_the_instance_names_its_file(tmp_path, capsys):
    inst = write(tmp_path / "i.json", tiny_dict())     # an offline instance; sampling solves static ones
    code, _, err = run(capsys, "solve", inst, "--method", "sampling")
    assert code == 2 and len(err.strip().splitlines()) == 1 and f"{inst}: problem:" in err


def test_schema_verb_prints_valid_json_schemas(capsys):
    for which, fn in (("instance", instance_schema), ("schedule", schedule_schema)):
        code, out, _ = run(capsys, "schema", which)
        assert code == 0 and json.loads(out) == fn()
        jsonschema.Draft202012Validator.check_schema(json.loads(out))


def test_no_traceback_from_the_installed_command(tmp_path):
    bad = write(tmp_path / "i.json", "[1, 2")
    p = subprocess.run([sys.executable, "-m", "jctlab.cli", "replay", str(bad), str(bad)],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_solve_with_bnb_proves_and_says_why_when_it_does_not_apply(tmp_path, capsys):
    inst, out_s = tmp_path / "q.json", tmp_path / "q.opt.json"
    run(capsys, "make-instance", "offline", "--gpus", 4, "--nodes", 2, "--jobs", 6, "--interarrival", 300,
        "--max-size", 4, "--seed", 1, "--out", inst)
    code, out, _ = run(capsys, "solve", inst, "--method", "bnb", "--out", out_s, "--json")
    res = json.loads(out)
    assert code == 0 and res["status"] == "optimal" and res["valid"] is True and out_s.exists()
    assert res["lower_bound"] == pytest.approx(res["objective"], rel=1e-6)
    mk = tmp_path / "m.json"
    run(capsys, "make-instance", "offline", "--gpus", 4, "--nodes", 2, "--jobs", 4, "--objective", "makespan",
        "--out", mk)
    code, out, err = run(capsys, "solve", mk, "--method", "bnb", "--json")
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1
    assert f"{mk}: objective: method bnb minimizes mean_jct or weighted_jct, not makespan" in err


def test_solve_names_the_busy_periods_it_solved_apart(tmp_path, capsys):
    inst = tmp_path / "sparse.json"
    run(capsys, "make-instance", "offline", "--gpus", 4, "--nodes", 2, "--jobs", 8, "--interarrival", 7200,
        "--max-hours", 0.5, "--max-size", 2, "--seed", 0, "--out", inst)
    code, out, _ = run(capsys, "solve", inst, "--method", "cpsat", "--json")
    res = json.loads(out)
    assert code == 0 and res["status"] == "optimal" and res["valid"] is True
    assert len(res["blocks"]) >= 2 and sum(b["jobs"] for b in res["blocks"]) == 8
    code, out, _ = run(capsys, "solve", inst, "--method", "cpsat")
    assert f"blocks: {len(res['blocks'])} busy periods" in out
