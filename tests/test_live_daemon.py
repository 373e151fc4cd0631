"""The schedule daemon: durable state, exactly-once decisions, restarts after kills at random points."""

from __future__ import annotations

import io
import json
import multiprocessing
import os
import random
import signal
import time
from pathlib import Path

import pytest

from jctlab.cli import main
from jctlab.model import Allocation, Instance, Job, Schedule, Segment
from jctlab.replay import replay
from live.daemon import serve
from live.instance import job_fields
from live.readers import read_cluster
from live.state import Work
from live.store import Store

LAB = Path(__file__).resolve().parent.parent / "examples" / "small-lab"
CTX = multiprocessing.get_context("forkserver")
CTX.set_forkserver_preload(["live.daemon"])   # when this test starts the fork server: daemons fork ready
# a search budget in evaluations and a time limit that never binds: the same decisions whatever the load
DAEMON = ["schedule-daemon", "--cluster", str(LAB / "cluster.yaml"), "--method", "none", "--time-limit", "60",
          "--max-evaluations", "400"]


def submit(name: str, t: float, size: int, seconds: float) -> dict:
    return {"id": f"submit-{name}", "type": "submit", "time": t,
            "job": {"name": name, "submit": t, "sizes": size, "work": {"v100": seconds, "p100": 1.7 * seconds}}}


def workload(seed: int, jobs: int = 36) -> list[dict]:
    rng = random.Random(seed)
    t, out = 0.0, []
    for k in range(jobs):
        t += rng.expovariate(1 / 240.0)
        out.append(submit(f"j{k}", round(t, 3), rng.choice([1, 1, 1, 2, 4]), round(rng.lognormvariate(7.5, 0.8), 1)))
    return out


def read_log(path: Path) -> list[dict]:
    """The log's complete lines: a last line without its newline is being written, or was cut short by a kill
    (the restarted daemon truncates it), and is not read yet."""
    if not path.exists():
        return []
    text = path.read_text()
    return [json.loads(line) for line in text[:text.rfind("\n") + 1].splitlines() if line.strip()]


class Cluster:
    """The test's cluster: submissions at their times; a started job completes at its predicted end."""

    def __init__(self, subs: list[dict]):
        self.subs = list(subs)
        self.ends: dict[str, float] = {}
        self.done: set[str] = set()

    def next_event(self) -> dict | None:
        t_sub = self.subs[0]["time"] if self.subs else float("inf")
        running = {j: e for j, e in self.ends.items() if j not in self.done}
        if running and min(running.values()) < t_sub:
            job = min(running, key=lambda j: (running[j], j))
            self.done.add(job)
            return {"id": f"complete-{job}", "type": "complete", "time": running[job], "job": job}
        return self.subs.pop(0) if self.subs else None

    def learn(self, rec: dict) -> None:
        for s in rec["start"]:
            self.ends.setdefault(s["job"], s["end"])


def spawn(args: list[str]):
    """The daemon in a child forked from a clean fork server (no interpreter start-up per restart, and no
    thread of this test process copied): (process, connection to send event lines on)."""
    parent, child = CTX.Pipe()
    proc = CTX.Process(target=serve, args=(args[1:], child))
    proc.start()
    child.close()
    return proc, parent


def kill(proc, conn) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    conn.close()


def wait_for(log: Path, event_id: str, timeout: float = 30.0) -> dict:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        for rec in read_log(log):
            if rec["event"] == event_id:
                return rec
        time.sleep(0.005)
    raise AssertionError(f"event {event_id} never decided")


def drive(tmp: Path, subs: list[dict], kills: int, seed: int, extra: tuple[str, ...] = ()) -> list[dict]:
    """Feed the workload event by event; ``kills`` times, SIGKILL the daemon at a random instant after sending
    an event, restart it, send the event again (and the one before), and go on. ``extra``: daemon options."""
    rng = random.Random(seed)
    log = tmp / "decisions.jsonl"
    args = DAEMON + [*extra, "--state", str(tmp / "state.db"), "--log", str(log)]
    cluster = Cluster(subs)     # completions depend on the decisions: events are made as the run goes
    proc, conn = spawn(args)
    sent: list[dict] = []
    kill_at = set(rng.sample(range(1, 2 * len(subs) - 1), kills))
    k = 0
    try:
        while (ev := cluster.next_event()) is not None:
            k += 1
            conn.send(json.dumps(ev))
            if k in kill_at:
                time.sleep(rng.uniform(0.0, 0.03))
                kill(proc, conn)
                proc, conn = spawn(args)
                if rng.random() < 0.3:     # sometimes killed again while it recovers
                    time.sleep(rng.uniform(0.0, 0.01))
                    kill(proc, conn)
                    proc, conn = spawn(args)
                for again in sent[-1:] + [ev]:        # what it may not have committed; a duplicate is harmless
                    conn.send(json.dumps(again))
            cluster.learn(wait_for(log, ev["id"]))
            sent.append(ev)
        conn.send(None)
        proc.join()
    finally:   # a failed check must not leave a daemon waiting on its pipe (the test process would hang at exit)
        if proc.is_alive():
            kill(proc, conn)
    return read_log(log)


def decisions(log: list[dict]) -> list[tuple]:
    return [(r["seq"], r["event"], r["time"], tuple((s["job"], tuple(s["gpus"])) for s in r["start"]), r["error"])
            for r in log]


def test_killed_20_times_loses_no_job_and_starts_none_twice(tmp_path):
    subs = workload(seed=3)
    (tmp_path / "ref").mkdir()
    (tmp_path / "killed").mkdir()
    ref = drive(tmp_path / "ref", subs, kills=0, seed=0)
    got = drive(tmp_path / "killed", subs, kills=20, seed=11)
    # exactly once: seq 1..n, each event once, and the very decisions of the run that was never killed
    assert [r["seq"] for r in got] == list(range(1, len(got) + 1))
    assert len({r["event"] for r in got}) == len(got)
    assert decisions(got) == decisions(ref)
    started = [s["job"] for r in got for s in r["start"]]
    assert sorted(started) == sorted(e["job"]["name"] for e in subs)       # every job started, none twice
    store = Store(tmp_path / "killed" / "state.db")
    assert store.jobs() == {e["job"]["name"]: "done" for e in subs}         # and every one completed
    store.close()
    # every decision replays: the jobs at their submission, started where and when the log says
    cluster = read_cluster(LAB / "cluster.yaml")
    jobs, segs = [], []
    start = {s["job"]: (r["time"], tuple(s["gpus"])) for r in got for s in r["start"]}
    for e in subs:
        f = job_fields(Work(e["job"]["work"]), cluster.gpu_types)
        jobs.append(Job(e["job"]["name"], e["time"], f["batch"], f["iterations"], f["samples_per_s"], f["comm_mb"],
                        (e["job"]["sizes"],)))
        t, gpus = start[e["job"]["name"]]
        segs.append(Segment(e["job"]["name"], t, None, Allocation(gpus)))
    inst = Instance("kill-test", "offline", "mean_jct", cluster.to_cluster(), tuple(jobs))
    rep = replay(inst, Schedule(inst.name, "daemon", tuple(segs)))
    assert rep.valid, rep.error
    ends = {s["job"]: s["end"] for r in got for s in r["start"]}
    assert all(abs(rep.completion[j] - ends[j]) <= 1e-6 * max(1.0, ends[j]) for j in ends)


def test_killed_with_arrival_prediction_decides_as_if_never_killed(tmp_path):
    """With ``--arrivals`` a decision also depends on the arrival model, which holds each job's work as first
    planned: a restarted daemon reads those samples back from its store instead of drawing them anew from its next
    plans (it did, and held a job the run never killed had started)."""
    subs = workload(seed=3)
    (tmp_path / "ref").mkdir()
    (tmp_path / "killed").mkdir()
    ref = drive(tmp_path / "ref", subs, kills=0, seed=0, extra=("--arrivals",))
    got = drive(tmp_path / "killed", subs, kills=20, seed=11, extra=("--arrivals",))
    assert any(r["plan"]["source"].endswith("+hold") for r in ref)       # the model does decide here
    assert [r["seq"] for r in got] == list(range(1, len(got) + 1))
    assert decisions(got) == decisions(ref)
    store = Store(tmp_path / "killed" / "state.db")
    assert {s.name for s in store.samples()} == {e["job"]["name"] for e in subs}
    store.close()


def test_a_state_file_from_before_the_samples_table_opens_and_gets_it(tmp_path, monkeypatch):
    state, log = tmp_path / "s.db", tmp_path / "d.jsonl"
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(submit("a", 0, 1, 600)) + "\n"))
    assert main(DAEMON + ["--state", str(state), "--log", str(log)]) == 0
    store = Store(state)
    store.db.execute("DROP TABLE samples")       # as a file of the previous version has it
    store.close()
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(submit("b", 10, 1, 600)) + "\n"))
    assert main(DAEMON + ["--arrivals", "--state", str(state), "--log", str(log)]) == 0
    assert [r["event"] for r in read_log(log)] == ["submit-a", "submit-b"]
    store = Store(state)
    # a ran without --arrivals: its sample comes from its record at the restart, and is stored from then on
    assert [s.name for s in store.samples()] == ["a", "b"]
    store.close()


@pytest.mark.parametrize("flag", ["--state", "--log", "--bindings-dir"])
def test_outputs_under_a_file_are_refused_before_anything_is_written(tmp_path, monkeypatch, capsys, flag):
    """Found by the fuzz run (seed 5505, once its case generator put the bad --out where it meant to): these were
    tracebacks, after the state file had been created."""
    (tmp_path / "f").write_text("")
    paths = {"--state": tmp_path / "s.db", "--log": tmp_path / "d.jsonl", "--bindings-dir": tmp_path / "b"}
    paths[flag] = tmp_path / "f" / "x"
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(submit("a", 0, 1, 600)) + "\n"))
    assert main(DAEMON + [a for k, v in paths.items() for a in (k, str(v))]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag in err[0] and "is a file, not a folder" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f"]


def test_new_folders_for_the_daemons_files_are_made(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(submit("a", 0, 1, 600)) + "\n"))
    new = tmp_path / "new"
    assert main(DAEMON + ["--state", str(new / "s" / "s.db"), "--log", str(new / "l" / "d.jsonl"),
                          "--bindings-dir", str(new / "b")]) == 0
    assert [r["event"] for r in read_log(new / "l" / "d.jsonl")] == ["submit-a"]
    assert (new / "b" / "00000001.json").is_file() and (new / "s" / "s.db").is_file()


def test_duplicates_rejections_and_a_half_written_log_line(tmp_path, monkeypatch, capsys):
    log, state = tmp_path / "d.jsonl", tmp_path / "s.db"
    evs = [submit("a", 0, 1, 600), submit("a", 0, 1, 600),                                     # same id twice
           {"id": "x1", "type": "complete", "time": -5, "job": "a"},                            # time goes back
           {"id": "x2", "type": "complete", "time": 10, "job": "nobody"},                       # unknown job
           {"id": "x3", "type": "revise", "time": 20, "job": "a", "remaining_s": 100},
           "not json", '{"id": "x4", "time": ' + "9" * 5000 + "}"]   # beyond int()'s digits (fuzz seed 5504)
    lines = "\n".join(e if isinstance(e, str) else json.dumps(e) for e in evs) + "\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(lines))
    assert main(DAEMON + ["--state", str(state), "--log", str(log)]) == 0
    err = capsys.readouterr().err
    assert "stdin line 6: malformed JSON" in err and "stdin line 7: " in err and "Traceback" not in err
    recs = read_log(log)
    assert [r["event"] for r in recs] == ["submit-a", "x1", "x2", "x3"]
    assert recs[0]["start"][0]["job"] == "a"
    assert "before the previous event" in recs[1]["error"] and "neither queued nor running" in recs[2]["error"]
    assert recs[3]["error"] is None and recs[3]["plan"]["running"][0]["end"] == pytest.approx(120.0)
    # killed in the middle of writing a line: the restart cuts it and writes the decision again, once
    text = log.read_text()
    log.write_text(text[: text.rindex('{"seq": 4') + 17])
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    assert main(DAEMON + ["--state", str(state), "--log", str(log)]) == 0
    assert read_log(log) == recs


def test_spool_directory(tmp_path):
    spool = tmp_path / "spool"
    spool.mkdir()
    (spool / "001.json").write_text(json.dumps(submit("a", 0, 2, 600)) + "\n" + json.dumps(submit("b", 5, 1, 60)))
    (spool / "002.json").write_text(json.dumps({"id": "c-a", "type": "complete", "time": 300, "job": "a"}))
    (spool / "003.json").write_text("{broken")
    bind = tmp_path / "bind"
    args = DAEMON + ["--state", str(tmp_path / "s.db"), "--log", str(tmp_path / "d.jsonl"), "--spool", str(spool),
                     "--once", "--bindings-dir", str(bind)]
    assert main(args) == 0
    assert sorted(p.name for p in spool.iterdir()) == ["rejected"]
    assert [p.name for p in (spool / "rejected").iterdir()] == ["003.json"]
    recs = read_log(tmp_path / "d.jsonl")
    assert [r["event"] for r in recs] == ["submit-a", "submit-b", "c-a"]
    files = sorted(bind.iterdir())
    assert [f.name for f in files] == ["00000001.json", "00000002.json"]
    first = json.loads(files[0].read_text())
    assert first["kind"] == "List" and first["items"][0]["metadata"]["name"] == "a"
    # a second run over the same files (as if the deletion had not happened) changes nothing
    (spool / "001.json").write_text(json.dumps(submit("a", 0, 2, 600)))
    assert main(args) == 0
    assert read_log(tmp_path / "d.jsonl") == recs


@pytest.mark.parametrize("allowed", [False, True])
def test_preemption_in_the_daemon_only_when_allowed(tmp_path, monkeypatch, allowed):
    """One GPU: a 60-s job arrives while a 12,000-s one runs. With --preemption the long one is stopped,
    queued again with the work it has left, and restarted once the short one completes; never otherwise."""
    (tmp_path / "c.yaml").write_text("name: one\nrestart_s: 30\nnodes:\n  - name: a\n    cpus: 8\n    mem_gb: 64\n"
                                     "    gpus:\n      - {type: v100, count: 1}\n")
    evs = [submit("long", 0, 1, 12000), submit("short", 100, 1, 60)]
    if allowed:   # otherwise "short" never starts here: the long job keeps the GPU
        evs.append({"id": "c-short", "type": "complete", "time": 160, "job": "short"})
    monkeypatch.setattr("sys.stdin", io.StringIO("\n".join(json.dumps(e) for e in evs) + "\n"))
    log, state = tmp_path / "d.jsonl", tmp_path / "s.db"
    args = ["schedule-daemon", "--cluster", str(tmp_path / "c.yaml"), "--method", "none", "--time-limit", "60",
            "--state", str(state), "--log", str(log)] + (["--preemption"] if allowed else [])
    assert main(args) == 0
    recs = read_log(log)
    assert [[s["job"] for s in r["start"]] for r in recs] == ([["long"], ["short"], ["long"]] if allowed
                                                              else [["long"], []])
    assert [r["preempt"] for r in recs] == ([[], ["long"], []] if allowed else [[], []])
    st = Store(state).state()
    if allowed:   # restarted with 11,900 s of work left, plus the restart
        (r,) = st.running
        assert r.name == "long" and r.preempted == 1 and r.remaining_s == pytest.approx(11900.0 + 30.0)
    else:
        assert [r.name for r in st.running] == ["long"] and [q.name for q in st.queued] == ["short"]
