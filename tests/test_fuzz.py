"""The fuzz suite at CI size (issue 44): hostile instances, schedules, cache files and options through every
core verb, in-process for speed, plus a few through the installed command, and a smaller run through the
verbs plug-ins add (evaluate, suite, report, plot, leaderboard, train: suite manifests, run folders,
demonstrations and their options). ``make fuzz`` runs the long version (scripts/fuzz.py, every verb) and
prints the count of each outcome. Derandomized: the same cases on every run.

JCTLAB_FUZZ_EXAMPLES sets the number of in-process core cases (default 400), JCTLAB_FUZZ_PLUGIN_EXAMPLES
that of the plug-in verbs (default 24).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, given, settings

from .fuzzing import CORE_WEIGHTS, EVAL_WEIGHTS, cases, run_and_judge

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


@settings(FUZZ, max_examples=6)
@given(case=cases({"replay": 1, "simulate": 1, "make-instance": 1}))
def test_the_installed_command_too(case):
    o, failures = run_and_judge(case, in_process=False)
    failures = [f for f in failures if f != "over-time" or o.seconds > 30]   # interpreter start-up and imports
    assert not failures, f"{failures}: {case.describe()}\nstderr: {o.stderr[-1500:]}"
