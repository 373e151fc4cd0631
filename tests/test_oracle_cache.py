"""The SQLite result cache: hits without solving, corrupted entries recomputed, concurrent writers."""

from __future__ import annotations

import math
import sqlite3
import threading

import pytest

from jctlab.generators import static_instance
from oracle import cache as cache_mod
from oracle import methods


@pytest.fixture
def inst():
    return static_instance(gpus=4, nodes=2, jobs=2, sizes=(1, 2), seed=11, variability=0.05)


def test_hit_returns_same_result_without_solving(inst, tmp_path, monkeypatch) -> None:
    db = tmp_path / "c.sqlite"
    a = methods.solve(inst, method="cpsat", cache=str(db))
    calls = []
    monkeypatch.setattr(methods, "dispatch", lambda *a, **k: calls.append(1))
    b = methods.solve(inst, method="cpsat", cache=str(db))
    assert not calls
    assert b.params.get("cache") == "hit"
    assert b.schedule.to_dict() == a.schedule.to_dict()
    assert (b.objective, b.lower_bound, b.status) == (a.objective, a.lower_bound, a.status)


def test_key_depends_on_method_params_and_instance(inst) -> None:
    k = cache_mod.cache_key(inst, "cpsat", {"seed": 0})
    assert k != cache_mod.cache_key(inst, "milp", {"seed": 0})
    assert k != cache_mod.cache_key(inst, "cpsat", {"seed": 1})
    other = static_instance(gpus=4, nodes=2, jobs=2, sizes=(1, 2), seed=12, variability=0.05)
    assert k != cache_mod.cache_key(other, "cpsat", {"seed": 0})


@pytest.mark.parametrize("corruption", ["not json", "objective"])
def test_corrupted_entry_is_recomputed(inst, tmp_path, corruption: str) -> None:
    db = tmp_path / "c.sqlite"
    a = methods.solve(inst, method="cpsat", cache=str(db))
    con = sqlite3.connect(db)
    if corruption == "not json":
        con.execute("UPDATE results SET payload = '{broken'")
    else:  # a schedule that does not replay to its stored objective
        import json

        (p,) = con.execute("SELECT payload FROM results").fetchone()
        d = json.loads(p)
        d["objective"] = d["objective"] * 0.5
        con.execute("UPDATE results SET payload = ?", (json.dumps(d),))
    con.commit()
    con.close()
    b = methods.solve(inst, method="cpsat", cache=str(db))
    assert b.params.get("cache") is None  # recomputed
    assert b.objective == pytest.approx(a.objective, rel=1e-9)
    c = methods.solve(inst, method="cpsat", cache=str(db))
    assert c.params.get("cache") == "hit"


def test_concurrent_writers_lose_nothing(tmp_path) -> None:
    db = tmp_path / "c.sqlite"
    insts = [static_instance(gpus=3, nodes=1, jobs=2, sizes=(1,), seed=s) for s in range(6)]
    errors = []

    def work(i):
        try:
            methods.solve(insts[i], method="brute", cache=str(db))
        except Exception as e:  # pragma: no cover
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors
    assert len(cache_mod.Cache(db)) == 6


def test_default_path_from_env(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("JCTLAB_CACHE", str(tmp_path / "x.sqlite"))
    assert cache_mod.resolve(True) == tmp_path / "x.sqlite"
    assert cache_mod.resolve("default") == tmp_path / "x.sqlite"
    assert cache_mod.resolve(None) is None


def test_a_result_with_non_finite_diagnostics_is_stored_and_read_back(inst, tmp_path) -> None:
    """HiGHS reports a MIP gap of inf when it has no incumbent of its own: ``jctlab solve --method milp --cache``
    ended in a traceback storing such a result (fuzz seed 5703, a drawn static instance). The diagnostics are
    stored with the value as null; the result reads back whole."""
    r = methods.solve(inst, method="cpsat")
    odd = r.with_(params={**r.params, "mip_gap": math.inf, "trace": (1.0, math.nan)})
    c = cache_mod.Cache(tmp_path / "c.sqlite")
    key = cache_mod.cache_key(inst, "cpsat", {"time_limit": 1.0}, None)
    c.put(inst, key, "cpsat", odd)
    got = c.get(inst, key)
    assert got is not None
    assert (got.objective, got.lower_bound, got.status) == (r.objective, r.lower_bound, r.status)
    assert got.params["mip_gap"] is None and got.params["trace"] == [1.0, None]
