"""Suites and the gap rules of SPEC §3: manifests, reference choice, ``suite check``."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evaluation.build import BuildOptions, _assemble, _Candidate, build, check
from evaluation.gaps import choose, gap, gap_text
from evaluation.generators import bursty_instance
from evaluation.suites import Reference, load_suite, read_suite
from jctlab.cli import main
from jctlab.errors import InputError

from .eval_helpers import make_tiny_suite, tiny_suite_path


def ref(kind, value, cls):
    return Reference(kind, value, cls, "m", 1.0, 1, "0")


def test_reference_of_a_narrower_class_is_never_used():
    # an offline (non-preemptive) optimum says nothing about a preemptive policy, which may beat it
    refs = (ref("opt", 100.0, "offline"), ref("best", 90.0, "preemptive"))
    r = choose(refs, "preemptive")
    assert r.kind == "best" and r.value == 90.0
    assert choose((ref("opt", 100.0, "offline"),), "preemptive") is None
    # a preemptive bound bounds every narrower class, and the optimum wins over it
    assert choose((ref("lb", 80.0, "preemptive"),), "static").kind == "lb"
    assert choose((ref("opt", 100.0, "offline"), ref("lb", 80.0, "preemptive")), "offline").kind == "opt"


@given(st.lists(st.tuples(st.sampled_from(["opt", "lb", "best"]), st.floats(1.0, 1e6),
                          st.sampled_from(["static", "offline", "preemptive"])), max_size=6),
       st.sampled_from(["static", "offline", "preemptive"]))
def test_chosen_reference_is_the_strongest_usable_one(refs, cell_class):
    rs = [ref(k, v, c) for k, v, c in refs]
    order = ["static", "offline", "preemptive"]
    ok = [r for r in rs if order.index(r.problem_class) >= order.index(cell_class)]
    got = choose(rs, cell_class)
    if not ok:
        assert got is None
        return
    kind = next(k for k in ("opt", "lb", "best") if any(r.kind == k for r in ok))
    assert got.kind == kind and got in ok
    same = [r.value for r in ok if r.kind == kind]
    assert got.value == (max(same) if kind == "lb" else min(same))   # the tightest of its kind


def test_gap_against_a_bound_is_printed_as_a_bound():
    g = gap(110.0, ref("lb", 100.0, "preemptive"))
    assert g.value == pytest.approx(0.10) and g.text == "≤ 10.00 %" and not g.violation
    assert gap(110.0, ref("opt", 100.0, "offline")).text == "10.00 %"
    assert gap(95.0, ref("best", 100.0, "offline")).text == "-5.00 % (best)"
    assert gap(95.0, ref("lb", 100.0, "offline")).violation      # a schedule below a proven bound
    assert gap_text(None, "lb") == "-"


def test_bad_manifest_is_one_line_error(tmp_path, capsys):
    p = tmp_path / "bad.json"
    d = {"format": "jctlab.suite/1", "name": "bad", "version": 1,
         "families": [{"name": "f", "function": "jctlab.generators:static_instance", "seeds": [3]}]}
    p.write_text(json.dumps(d))
    with pytest.raises(InputError, match=r"families\[0\]\.seeds\[0\]: must be in \[10000, "):
        load_suite(str(p))
    assert main(["suite", "check", str(p)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "bad.json" in err and "seeds" in err
    d["families"][0]["seeds"] = [10000]
    d["instances"] = [{"name": "x", "family": "nope"}]
    with pytest.raises(InputError, match=r"instances\[0\]\.family: no family 'nope'"):
        read_suite(d, p)


def test_bursty_instance_is_deterministic_and_bursty():
    a = bursty_instance(gpus=4, nodes=2, jobs=8, bursts=2, seed=10003)
    b = bursty_instance(gpus=4, nodes=2, jobs=8, bursts=2, seed=10003)
    assert a.to_dict() == b.to_dict()
    arr = sorted(j.arrival for j in a.jobs)
    assert arr[3] < 60.0 <= 3600.0 <= arr[4] < 3660.0     # 4 jobs within a minute, the next 4 an hour later


@pytest.fixture(scope="module")
def tiny_suite():
    return tiny_suite_path()


def test_built_suite_has_sound_references(tiny_suite):
    s = load_suite(str(tiny_suite))
    assert len(s.instances) == 5 and {i.problem for i in s.instances} == {"static", "offline", "preemptive"}
    for si in s.instances:
        kinds = [r.kind for r in si.references]
        assert kinds in (["opt"], ["lb", "best"], ["lb"], ["best"])
        if si.problem == "preemptive":
            assert "opt" not in kinds and si.difficulty == "open"   # no exact preemptive oracle
    findings = check(s, reprove=True)
    assert findings and all(f.ok for f in findings), [f.message for f in findings if not f.ok]
    assert sum("re-proven" in f.message for f in findings) == sum(i.reference("opt") is not None for i in s.instances)


def test_an_optimum_shipped_without_its_schedule_is_checked_by_its_re_proof(tiny_suite, tmp_path, capsys):
    """The data suites ship no schedules: an optimum there fails the plain check (it is only a claim) and passes
    with ``--reprove``, whose re-proof is its check (before, it failed either way)."""
    d = json.loads(tiny_suite.read_text())
    for i in d["instances"]:
        for r in i["references"]:
            if r["kind"] == "opt":
                r["schedule"] = None
    bare = tmp_path / "bare.json"
    (tmp_path / "bare").symlink_to(tiny_suite.parent / "tiny")
    d["name"] = "bare"
    bare.write_text(json.dumps(d))
    opts = sum(any(r["kind"] == "opt" for r in i["references"]) for i in d["instances"])
    assert opts >= 1
    assert main(["suite", "check", str(bare)]) == 1
    assert capsys.readouterr().out.count("no schedule shipped (check it with --reprove)") == opts
    assert main(["suite", "check", str(bare), "--reprove", "--verbose"]) == 0
    assert capsys.readouterr().out.count("re-proven") == opts


def test_suite_check_catches_a_doctored_bound(tiny_suite, tmp_path, capsys):
    d = json.loads(tiny_suite.read_text())
    inst = next(i for i in d["instances"] if any(r["kind"] == "lb" for r in i["references"]))
    lb = next(r for r in inst["references"] if r["kind"] == "lb")
    best = next(r for r in inst["references"] if r["kind"] == "best")
    lb["value"] = best["value"] * 1.01          # a bound raised above a known schedule
    doctored = tmp_path / "doctored.json"
    (tmp_path / "doctored").symlink_to(tiny_suite.parent / "tiny")
    d["name"] = "doctored"
    doctored.write_text(json.dumps(d))
    with pytest.raises(InputError, match="lb .* is above best"):    # the manifest reader refuses it...
        load_suite(str(doctored))
    # ...and where the manifest is consistent, replaying the shipped best schedule exposes the bound
    best["value"] *= 1.02
    doctored.write_text(json.dumps(d))
    assert main(["suite", "check", str(doctored)]) == 1
    out = capsys.readouterr().out
    assert f"FAIL {inst['name']}: lb" in out and "is above the schedule" in out


def rebuild_with_a_policy_only(path, work):
    """Rebuild the suite at ``path`` with ``fifo-firstfit`` as its oracle and nothing beside it: its cells have
    schedules no better than the previous references and no bound at all."""
    d = json.loads(path.read_text())
    d["build"].update(method="fifo-firstfit", best_of=[])
    path.write_text(json.dumps(d))
    return build(load_suite(str(path)), BuildOptions(work, executor="inline", progress=False))


def test_a_rebuild_never_loses_a_higher_bound_or_a_better_schedule(tmp_path):
    path = make_tiny_suite(tmp_path / "suite")
    before = load_suite(str(path))
    after = rebuild_with_a_policy_only(path, tmp_path / "rebuild")
    assert after.version == before.version            # the same references: the version stands
    for old, new in zip(before.instances, after.instances):
        assert [(r.kind, r.value, r.method, r.threads, r.jctlab_version) for r in new.references] == \
               [(r.kind, r.value, r.method, r.threads, r.jctlab_version) for r in old.references], old.name
    findings = check(after)
    assert findings and all(f.ok for f in findings), [f.message for f in findings if not f.ok]


def test_a_previous_schedule_that_does_not_replay_to_its_value_is_not_kept(tmp_path):
    path = make_tiny_suite(tmp_path / "suite")
    d = json.loads(path.read_text())
    inst = next(i for i in d["instances"] if [r["kind"] for r in i["references"]] == ["lb", "best"])
    best = inst["references"][1]
    best["value"] *= 0.9999          # the shipped file no longer replays to it (the bound stays below)
    path.write_text(json.dumps(d))
    after = rebuild_with_a_policy_only(path, tmp_path / "rebuild")
    new = next(i for i in after.instances if i.name == inst["name"])
    kept = new.reference("best")
    assert new.reference("lb").value == inst["references"][0]["value"]   # the bound is kept...
    assert kept.method == "fifo-firstfit" and kept.value > best["value"]   # ...the doctored schedule is not
    assert after.version == d["version"] + 1


@pytest.mark.parametrize("solver_objective, expected", [(1000.0, "srtf+pal"), (999.0, "auto")])
def test_on_a_tie_the_best_reference_is_the_policy_that_check_can_simulate_again(tmp_path, solver_objective,
                                                                                   expected):
    suite = load_suite(str(tiny_suite_path()))
    inst = bursty_instance(gpus=2, nodes=1, jobs=4, max_size=2, seed=10000)
    c = _Candidate("queue", 10000, inst, "0" * 64, tmp_path / "queue-s10000.json")
    rows = [{"method": "auto", "kind": "solver", "valid": True, "objective": solver_objective,
             "lower_bound": 900.0, "bound_class": "offline", "runtime_s": 1.0, "schedule": None},
            {"method": "srtf+pal", "kind": "policy", "valid": True, "objective": 1000.0, "runtime_s": 0.0,
             "schedule": None}]
    si, _ = _assemble(suite, c, rows, 5.0, 1)
    assert [r.kind for r in si.references] == ["lb", "best"] and si.reference("best").method == expected


def test_data_suites_skip_with_a_clear_message_without_the_data(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("JCTLAB_DATA", str(tmp_path / "absent"))
    assert main(["evaluate", "--suite", "preemptive-pal", "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert "needs the raw data" in err and err.count("\n") == 1
    assert not (tmp_path / "run").exists()                     # nothing written half-way
    assert main(["suite", "check", "philly-large"]) == 0
    assert "skipped" in capsys.readouterr().out


def test_data_suite_instances_are_remade_to_their_hash():
    from jctlab.loaders import default_data_dir

    data = default_data_dir()
    if data is None:
        pytest.skip("needs the raw data (../shared/data or $JCTLAB_DATA)")
    s = load_suite("preemptive-pal")
    si = s.instances[0]
    inst = s.load_instance(si, data)                           # raises when the hash differs
    assert (len(inst.jobs), len(inst.cluster.gpus)) == (si.size.jobs, si.size.gpus) == (160, 64)
    assert si.file is None and all(r.schedule is None for r in si.references)   # nothing derived is shipped
