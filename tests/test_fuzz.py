"""The fuzz suite at CI size (issue 44): hostile instances, schedules, cache files and options through every
core verb, in-process for speed, plus a few through the installed command, and a smaller run through the
verbs plug-ins add (evaluate, suite, report, plot, leaderboard, train: suite manifests, run folders,
demonstrations and their options; schedule and schedule-daemon: cluster, queue and event files). ``make fuzz`` runs the long version (scripts/fuzz.py, every verb) and
prints the count of each outcome. Derandomized: the same cases on every run.

JCTLAB_FUZZ_EXAMPLES sets the number of in-process core cases (default 400), JCTLAB_FUZZ_PLUGIN_EXAMPLES
that of the plug-in verbs (default 24).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, Phase, assume, given, settings

from jctlab.cli import main

from .fuzz_live_states import live_state, plan_problems
from .fuzzing import CORE_WEIGHTS, EVAL_WEIGHTS, LIVE_WEIGHTS, cases, run_and_judge

EXAMPLES = int(os.environ.get("JCTLAB_FUZZ_EXAMPLES", "400"))
PLUGIN_EXAMPLES = int(os.environ.get("JCTLAB_FUZZ_PLUGIN_EXAMPLES", "24"))
FUZZ = settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))


@FUZZ
@given(case=cases(CORE_WEIGHTS))
def test_every_input_gets_a_clear_answer_in_time(case):
    o, failures = run_and_judge(case)
    assert not failures, f"{failures}: {case.describe()}\nstderr: {o.stderr[-1500:]}\n{o.error or ''}"


@settings(FUZZ, max_examples=PLUGIN_EXAMPLES)
@given(case=cases(EVAL_WEIGHTS))
def test_plugin_verbs_answer_hostile_input_too(case):
    o, failures = run_and_judge(case)
    assert not failures, f"{failures}: {case.describe()}\nstderr: {o.stderr[-1500:]}\n{o.error or ''}"


@settings(FUZZ, max_examples=PLUGIN_EXAMPLES)
@given(case=cases(LIVE_WEIGHTS))
def test_the_live_scheduler_answers_hostile_input_too(case):
    o, failures = run_and_judge(case)
    assert not failures, f"{failures}: {case.describe()}\nstderr: {o.stderr[-1500:]}\n{o.error or ''}"


@settings(FUZZ, max_examples=6)
@given(case=cases({"replay": 1, "simulate": 1, "make-instance": 1}))
def test_the_installed_command_too(case):
    o, failures = run_and_judge(case, in_process=False)
    failures = [f for f in failures if f != "over-time" or o.seconds > 30]   # interpreter start-up and imports
    assert not failures, f"{failures}: {case.describe()}\nstderr: {o.stderr[-1500:]}"


@settings(FUZZ, max_examples=8)
@given(state=live_state())
def test_drawn_live_states_are_planned_and_a_broken_plan_is_seen(state):
    """The judge of the drawn live states is not blind: the plan ``schedule`` writes passes it, the same plan
    with a job planned twice (on the same GPUs, at the same time) or left out does not."""
    assume(state.queued)
    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        for name, data in state.files.items():
            (root / name).write_bytes(data)
        with contextlib.redirect_stdout(io.StringIO()):
            code = main(["schedule", "--cluster", str(root / "cluster.yaml"), "--queue", str(root / "queue.csv"),
                         "--running", str(root / "running.csv"), "--time-limit", "1", "--method", "none",
                         "--max-evaluations", "50", "--out", str(root / "plan.json")])
        assert code == 0
        plan = root / "plan.json"
        assert plan_problems(plan, state, preemption=False) == []
        p = json.loads(plan.read_text())
        first = p["start_now"][0] if p["start_now"] else p["later"][0]
        p["later"].append(first)
        plan.write_text(json.dumps(p))
        assert "plan-jobs" in plan_problems(plan, state, preemption=False)
        assert any(x.startswith("plan-gpu-twice") for x in plan_problems(plan, state, preemption=False))
        p["later"].pop()
        (p["start_now"] if p["start_now"] and p["start_now"][0] is first else p["later"]).remove(first)
        plan.write_text(json.dumps(p))
        assert plan_problems(plan, state, preemption=False) == ["plan-jobs"]
