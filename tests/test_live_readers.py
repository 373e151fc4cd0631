"""The live scheduler's readers on the shipped example files, and their errors on bad rows."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from jctlab.cli import main
from jctlab.errors import InputError
from live import kube
from live.instance import LiveInstance
from live.planner import Planner, PlannerConfig
from live.readers import read_cluster, read_queue, read_running
from live.slurm import expand_hostlist, parse_gres, read_sinfo, read_squeue
from live.state import LiveState, Placement, Plan, QueuedJob, Work

EX = Path(__file__).resolve().parent.parent / "examples"
LAB = EX / "small-lab"


def test_small_lab_files():
    c = read_cluster(LAB / "cluster.yaml")
    assert [n.name for n in c.nodes] == ["gpu01", "gpu02", "gpu03"]
    assert [len(n.gpus) for n in c.nodes] == [8, 4, 4]
    assert [g.socket for g in c.nodes[0].gpus] == [0] * 4 + [1] * 4
    assert c.gpu_types == ("p100", "v100") and c.restart_s == 30.0
    q = read_queue(LAB / "queue.csv", c)
    assert len(q) == 10 and len({j.name for j in q}) == 10
    alice = next(j for j in q if j.name == "alice-resnet50")
    assert alice.sizes == (4, 8) and alice.work.model == "ResNet-50 (batch size 64)" and alice.work.iterations == 60000
    erin = next(j for j in q if j.name == "erin-finetune")
    assert erin.work.seconds == {"v100": 14400.0} and erin.work.comm_mb == 50.0 and erin.weight == 2.0
    assert next(j for j in q if j.name == "carol-sweep-1").submit == 1748853600.0   # 2025-06-02T08:40:00Z
    r = read_running(LAB / "running.csv", c)
    assert [j.name for j in r] == ["ivan-resnet18", "judy-lm", "ken-transformer", "leo-debug"]
    assert r[0].gpus == ("gpu01:0", "gpu01:1", "gpu01:2", "gpu01:3") and r[0].remaining_s == 5400.0
    assert r[1].work is None


def test_slurm_files():
    c = read_sinfo(EX / "slurm" / "sinfo.json")
    # gpu04 is drained: no new job may go there
    assert [(n.name, len(n.gpus), n.gpus[0].type) for n in c.nodes] == [("gpu01", 8, "v100"), ("gpu02", 4, "v100"),
                                                                          ("gpu03", 4, "p100")]
    assert c.nodes[1].gpus[0].socket == 0 and c.nodes[0].gpus[0].socket is None   # S:0-1 names no one socket
    assert c.nodes[0].cpus == 48 and c.nodes[0].mem_gb == 384.0
    q, r, now = read_squeue(EX / "slurm" / "squeue.json", c)
    doc = json.loads((EX / "slurm" / "squeue.json").read_text())
    assert now == doc["last_update"]["number"]
    assert [j.name for j in q] == ["4110", "4111", "4112", "4113"]          # 4114 asks for no GPU
    by = {j.name: j for j in q}
    assert by["4110"].sizes == (8,) and by["4110"].work.model == "ResNet-50 (batch size 64)"
    assert by["4112"].work.seconds == {"v100": 1800.0, "p100": 3000.0}      # from the job's comment
    assert by["4113"].work.seconds == {"v100": 480 * 60.0 * 2}              # its time limit x GPUs, typed request
    run = {j.name: j for j in r}
    assert run["4101"].gpus == ("gpu01:0", "gpu01:1", "gpu01:2", "gpu01:3") and run["4101"].remaining_s == 5400
    assert run["4104"].gpus == ("gpu01:4",)
    j4102 = next(j for j in doc["jobs"] if j["job_id"] == 4102)
    assert run["4102"].remaining_s == j4102["end_time"]["number"] - now    # end_time - now without a comment


def test_slurm_strings():
    assert expand_hostlist("gpu[01-03,07],login1") == ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]
    assert parse_gres("tmpsize:7T,gpu:l40s:4(S:0-1)") == [("l40s", 4, "S:0-1")]
    assert parse_gres("gpu:a100:2(IDX:0,2),gpu:v100:1(IDX:4),mps:10") == [("a100", 2, "IDX:0,2"), ("v100", 1, "IDX:4")]
    assert parse_gres("gpu:8") == [("gpu", 8, "")]


def test_bindings_one_pod_per_node():
    c = read_cluster(LAB / "cluster.yaml")
    plan = Plan(0.0, (Placement("a", ("gpu01:4", "gpu01:5"), 0, 10), Placement("b", ("gpu02:3", "gpu03:0"), 0, 10)),
                (), (), (), 0.0, None, "x", "feasible", 0.0, 0.0)
    items = kube.bindings(plan, c, "lab")["items"]
    got = [(i["metadata"]["name"], i["target"]["name"], i["metadata"]["annotations"][kube.GPU_ANNOTATION],
            i["metadata"]["annotations"].get(kube.SOCKET_ANNOTATION)) for i in items]
    assert got == [("a", "gpu01", "4,5", "1"), ("b-0", "gpu02", "3", "0"), ("b-1", "gpu03", "0", None)]
    assert all(i["kind"] == "Binding" and i["metadata"]["namespace"] == "lab" for i in items)


def _copy_lab(tmp_path: Path) -> Path:
    d = tmp_path / "lab"
    shutil.copytree(LAB, d)
    return d


@pytest.mark.parametrize("file,line,new,where", [
    ("queue.csv", 4, "carol-sweep-1,2025-06-02T08:40:00,0,,,1800,3000,,1", "queue.csv: row 4, sizes:"),
    ("queue.csv", 3, "bob-lm,2025-06-02T08:25:00,1|2,LM (batch size 99),40000,,,,1", "queue.csv: row 3, model:"),
    ("queue.csv", 3, "bob-lm,yesterday,1|2,LM (batch size 20),40000,,,,1", "queue.csv: row 3, submit:"),
    ("queue.csv", 5, "carol-sweep-1,2025-06-02T08:40:00,1,,,1800,3000,,1", "queue.csv: row 5, name:"),
    ("queue.csv", 6, "carol-sweep-3,2025-06-02T08:40:00,1,,,,,,1", "queue.csv: row 6, work:"),
    ("queue.csv", 7, "dan,2025-06-02T09:05:00,32,Transformer (batch size 64),30000,,,,1", "queue.csv: row 7, sizes:"),
    ("running.csv", 3, "judy-lm,2025-06-02T07:30:00,2025-06-02T07:40:00,gpu02:0|gpu02:9,1200,,", "running.csv: row 3, gpus:"),
    ("running.csv", 4, "ken,2025-06-02T08:00:00,2025-06-02T08:05:00,gpu01:3,9000,,", "running.csv: row 4, gpus:"),
    ("running.csv", 5, "leo-debug,2025-06-02T09:55:00,2025-06-02T09:58:00,gpu01:4,-5,,", "running.csv: row 5, remaining_s:"),
    ("cluster.yaml", 24, "      - {type: p100, count: 0}", "cluster.yaml: line 24, nodes[2].gpus[0].count:"),
    ("cluster.yaml", 24, "      - {type: p100, count: 4", "cluster.yaml: line 25: malformed YAML"),
])
def test_bad_row_is_one_line_exit_2_nothing_written(tmp_path, capsys, file, line, new, where):
    d = _copy_lab(tmp_path)
    lines = (d / file).read_text().splitlines()
    lines[line - 1] = new
    (d / file).write_text("\n".join(lines) + "\n")
    out, bind = tmp_path / "plan.json", tmp_path / "bind.json"
    rc = main(["schedule", "--cluster", str(d / "cluster.yaml"), "--queue", str(d / "queue.csv"), "--running",
               str(d / "running.csv"), "--method", "none", "--time-limit", "1", "--out", str(out),
               "--bindings", str(bind)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and where in err[0], err
    assert not out.exists() and not bind.exists()


def test_schedule_cli_on_the_examples(tmp_path, capsys):
    out, bind = tmp_path / "plan.json", tmp_path / "bind.json"
    rc = main(["schedule", "--cluster", str(LAB / "cluster.yaml"), "--queue", str(LAB / "queue.csv"), "--running",
               str(LAB / "running.csv"), "--method", "none", "--time-limit", "2", "--out", str(out),
               "--bindings", str(bind), "--json"])
    assert rc == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan == json.loads(out.read_text())
    busy = {g for r in read_running(LAB / "running.csv", read_cluster(LAB / "cluster.yaml")) for g in r.gpus}
    now_gpus = [g for p in plan["start_now"] for g in p["gpus"]]
    assert now_gpus and not busy & set(now_gpus) and len(set(now_gpus)) == len(now_gpus)
    items = json.loads(bind.read_text())["items"]
    assert sorted(f"{i['target']['name']}:{k}" for i in items
                  for k in i["metadata"]["annotations"][kube.GPU_ANNOTATION].split(",")) == sorted(now_gpus)
    rc = main(["schedule", "--slurm-nodes", str(EX / "slurm" / "sinfo.json"), "--slurm-queue",
               str(EX / "slurm" / "squeue.json"), "--method", "none", "--time-limit", "2"])
    text = capsys.readouterr().out
    assert rc == 0 and "START NOW" in text and "4101" in text


def test_qpi_factor_prices_a_job_across_sockets(tmp_path):
    """``qpi_factor`` (SPEC §2) is read from the cluster file and the planner keeps a 2-GPU job on one socket."""
    path = tmp_path / "c.yaml"
    gpus = "".join(f"      - {{type: v100, socket: {k % 2}}}\n" for k in range(4))   # a:0 and a:2 on socket 0
    path.write_text("name: q\nqpi_factor: 1.5\nnodes:\n  - name: a\n    gpus:\n" + gpus)
    cl = read_cluster(path)
    assert cl.qpi_factor == 1.5
    state = LiveState(cl, 0.0, (QueuedJob("j", 0.0, (2,), Work({"v100": 1000.0}, comm_mb=100.0)),), ())
    with Planner(PlannerConfig(method="none")) as planner:
        (p,) = planner.plan(state).start_now
    sockets = {g.socket for g in cl.nodes[0].gpus if f"a:{g.index}" in p.gpus}
    assert len(sockets) == 1 and LiveInstance(state).instance.cluster.qpi_factor == 1.5
    path.write_text(path.read_text().replace("1.5", "0.5"))
    with pytest.raises(Exception, match="qpi_factor"):
        read_cluster(path)


def test_a_prediction_past_the_calendar_is_printed_in_seconds(tmp_path, capsys):
    """An estimate of thousands of years of work (fuzz seed 5401, case 121) ends past 9999-12-31: the table shows
    the end in seconds instead of failing to make a date of it."""
    for name in ("cluster.yaml", "queue.csv"):
        shutil.copy(LAB / name, tmp_path / name)
    text = (LAB / "running.csv").read_text().replace(",5400,", ",6e13,")
    (tmp_path / "running.csv").write_text(text)
    rc = main(["schedule", "--cluster", str(tmp_path / "cluster.yaml"), "--queue", str(tmp_path / "queue.csv"),
               "--running", str(tmp_path / "running.csv"), "--time-limit", "0.5"])
    out = capsys.readouterr().out
    assert rc == 0
    row = next(line for line in out.splitlines() if line.lstrip().startswith("ivan-resnet18"))
    assert row.split()[-1].isdigit() and float(row.split()[-1]) > 2.5e11


def test_date_like_values_in_a_cluster_file_are_text(tmp_path, capsys):
    """Found by the fuzz run (seed 5504): PyYAML built a timestamp of `restart_s: 2025-13-45T99:00:00` and failed
    (month 13) with a traceback before any field was read. A cluster file has no dates: such a value is text, which
    the field's check refuses naming it, and a node may be named like a date."""
    text = (LAB / "cluster.yaml").read_text()
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("restart_s: 30", "restart_s: 2025-13-45T99:00:00"))
    with pytest.raises(InputError, match=r"line \d+, restart_s: must be a number"):
        read_cluster(bad)
    assert main(["schedule", "--cluster", str(bad), "--queue", str(LAB / "queue.csv"), "--time-limit", "1",
                 "--method", "none"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "restart_s" in err
    dated = tmp_path / "dated.yaml"
    dated.write_text(text.replace("name: gpu01", "name: 2025-01-01"))
    assert read_cluster(dated).nodes[0].name == "2025-01-01"
    explicit = tmp_path / "explicit.yaml"
    explicit.write_text(text.replace("restart_s: 30", "restart_s: !!timestamp 2025-13-45"))
    with pytest.raises(InputError, match="malformed YAML"):
        read_cluster(explicit)


@pytest.mark.parametrize("flag", ["--out", "--bindings"])
def test_schedule_outputs_under_a_file_are_refused_before_planning(tmp_path, capsys, flag):
    (tmp_path / "f").write_text("")
    argv = ["schedule", "--cluster", str(LAB / "cluster.yaml"), "--queue", str(LAB / "queue.csv"), "--time-limit", "1",
            "--method", "none", flag, str(tmp_path / "f" / "plan.json")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0] and "is a file, not a folder" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


@pytest.mark.parametrize("doctor, why", [
    (lambda t: t.replace(": 48", ": " + "9" * 5000), "cpus"),     # a 5,000-digit integer (fuzz 5903 #511)
    (lambda t: "[" * 200 + "]" * 200, "nested"),
    (lambda t: t[:-5], "malformed JSON"),
    (lambda t: "[1, 2]", "expected the JSON object"),
])
def test_bad_slurm_json_is_one_line_naming_the_file(tmp_path, capsys, doctor, why):
    bad = tmp_path / "sinfo.json"
    bad.write_text(doctor((EX / "slurm" / "sinfo.json").read_text()))
    rc = main(["schedule", "--slurm-nodes", str(bad), "--slurm-queue", str(EX / "slurm" / "squeue.json"),
               "--method", "none", "--time-limit", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and str(bad) in err[0] and "Traceback" not in err[0], err
    assert why is None or why in err[0]


def test_live_files_with_a_byte_order_mark_read_as_without(tmp_path):
    d = _copy_lab(tmp_path)
    for name in ("queue.csv", "running.csv", "cluster.yaml"):
        (d / name).write_bytes(b"\xef\xbb\xbf" + (LAB / name).read_bytes())     # as spreadsheets save UTF-8
    cluster = read_cluster(d / "cluster.yaml")
    assert cluster == read_cluster(LAB / "cluster.yaml")
    assert read_queue(d / "queue.csv", cluster) == read_queue(LAB / "queue.csv", cluster)
    assert read_running(d / "running.csv", cluster) == read_running(LAB / "running.csv", cluster)


def test_live_files_past_the_size_limit_are_refused_unread(tmp_path, monkeypatch):
    monkeypatch.setenv("JCTLAB_MAX_FILE_MB", "1")
    big = tmp_path / "queue.csv"
    big.write_text((LAB / "queue.csv").read_text() + "#" * (2 * 2**20))
    with pytest.raises(InputError, match="larger than the limit"):
        read_queue(big, read_cluster(LAB / "cluster.yaml"))
