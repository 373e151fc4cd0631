"""Issue 44's rules on what came with the evaluation harness and the RL work: the SPEC v1.1 topology fields
have their ranges (SPEC §7), the simulator's decision cap holds whoever drives it (``run`` or an RL env
stepping ``advance``/``apply``), and the plug-in verbs (evaluate, suite, report, plot, leaderboard, train)
answer bad input with one line and exit 2, writing nothing. Each test is cheap: no training, no solver."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import warnings
from pathlib import Path

import pytest

from jctlab.errors import InputError
from jctlab.generators import offline_instance
from jctlab.model import Instance
from jctlab.policies import FifoFirstFit
from jctlab.schema import instance_schema
from jctlab.model import Allocation
from jctlab.simulate import STALL_ROUNDS, Preempt, PolicyError, Simulator, Start

from .fuzz_cases_eval import RUN, SUITE, eval_files
from .test_hardening import refused, run


def topo() -> dict:
    return offline_instance(gpus=8, nodes=1, jobs=3, max_size=4, seed=7, topology=True).to_dict()


@pytest.mark.parametrize("where, value", [
    ("gpu.socket", -1), ("gpu.socket", 1.5), ("gpu.switch", True), ("gpu.switch", 10**7), ("gpu.socket", "0"),
    ("qpi_factor", 0.5), ("qpi_factor", 1e4), ("qpi_factor", None), ("pcie_interference", -0.1),
    ("pcie_interference", 101), ("pcie_interference", False),
])
def test_topology_fields_have_their_ranges(where, value):
    d = topo()
    if where.startswith("gpu."):
        d["cluster"]["nodes"][0]["gpus"][0][where[4:]] = value
    else:
        d["cluster"][where] = value
    field = where.replace("gpu.", "cluster.nodes[0].gpus[0].") if where.startswith("gpu.") else f"cluster.{where}"
    with pytest.raises(InputError, match=re.escape(field)):
        Instance.from_dict(d)


def test_topology_null_is_none_and_unknown_fields_stay_beside_it():
    d = topo()
    g = d["cluster"]["nodes"][0]["gpus"]
    g[0].update(socket=None, switch=None, rack="r7")
    d["cluster"]["site"] = {"room": 3}
    inst = Instance.from_dict(d)
    assert inst.cluster.gpus[0].socket is None and inst.cluster.gpus[0].extra == {"rack": "r7"}
    back = inst.to_dict()
    assert back["cluster"]["site"] == {"room": 3} and back["cluster"]["qpi_factor"] == d["cluster"]["qpi_factor"]
    assert back["cluster"]["nodes"][0]["gpus"][0] == {"type": g[0]["type"], "rack": "r7"}
    assert back["cluster"]["nodes"][0]["gpus"][1]["switch"] == g[1]["switch"]


def test_schema_holds_the_topology_ranges():
    jsonschema = pytest.importorskip("jsonschema")
    schema = instance_schema()
    jsonschema.validate(topo(), schema)
    for bad in ({"qpi_factor": 0.5}, {"pcie_interference": 101}):
        d = topo()
        d["cluster"].update(bad)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(d, schema)
    d = topo()
    d["cluster"]["nodes"][0]["gpus"][0]["socket"] = -1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(d, schema)


def test_decision_cap_holds_for_a_caller_stepping_advance_and_apply():
    """An RL env drives ``advance``/``apply`` itself: the cap is counted there, not in ``run``."""
    inst = offline_instance(gpus=4, nodes=1, jobs=3, max_size=2, seed=1, problem="preemptive")
    sim = Simulator(inst, FifoFirstFit(inst), round_s=60.0)
    sim.max_decisions = 3
    with pytest.raises(PolicyError, match="never ending"):
        while sim.advance():          # an agent that never starts anything: rounds tick on
            sim.apply([])
    assert sim.decisions == 3


class RestartEvery:
    """One job on GPU 0, stopped and restarted there every ``k`` rounds (never, with k = 0)."""

    def __init__(self, inst: Instance, k: int):
        self.alloc, self.k, self.started = Allocation((inst.cluster.gpus[0].id,)), k, 0.0

    def decide(self, sim: Simulator):
        if 0 in sim.waiting:
            self.started = sim.now
            return [Start(0, self.alloc)]
        if self.k and 0 in sim.running and sim.now - self.started >= self.k * sim.round_s - 1e-9:
            self.started = sim.now
            return [Preempt(0), Start(0, self.alloc)]
        return []


def one_long_job(problem: str = "preemptive", restart_s: float = 5.0) -> Instance:
    """One single-GPU job of about an hour (3,600 or more one-second rounds), restarts of ``restart_s``."""
    return offline_instance(gpus=2, nodes=1, jobs=1, max_size=1, seed=3, problem=problem, restart_s=restart_s,
                            duration_h=(1.0, 1.0), types=("v100",))


def test_a_run_whose_restarts_are_always_cut_short_stops_at_the_stall_watch():
    """Restarted every 3 rounds with restarts of 5: after its first stint the job never progresses."""
    inst = one_long_job()
    sim = Simulator(inst, RestartEvery(inst, 3), round_s=1.0)
    assert sim.stall_rounds == STALL_ROUNDS
    sim.stall_rounds = 3_000
    with pytest.raises(PolicyError, match=r"no job has progressed in 3000 rounds.*restart \(5 s = 5 rounds\)"):
        sim.run()
    assert sim.decisions < 5_000 and sim.engine.progress[0] > 0     # the first stint had no restart


@pytest.mark.parametrize("k", [0, 7])
def test_runs_that_progress_are_not_stopped_by_the_stall_watch(k):
    """Never stopped (no stop banks progress: the look sees the job past its restart), and restarted every 7
    rounds (2 of them progress): both finish, through several looks, with the watch at its smallest."""
    inst = one_long_job()
    sim = Simulator(inst, RestartEvery(inst, k), round_s=1.0)
    sim.stall_rounds = 1_000
    sched, rep = sim.run()
    assert rep.valid and sim.decisions > 3_000
    assert len(sched.segments) == (1 if k == 0 else sim.decisions // k + 1)


@pytest.mark.parametrize("problem, restart_s", [("offline", 5.0), ("preemptive", 0.0)])
def test_the_stall_watch_is_off_where_a_running_job_always_progresses(problem, restart_s):
    inst = one_long_job(problem, restart_s)
    assert Simulator(inst, RestartEvery(inst, 0), round_s=1.0).stall_rounds == 0


# ----------------------------------------------------------------------------- the plug-in verbs


@pytest.fixture
def micro(tmp_path) -> Path:
    """The fuzz suite's micro suite and a run folder of it, in ``tmp_path``."""
    for name, data in eval_files().items():
        p = tmp_path / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)
    return tmp_path


@pytest.mark.parametrize("argv, flag", [
    (["--time-limit", "nan"], "--time-limit"), (["--seeds", "0"], "--seeds"), (["--threads", "0"], "--threads"),
    (["--executor", "local", "--workers", "0"], "--workers"), (["--out", ""], "--out"),
    (["--methods", "sampling[samples=abc]"], "samples"), (["--methods", "sampling[nope=1]"], "nope"),
    (["--methods", "fifo-firstfit", "--baseline", "sjf+pal"], "--baseline"), (["--data-dir", ""], "--data-dir"),
])
def test_evaluate_refuses_bad_options_before_writing(micro, capsys, argv, flag):
    out = micro / "fresh-run"
    args = ["evaluate", "--suite", micro / SUITE, "--executor", "inline", "--no-progress", "--out", out] + argv
    refused(capsys, *args, names=[flag])
    assert not out.exists()


def test_evaluate_out_that_is_a_file_and_report_baseline(micro, capsys):
    refused(capsys, "evaluate", "--suite", micro / SUITE, "--out", micro / SUITE, names=["--out"])
    refused(capsys, "report", micro / RUN, "--baseline", "bogus", names=["--baseline"])
    assert not (micro / RUN / "report.html").exists()


def test_a_doctored_suite_instance_is_refused_by_its_hash(micro, capsys):
    inst = next(micro.glob("suite/micro/instances/*.json"))
    d = json.loads(inst.read_text())
    d["jobs"][0]["iterations"] *= 2
    inst.write_text(json.dumps(d))
    refused(capsys, "evaluate", "--suite", micro / SUITE, "--executor", "inline", "--no-progress",
            "--out", micro / "r", names=[inst.name, "sha256"])
    assert not (micro / "r").exists()
    code, out, _ = run(capsys, "suite", "check", micro / SUITE)
    assert code == 1 and "FAIL" in out


def test_non_finite_generator_arguments_are_refused(micro, capsys):
    text = (micro / SUITE).read_text().replace('"jobs": 2', '"jobs": NaN')
    (micro / SUITE).write_text(text)
    refused(capsys, "suite", "check", micro / SUITE, names=["families[0].kwargs"])


def test_generator_arguments_the_generator_refuses_name_their_field(micro, capsys):
    """Found by the fuzz run (seed 5503, case 1139): a draw without its shipped file is made by its generator, and
    `nodes` < 1 made `suite check` end in the generator's ValueError, a traceback."""
    d = json.loads((micro / SUITE).read_text())
    d["families"][0]["kwargs"]["nodes"] = -1
    for si in d["instances"]:
        si.pop("file", None)
    (micro / SUITE).write_text(json.dumps(d))
    code, out, err = run(capsys, "suite", "check", micro / SUITE)
    assert code == 1 and "Traceback" not in err
    assert "families[0].kwargs" in out and "need gpus >= nodes >= 1" in out
    refused(capsys, "evaluate", "--suite", micro / SUITE, "--executor", "inline", "--no-progress",
            "--out", micro / "r", names=["families[0].kwargs", "nodes"])
    assert not (micro / "r").exists()
    # building it: every draw is made before its work folder is (fuzz seed 5508: it was left behind)
    refused(capsys, "suite", "build", micro / SUITE, "--executor", "inline", "--no-progress", "--work", micro / "w",
            names=["families[0].kwargs"])
    assert not (micro / "w").exists()


def test_edited_run_folders_are_one_line_errors(micro, capsys):
    cells = micro / RUN / "cells.jsonl"
    rows = cells.read_text().splitlines()
    first = json.loads(rows[0])
    # the timing, metric and decision fields too (fuzz seed 5706: a list as latency_p99_ms was a traceback in the
    # report's latency plot)
    for edit in ({"objective": "x"}, {"schedule": "../../../etc/passwd"}, {"jcts": ["a"]}, {"latency_p99_ms": [1]},
                 {"mean_jct": "x"}, {"decisions": 1.5}, {"cell_s": float("inf")}):
        cells.write_text("\n".join([json.dumps({**first, **edit})] + rows[1:]) + "\n")
        refused(capsys, "report", micro / RUN, names=["cells.jsonl", next(iter(edit))])
        # resuming into it is refused before anything is written
        before = {p: p.read_bytes() for p in (micro / RUN).rglob("*") if p.is_file()}
        refused(capsys, "evaluate", "--suite", micro / SUITE, "--executor", "inline", "--no-progress",
                "--out", micro / RUN, names=["cells.jsonl"])
        assert {p: p.read_bytes() for p in (micro / RUN).rglob("*") if p.is_file()} == before
    cells.write_text("\n".join(rows) + "\n")
    (micro / RUN / "run.json").write_text('{"keys": 5}')
    refused(capsys, "report", micro / RUN, names=["run.json", "keys"])


def test_rows_without_a_schedule_field_or_with_absurd_jcts(micro, capsys):
    """Found by the fuzz run (seed 5506): a row without its `schedule` field was a KeyError traceback (it reads as
    null, as rows of older versions may lack a field), and a JCT of 1e300 s overflowed the JCT plot's log axis
    (a RuntimeWarning; drawn at 1e200 s now). A negative JCT is refused."""
    cells = micro / RUN / "cells.jsonl"
    rows = cells.read_text().splitlines()
    first = json.loads(rows[0])
    no_schedule = {k: v for k, v in first.items() if k != "schedule"}
    for row in (no_schedule, {**first, "jcts": [1e300] + (first["jcts"] or [])[1:]}):
        cells.write_text("\n".join([json.dumps(row)] + rows[1:]) + "\n")
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert run(capsys, "report", micro / RUN)[0] == 0
    cells.write_text("\n".join([json.dumps({**first, "jcts": [-1.0]})] + rows[1:]) + "\n")
    refused(capsys, "report", micro / RUN, names=["cells.jsonl", "jcts"])


def test_a_damaged_schedule_of_a_finished_cell_is_refused_before_anything_is_written(micro, capsys):
    """Found by the fuzz run (seed 5501, case 198): `evaluate --report` on a run whose schedule file another program
    damaged rewrote results.csv and printed its tables, then failed in the report. Now refused up front, naming the
    file and what to do; after doing it, the cell runs again."""
    rows = [json.loads(x) for x in (micro / RUN / "cells.jsonl").read_text().splitlines()]
    row = next(r for r in rows if r["schedule"])
    (micro / RUN / row["schedule"]).write_bytes(b'{"instance": "\xff\xfe"}')
    before = {p: p.read_bytes() for p in (micro / RUN).rglob("*") if p.is_file()}
    argv = ["evaluate", "--suite", micro / SUITE, "--executor", "inline", "--no-progress", "--out", micro / RUN,
            "--methods", row["method"]]
    err = refused(capsys, *argv, "--report", names=[Path(row["schedule"]).name, "not UTF-8", row["key"]])
    assert "delete the line" in err
    assert {p: p.read_bytes() for p in (micro / RUN).rglob("*") if p.is_file()} == before
    kept = [json.dumps(r) for r in rows if r["key"] != row["key"]]
    (micro / RUN / "cells.jsonl").write_text("\n".join(kept) + "\n")
    assert run(capsys, *argv, "--report")[0] == 0
    assert json.loads((micro / RUN / row["schedule"]).read_text())["segments"]


def test_plot_checks_the_schedule_against_the_instance_and_writes_atomically(micro, capsys):
    inst = next(micro.glob(f"{RUN}/instances/*.json"))
    sched = next(micro.glob(f"{RUN}/schedules/*.json"))
    other = json.loads(sched.read_text())
    other["segments"][0]["gpus"] = ["nowhere:0"]
    bad = micro / "bad.json"
    bad.write_text(json.dumps(other))
    refused(capsys, "plot", inst, bad, "--out", micro / "g.png", names=["bad.json"])
    late = json.loads(sched.read_text())
    late["claimed"]["objective"] *= 2              # a claim the schedule does not make
    bad.write_text(json.dumps(late))
    refused(capsys, "plot", inst, bad, "--out", micro / "g.png", names=["bad.json", "claimed objective"])
    assert not (micro / "g.png").exists()
    refused(capsys, "plot", inst, sched, "--out", micro / SUITE / "g.png", names=["--out"])
    assert run(capsys, "plot", inst, sched, "--out", micro / "new" / "dir" / "g.svg")[0] == 0
    assert (micro / "new" / "dir" / "g.svg").read_text().lstrip().startswith("<?xml")
    assert not list((micro / "new" / "dir").glob(".*tmp"))


def test_leaderboard_of_a_manifest_path_runs_in_its_own_folder(micro, capsys):
    code, _, _ = run(capsys, "leaderboard", "--suites", micro / SUITE, "--methods", "fifo-firstfit",
                     "--executor", "inline", "--no-progress", "--runs", micro / "lb", "--out", micro / "LB.md")
    assert code == 0 and (micro / "lb" / "micro" / "results.csv").is_file()
    assert "## micro (v1" in (micro / "LB.md").read_text()
    refused(capsys, "leaderboard", "--suites", ",", "--out", micro / "LB2.md", names=["--suites"])


@pytest.mark.parametrize("argv, flag", [
    (["--num-envs", "0"], "--num-envs"), (["--steps", "-1"], "--steps"), (["--rollout-steps", "abc"], "--rollout-steps"),
    (["--steps", "0", "--bc-epochs", "0"], "--steps"), (["--bc-first-seed", "9990"], "--bc-first-seed"),
    (["--generator", "gpus=abc"], "--generator"), (["--generator", "bogus=1"], "--generator"),
    (["--generator", "gpus=1000"], "--generator"), (["--generator", "gpus=4/8,nodes=6"], "--generator"),
    (["--suite", "bogus"], "--suite"), (["--suite", ","], "--suite"),
    (["--seed", "-1"], "--seed"), (["--bc-time-limit", "inf"], "--bc-time-limit"),
])
def test_train_refuses_bad_options_before_making_its_folder(tmp_path, capsys, argv, flag):
    out = tmp_path / "ckpt"
    refused(capsys, "train", "--policy", "ppo", "--out", out, "--steps", "8", "--bc-epochs", "0", *argv, names=[flag])
    assert not out.exists()


def test_train_checks_its_demonstrations_before_making_its_folder(tmp_path, capsys):
    from rl.bc import DATA
    from rl.suites import family

    name = family("small").make(100).name
    demos = tmp_path / "demos" / "demos"
    demos.mkdir(parents=True)
    shutil.copyfile(DATA / "demos" / f"{name}.json", demos / f"{name}.json")
    sched = json.loads((demos / f"{name}.json").read_text())
    sched["segments"] = sched["segments"][1:]           # a job never runs: not a schedule of the instance
    (demos / f"{name}.json").write_text(json.dumps(sched))
    out = tmp_path / "ckpt"
    code, _, err = run(capsys, "train", "--policy", "ppo", "--out", out, "--steps", "8", "--bc-epochs", "1",
                       "--bc-instances", "1", "--bc-first-seed", "100", "--demos", tmp_path / "demos")
    # the demonstrations' progress bar is cleared (carriage returns) before the one error line
    lines = [ln for ln in err.split("\n") if ln.strip()]
    assert code == 2 and len(lines) == 1 and lines[0].rsplit("\r", 1)[-1].startswith("jctlab: error: ")
    assert name in lines[0] and "job j0 has no segment" in lines[0] and not out.exists()


EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "small-lab"


@pytest.mark.parametrize("count", [16_385, 10**400])
def test_live_cluster_beyond_its_size_is_refused_at_once(tmp_path, capsys, count):
    """A cluster file with more GPUs than the live scheduler takes is one line naming the entry, before
    any GPU list is built (a count of 10**400 would otherwise never finish)."""
    text = (EXAMPLE / "cluster.yaml").read_text().replace("{type: p100, count: 4}", f"{{type: p100, count: {count}}}")
    (tmp_path / "c.yaml").write_text(text)
    line = refused(capsys, "schedule", "--cluster", tmp_path / "c.yaml", "--queue", EXAMPLE / "queue.csv",
                   "--time-limit", "1", "--method", "none", "--out", tmp_path / "plan.json",
                   names=("c.yaml", "nodes[2].gpus[0].count"))
    assert "16,384" in line and not (tmp_path / "plan.json").exists()


@pytest.mark.parametrize("flag, value", [("--time-limit", "inf"), ("--time-limit", "1e400"), ("--threads", "0"),
                                         ("--seed", "-1"), ("--max-oracle-jobs", "abc"), ("--poll", "nan")])
def test_live_daemon_flags_and_bad_cluster_leave_no_state(tmp_path, capsys, flag, value):
    """Bad options, and a cluster file that does not parse, exit 2 before a state file is created."""
    (tmp_path / "spool").mkdir()
    state = tmp_path / "s.db"
    refused(capsys, "schedule-daemon", "--state", state, "--cluster", EXAMPLE / "cluster.yaml", "--spool",
            tmp_path / "spool", "--once", flag, value, names=(flag,))
    (tmp_path / "bad.yaml").write_text("nodes: [")
    refused(capsys, "schedule-daemon", "--state", state, "--cluster", tmp_path / "bad.yaml", "--spool",
            tmp_path / "spool", "--once", names=("bad.yaml",))
    assert not state.exists() and not list(tmp_path.glob("s.db*"))


@pytest.mark.parametrize("extra, field", [
    (None, "malformed JSON"), ("header", "format"),
    ('{"family": "small", "seed": 5, "actions": [99999], "labels": [0], "returns": [0]}', "does not replay"),
    ('{"family": "small", "seed": 95000, "actions": [1], "labels": [0], "returns": [0]}', "line 2"),
    ('{"family": "small", "seed": 5, "actions": "x"}', "line 2"),
])
def test_train_refuses_a_bad_dagger_file_before_making_its_folder(tmp_path, capsys, extra, field):
    from rl.dagger import FORMAT
    from rl.observe import EnvConfig

    head = json.dumps({"format": FORMAT, "env": dataclasses.asdict(EnvConfig())})
    text = "garbage{" if extra is None else (json.dumps({"format": "x"}) if extra == "header" else f"{head}\n{extra}")
    (tmp_path / "d.jsonl").write_text(text + "\n")
    out = tmp_path / "ckpt"
    code, _, err = run(capsys, "train", "--policy", "hrl", "--out", out, "--steps", "0", "--bc-epochs", "1",
                       "--bc-instances", "1", "--dagger", tmp_path / "d.jsonl")
    lines = [ln for ln in err.split("\n") if ln.strip()]
    assert code == 2 and len(lines) == 1, err
    last = lines[0].rsplit("\r", 1)[-1]
    assert last.startswith("jctlab: error: ") and "d.jsonl" in last and field in last and not out.exists(), last
