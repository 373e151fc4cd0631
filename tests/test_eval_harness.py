"""The evaluation runner: replayed cells, resume after a kill, user policies, executors agree."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evaluation.cells import TIMING
from evaluation.methods import resolve, resolve_all
from evaluation.runner import RunConfig, evaluate
from evaluation.store import read_rows
from evaluation.suites import load_suite
from jctlab.errors import InputError

from .eval_helpers import SLOW_POLICY, tiny_suite_path

JCTLAB = [sys.executable, "-m", "jctlab.cli"]


@pytest.fixture(scope="module")
def tiny_suite():
    return tiny_suite_path()


@pytest.fixture(scope="module")
def user_module(tmp_path_factory):
    d = tmp_path_factory.mktemp("usermod")
    (d / "slowpol.py").write_text(SLOW_POLICY)
    sys.path.insert(0, str(d))
    yield d
    sys.path.remove(str(d))


def comparable(run_dir: Path) -> dict[str, dict]:
    """Rows by key without what measures time (runtimes and latencies differ run to run)."""
    rows = {}
    for k, r in read_rows(run_dir / "cells.jsonl"):
        rows[k] = {c: v for c, v in r.items() if c not in TIMING}
    return rows


def run(suite_path, out, methods, executor="inline", seeds=None, **kw):
    suite = load_suite(str(suite_path))
    cfg = RunConfig(suite, resolve_all(methods), out, seeds, 2.0, 1, executor, progress=False,
                    sys_path=tuple(p for p in sys.path if p), **kw)
    return evaluate(cfg)


def test_every_cell_replayed_and_gaps_by_class(tiny_suite, tmp_path):
    t = run(tiny_suite, tmp_path / "r", "auto,fifo-firstfit,srtf+pal,matching")
    assert len(t) == 5 * 4 and t["key"].is_unique
    ok = t[t["valid"] == True]  # noqa: E712
    assert len(ok) >= 9
    # a valid schedule is never below its proven reference, and every gap names its kind
    assert not t["violation"].any()
    assert ((ok["gap"] >= -1e-6) | (ok["ref_kind"] == "best")).all()
    assert (ok["ref_kind"].notna()).all()
    pre = t[(t["class"] == "preemptive") & (t["valid"] == True)]  # noqa: E712
    assert (pre["ref_kind"] != "opt").all() and pre["gap_text"].str.startswith("≤").any()
    # the matching solver does not apply to the offline and preemptive classes: n/a, not an error
    assert set(t.loc[(t["method"] == "matching") & (t["class"] != "static"), "status"]) == {"n/a"}
    # policies carry per-decision latency; the schedule file replays to the row's objective
    pol = ok[ok["kind"] == "policy"]
    assert (pol["decisions"] > 0).all() and (pol["latency_p99_ms"] >= pol["latency_p50_ms"]).all()
    from jctlab.model import load_instance, load_schedule
    from jctlab.replay import replay

    r = ok.iloc[0]
    rep = replay(load_instance(tmp_path / "r" / "instances" / f"{r['instance']}.json"),
                 load_schedule(tmp_path / "r" / r["schedule"]))
    assert rep.valid and rep.objective == pytest.approx(r["objective"], rel=1e-9)


def test_seeds_select_draws_and_are_bounded(tiny_suite, tmp_path):
    t = run(tiny_suite, tmp_path / "s", "fifo-firstfit", seeds=1)
    assert set(t["draw"]) == {0} and len(t) == 4
    with pytest.raises(InputError, match="--seeds"):
        run(tiny_suite, tmp_path / "s2", "fifo-firstfit", seeds=3)


def test_method_names(user_module):
    assert resolve("matching").kind == "solver" and resolve("policy:matching").kind == "policy"
    assert resolve("sampling[samples=8]").options == (("samples", 8),)
    assert resolve("fifo+pal").kind == "policy"
    m = resolve("slowpol:factory[delay=0.01]")
    assert (m.kind, m.source, m.options) == ("policy", "module", (("delay", 0.01),))
    with pytest.raises(InputError, match="unknown method 'nope'"):
        resolve("nope")
    with pytest.raises(InputError, match="given twice"):
        resolve_all("fifo-firstfit,fifo-firstfit")


def test_workers_times_threads_never_above_the_cores():
    from evaluation.executors import LocalExecutor, cores

    assert LocalExecutor(None, 1).workers == cores()
    with pytest.raises(InputError, match="--workers"):
        LocalExecutor(cores() + 1, 1)
    with pytest.raises(InputError, match="--threads"):
        LocalExecutor(None, cores() + 1)


def test_user_policy_and_solver_as_module_factory(tiny_suite, tmp_path, user_module):
    (user_module / "mysolver.py").write_text(
        "from oracle.methods import solve\n\n"
        "def solver(inst, *, time_limit=None, threads=1, seed=0, hint=None):\n"
        "    return solve(inst, 'brute', time_limit=time_limit, threads=threads, seed=seed)\n")
    t = run(tiny_suite, tmp_path / "u", "slowpol:factory[delay=0.001],mysolver:solver,fifo-firstfit")
    mine = t[t["method"] == "slowpol:factory[delay=0.001]"]
    ref = t[t["method"] == "fifo-firstfit"]
    assert (mine["kind"] == "policy").all() and (mine["valid"] == True).sum() >= 4  # noqa: E712
    # the user's policy wraps FIFO first-fit: same schedules, hence same objectives
    ok = mine["valid"] == True  # noqa: E712
    assert list(mine.loc[ok, "objective"]) == list(ref.loc[ok.to_numpy(), "objective"])
    sol = t[t["method"] == "mysolver:solver"]
    assert (sol["kind"] == "solver").all()
    assert (sol.loc[sol["class"] != "preemptive", "status"] == "optimal").all()


@pytest.mark.parametrize("executor", ["inline", "local"])
def test_a_policy_that_never_returns_is_cut_by_the_cell_timeout(tiny_suite, tmp_path, user_module, executor):
    """A user's policy stuck in a loop (a sleep of an hour per decision) ends as a `timeout` row after the
    cell timeout; the other cells run to their ends, and a rerun resumes without running the cut cells again."""
    methods = "slowpol:factory[delay=3600],fifo-firstfit"
    t0 = time.monotonic()
    t = run(tiny_suite, tmp_path / "t", methods, executor, cell_timeout=0.5)
    assert time.monotonic() - t0 < 60
    stuck = t[t["method"] == "slowpol:factory[delay=3600]"]
    assert len(stuck) == 5 and set(stuck["status"]) == {"timeout"} and not stuck["valid"].any()
    assert stuck["error"].str.contains("cell timeout of 0.5 s").all()
    ref = t[t["method"] == "fifo-firstfit"]
    assert (ref["valid"] == True).sum() >= 4  # noqa: E712
    again = run(tiny_suite, tmp_path / "t", methods, executor, cell_timeout=0.5)
    assert list(again["key"]) == list(t["key"]) and set(again.loc[again["method"] == stuck["method"].iloc[0],
                                                                  "status"]) == {"timeout"}


def _cli(suite, out, methods, env):
    return [*JCTLAB, "evaluate", "--suite", str(suite), "--methods", methods, "--out", str(out),
            "--executor", "local", "--workers", "1", "--no-progress"]


def test_resume_after_kill_gives_the_rows_of_a_clean_run(tiny_suite, tmp_path, user_module):
    """A clean run in this process (inline executor) against one run by local worker processes, killed
    mid-way with its workers and started again with the same command: the same rows, once each."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(user_module), os.environ.get("PYTHONPATH", "")]))
    methods = "slowpol:factory[delay=0.03],fifo-firstfit,sjf+pal"
    clean, killed = tmp_path / "clean", tmp_path / "killed"
    run(tiny_suite, clean, methods)
    p = subprocess.Popen(_cli(tiny_suite, killed, methods, env), env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    cells = killed / "cells.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and (not cells.exists() or cells.read_bytes().count(b"\n") < 3):
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGKILL)           # the driver and its workers, mid-run
    p.wait()
    n_before = cells.read_bytes().count(b"\n")
    assert 3 <= n_before < 15, "the run ended before it could be killed mid-way"
    with open(cells, "ab") as f:                # as if killed while writing a line
        f.write(b'{"key": "partial')
    r = subprocess.run(_cli(tiny_suite, killed, methods, env), env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    lines = cells.read_text().splitlines()
    keys = [json.loads(x)["key"] for x in lines]
    assert len(keys) == len(set(keys)) == 15    # nothing lost, nothing duplicated, the partial line cut off
    assert comparable(killed) == comparable(clean)


def test_ray_executor_gives_the_rows_of_local(tiny_suite, tmp_path):
    pytest.importorskip("ray")
    methods = "fifo-firstfit,sjf+pal"
    run(tiny_suite, tmp_path / "i", methods, seeds=1)
    run(tiny_suite, tmp_path / "ray", methods, executor="ray", seeds=1)
    a, b = comparable(tmp_path / "i"), comparable(tmp_path / "ray")
    assert len(a) == 8 and a == b


@pytest.mark.parametrize("doc", ["README.md", "docs/evaluation.md"])
def test_the_documented_user_policy_runs_on_queue_small(tmp_path, doc):
    """The ``mypolicy.py`` block of the README and of docs/evaluation.md, as a user would save it, on the
    suite its comment names: every cell a valid, replayed schedule (jobs larger than a node included)."""
    text = (Path(__file__).resolve().parents[1] / doc).read_text()
    code = text.split("# mypolicy.py", 1)[1].split("```", 1)[0]
    d = tmp_path / "user"
    d.mkdir()
    (d / "mypolicy.py").write_text("# mypolicy.py" + code)
    sys.path.insert(0, str(d))
    try:
        t = run(load_suite("queue-small").path, tmp_path / "q", "mypolicy:factory")
    finally:
        sys.path.remove(str(d))
        sys.modules.pop("mypolicy", None)
    assert len(t) >= 6 and (t["valid"] == True).all(), t[["instance", "status", "error"]]  # noqa: E712
    assert (t["gap"] >= -1e-9).all()
