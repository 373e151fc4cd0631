"""``jctlab suite build`` and ``jctlab suite check``: compute a suite's references, and verify them.

Build runs, through the evaluation runner itself (resumable, with a progress bar, on any executor), the
suite's reference oracle on every candidate draw and the ``best_of`` policies beside it, then for each
instance: ``opt`` when the best replayed schedule meets the largest proven bound (relative gap <= 1e-6),
else ``lb`` (the largest bound whose class covers the instance's) and ``best`` (the best replayed
schedule). A bound above a replayed schedule is an oracle bug: the build fails for that instance and
says so. ``keep = proven`` keeps only the draws whose optimum is proven (the first ``draws`` of them).
A rebuild weighs the suite's previous references of the same instance (same hash) beside its own cells, so it
never loses a higher bound or a better schedule: a previous bound keeps its provenance, a previous schedule
counts only when its shipped file replays to its value.

Check verifies a manifest without trusting it: each instance is remade (file or generator, content hash
compared), each shipped reference schedule replayed to its value, each ``best`` without a schedule
re-simulated when it comes from a policy, every ``lb`` compared with every schedule seen on the instance
(the references' and, with ``--runs``, every valid cell of those run folders), and with ``--reprove``
each ``opt`` proven again by its method.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable

from jctlab import __version__, registry
from jctlab.errors import InputError
from jctlab.model import Instance, load_schedule, save_instance
from jctlab.replay import replay
from jctlab.simulate import simulate

from .cells import CellTask, InstanceSource, cell_key, run_cell
from .executors import make_executor
from .gaps import REL_TOL, wider_or_equal
from .methods import resolve
from .runner import Bar
from .store import CellStore, read_rows
from .suites import Reference, Size, Suite, SuiteInstance, difficulty, instance_hash


@dataclass(frozen=True)
class BuildOptions:
    work: Path
    data_dir: Path | None = None
    executor: str = "local"
    workers: int | None = None
    address: str | None = None
    time_limit: float | None = None
    threads: int | None = None
    progress: bool = True


@dataclass(frozen=True)
class _Candidate:
    family: str
    draw_seed: int
    inst: Instance
    sha: str
    path: Path


def _candidates(suite: Suite, opts: BuildOptions) -> list[_Candidate]:
    """Every family's draws, made before any is written: a generator that refuses its arguments leaves nothing."""
    folder = opts.work / "instances"
    made = [(fam.name, seed, fam.generator.build(seed, f"{fam.name}-s{seed}",
                                                  opts.data_dir if suite.requires_data else None, suite.source))
            for fam in suite.families for seed in fam.seeds]
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for family, seed, inst in made:
        p = folder / f"{family}-s{seed}.json"
        save_instance(inst, p)
        out.append(_Candidate(family, seed, inst, instance_hash(inst), p))
    return out


def build(suite: Suite, opts: BuildOptions) -> Suite:
    """Compute and write the suite's references (and shipped files); returns the new manifest."""
    if suite.requires_data and opts.data_dir is None:
        raise InputError(suite.source, "requires_data",
                         f"suite {suite.name!r} needs the raw data: not found (../shared/data or $JCTLAB_DATA); skipped")
    b = suite.build
    tl = opts.time_limit or b.time_limit_s
    threads = opts.threads or b.threads
    oracle = resolve(b.method)
    policies = [resolve(p) for p in b.best_of]
    cands = _candidates(suite, opts)
    tasks = []
    for c in cands:
        src = InstanceSource(c.sha, str(c.path.resolve()))
        name = c.path.stem
        tasks.append(CellTask(cell_key(c.sha, oracle, b.seed, tl, threads), name, src, oracle, b.seed, tl, threads))
        for m in policies:
            tasks.append(CellTask(cell_key(c.sha, m, c.draw_seed, None, 1), name, src, m, c.draw_seed, None, 1))
    with CellStore(opts.work) as store:
        todo = [t for t in tasks if not store.done(t.key)]
        bar = Bar(len(tasks), len(tasks) - len(todo), opts.progress)
        try:
            make_executor(opts.executor, opts.workers, threads, opts.address).run(
                todo, lambda o: (store.add(o.row, o.schedule), bar.finished(o.row)), bar)
        finally:
            bar.close()
        rows = store.rows
    by_inst: dict[str, list[dict[str, Any]]] = {}
    for t in tasks:
        by_inst.setdefault(t.instance_name, []).append(rows[t.key])
    instances = []
    kept: dict[str, int] = {}
    for c in cands:
        fam = suite.family(c.family)
        if fam.draws is not None and kept.get(c.family, 0) >= fam.draws:
            continue
        got = _assemble(suite, c, by_inst[c.path.stem] + _previous_rows(suite, c, opts.work), tl, threads)
        if got is None or (b.keep == "proven" and got[0].references[0].kind != "opt"):
            print(f"suite build: {c.path.stem} not kept ({'no reference' if got is None else 'optimum not proven'})",
                  file=sys.stderr)
            continue
        instances.append((replace(got[0], draw=kept.get(c.family, 0)), got[1]))
        kept[c.family] = kept.get(c.family, 0) + 1
    new = _ship(suite, instances, opts.work)
    changed = [_signature(i) for i in suite.instances] != [_signature(i) for i in new.instances]
    new = replace(new, version=suite.version + (1 if changed and suite.instances else 0))
    new.save(suite.path)
    return new


RefRows = list[tuple[Reference, dict[str, Any]]]
PREVIOUS = "previous"      # the work folder's sub-folder of the previous references' schedules


def _previous_rows(suite: Suite, c: _Candidate, work: Path) -> list[dict[str, Any]]:
    """The suite's previous references of this draw, as rows beside the build's cells (module docstring): a
    bound row for ``lb`` and ``opt``, a schedule row for a shipped ``best`` or ``opt`` schedule that replays to
    its value (copied into ``work``, where shipping reads the files). Nothing when the instance changed."""
    old = next((si for si in suite.instances if si.name == c.path.stem and si.sha256 == c.sha), None)
    rows: list[dict[str, Any]] = []
    for r in () if old is None else old.references:
        row = {"method": r.method, "kind": PREVIOUS, PREVIOUS: r, "runtime_s": r.runtime_s}
        if r.kind in ("lb", "opt"):
            rows.append({**row, "lower_bound": r.value, "bound_class": r.problem_class})
        src = None if r.schedule is None else suite.folder / r.schedule
        if r.kind in ("best", "opt") and src is not None and src.is_file():
            rep = replay(c.inst, load_schedule(src))
            if rep.valid and abs(rep.objective - r.value) <= REL_TOL * abs(r.value):
                dest = Path(PREVIOUS) / src.name
                (work / PREVIOUS).mkdir(parents=True, exist_ok=True)
                shutil.copyfile(src, work / dest)
                rows.append({**row, "valid": True, "objective": rep.objective, "schedule": str(dest)})
    return rows


def _signature(si: SuiteInstance) -> tuple:
    """What a suite version stands for: the instances and their reference kinds, classes and values
    (a rebuild that only re-times the same references keeps the version)."""
    return si.name, si.sha256, tuple((r.kind, r.problem_class, round(r.value, 9)) for r in si.references)


def _assemble(suite: Suite, c: _Candidate, rows: list[dict[str, Any]], tl: float,
              threads: int) -> tuple[SuiteInstance, RefRows] | None:
    """The instance's references from its build cells, each with the row it came from."""
    problem = c.inst.problem
    bounds = [r for r in rows if r.get("lower_bound") is not None
              and wider_or_equal(r.get("bound_class") or problem, problem)]
    scheds = [r for r in rows if r.get("valid") is True and r.get("objective") is not None]
    lb_row = max(bounds, key=lambda r: r["lower_bound"], default=None)
    # on a tie a policy's schedule: `suite check` re-simulates it where no schedule file is shipped
    best_row = min(scheds, key=lambda r: (r["objective"], r["kind"] != "policy"), default=None)
    name = c.path.stem
    if lb_row is not None and best_row is not None and lb_row["lower_bound"] > best_row["objective"] * (1 + REL_TOL):
        raise InputError(suite.source, name, f"{lb_row['method']} claims the bound {lb_row['lower_bound']!r} above "
                         f"the replayed schedule {best_row['objective']!r} of {best_row['method']}: an oracle bug")

    def ref(kind: str, row: dict[str, Any], value: float, cls: str, sched_row: dict[str, Any] | None) -> Reference:
        """``row`` made the value (for opt: the oracle whose bound proves it); ``sched_row`` has the schedule."""
        solver = row["kind"] == "solver"
        has = sched_row is not None and sched_row.get("schedule")
        file = f"references/{name}.{kind}.json" if has else None
        prev: Reference | None = row.get(PREVIOUS)
        if prev is not None:        # a previous reference kept: its provenance, not this build's
            return replace(prev, kind=kind, value=float(value), problem_class=cls, schedule=file)
        return Reference(kind, float(value), cls, row["method"], tl if solver else None, threads if solver else 1,
                         __version__, row.get("runtime_s"), file)

    refs: RefRows = []
    proven = (lb_row is not None and best_row is not None
              and best_row["objective"] - lb_row["lower_bound"] <= REL_TOL * best_row["objective"])
    if proven:
        # the optimum's method is the method whose bound proves it (meets the best schedule, whoever found it):
        # the suite's oracle when its bound does, so that `suite check --reprove` re-runs the oracle
        oracle = next((r for r in bounds if r["method"] == suite.build.method
                       and best_row["objective"] - r["lower_bound"] <= REL_TOL * best_row["objective"]), lb_row)
        lb_row = oracle
        refs.append((ref("opt", oracle, best_row["objective"], problem, best_row), best_row))
    else:
        if lb_row is not None:
            refs.append((ref("lb", lb_row, lb_row["lower_bound"], lb_row.get("bound_class") or problem, None),
                         lb_row))
        if best_row is not None:
            refs.append((ref("best", best_row, best_row["objective"], problem, best_row), best_row))
    if not refs:
        return None
    prove_s = lb_row.get("runtime_s") if proven and lb_row is not None else None
    if not suite.build.ship_schedules:
        refs = [(replace(r, schedule=None), row) for r, row in refs]
    si = SuiteInstance(name, c.family, 0, c.draw_seed, problem, Size.of(c.inst), c.sha,
                       tuple(r for r, _ in refs), difficulty(proven, prove_s),
                       f"instances/{name}.json" if suite.build.ship_instances else None)
    return si, refs


def _ship(suite: Suite, assembled: list[tuple[SuiteInstance, RefRows]], work: Path) -> Suite:
    """Copy the kept instances and reference schedules into the suite folder (replacing the old ones)."""
    folder = suite.folder
    for sub in ("instances", "references"):
        if (folder / sub).exists():
            shutil.rmtree(folder / sub)
    instances = []
    for si, refs in assembled:
        if si.file is not None:
            (folder / "instances").mkdir(parents=True, exist_ok=True)
            shutil.copyfile(work / "instances" / f"{si.name}.json", folder / si.file)
        for r, row in refs:
            if r.schedule is not None:
                (folder / "references").mkdir(parents=True, exist_ok=True)
                shutil.copyfile(work / row["schedule"], folder / r.schedule)
        instances.append(si)
    return suite.with_instances(tuple(instances))


# ----------------------------------------------------------------------------- check


@dataclass(frozen=True)
class Finding:
    instance: str
    ok: bool
    message: str


def check(suite: Suite, data_dir: Path | None = None, runs: Iterable[Path] = (), reprove: bool = False,
          ) -> list[Finding]:
    """Every rule of the module docstring, one finding per check (``ok`` False for a failure)."""
    out: list[Finding] = []
    if suite.requires_data and data_dir is None:
        return [Finding("*", True, f"skipped: suite {suite.name!r} needs the raw data (../shared/data or $JCTLAB_DATA)")]
    seen: dict[str, list[tuple[float, str]]] = {}
    for run in runs:
        for _, row in read_rows(Path(run) / "cells.jsonl"):
            if row.get("valid") is True and row.get("objective") is not None:
                seen.setdefault(row["instance_sha256"], []).append((float(row["objective"]),
                                                                     f"{run}: {row['method']} seed {row['seed']}"))
    for si in suite.instances:
        try:
            inst = suite.load_instance(si, data_dir)
        except InputError as e:
            out.append(Finding(si.name, False, str(e)))
            continue
        if instance_hash(inst) != si.sha256:
            out.append(Finding(si.name, False, "instance file differs from its sha256"))
            continue
        schedules = list(seen.get(si.sha256, []))
        for r in si.references:
            if r.kind == "lb":
                continue
            value, where = _verify_schedule(suite, si, inst, r, out, reprove)
            if value is not None:
                schedules.append((value, where))
        for r in si.references:
            if r.kind != "lb":
                continue
            bad = [(v, w) for v, w in schedules if r.value > v * (1 + REL_TOL)]
            for v, w in bad:
                out.append(Finding(si.name, False, f"lb {r.value:.10g} is above the schedule {v:.10g} ({w})"))
            if not bad:
                out.append(Finding(si.name, True, f"lb {r.value:.10g} <= {len(schedules)} schedule(s) seen"))
        if reprove and (opt := si.reference("opt")) is not None:
            out.append(_reprove(si, inst, opt))
    return out


def _verify_schedule(suite: Suite, si: SuiteInstance, inst: Instance, r: Reference,
                     out: list[Finding], reprove: bool = False) -> tuple[float | None, str]:
    where = f"{r.kind} reference by {r.method}"
    if r.schedule is not None:
        sched = load_schedule(suite.folder / r.schedule)
        rep = replay(inst, sched)
        value = rep.objective if rep.valid else None
        how = "replayed"
    elif registry.method(r.method) is None and registry.policy_factory(r.method) is not None:
        _, rep = simulate(inst, registry.policy_factory(r.method)(inst, seed=si.seed), method=r.method)
        value, how = rep.objective, "re-simulated"
    else:
        # a best value is only a claim; an optimum without its schedule must be re-proven (--reprove: the re-proof
        # is its check, made after the bounds')
        if not (r.kind == "opt" and reprove):
            out.append(Finding(si.name, r.kind != "opt",
                               f"{r.kind} {r.value:.10g}: no schedule shipped (check it with --reprove)"))
        return None, where
    if value is None:
        out.append(Finding(si.name, False, f"{r.kind} schedule is invalid: {rep.error}"))
    elif abs(value - r.value) > REL_TOL * abs(value):
        out.append(Finding(si.name, False, f"{r.kind} {r.value:.10g} but its schedule {how} gives {value:.10g}"))
    else:
        out.append(Finding(si.name, True, f"{r.kind} {r.value:.10g} {how}"))
    return value, where


def _reprove(si: SuiteInstance, inst: Instance, opt: Reference) -> Finding:
    m = resolve(opt.method)
    task = CellTask("reprove", si.name, InstanceSource(si.sha256), m, si.seed, opt.time_limit_s, opt.threads)
    row = run_cell(task, inst).row
    lb = row.get("lower_bound")
    if row["status"] == "optimal" and lb is not None and abs(lb - opt.value) <= REL_TOL * opt.value:
        return Finding(si.name, True, f"opt {opt.value:.10g} re-proven by {opt.method}")
    if lb is not None and lb >= opt.value * (1 - REL_TOL):
        return Finding(si.name, True, f"opt {opt.value:.10g} re-proven by {opt.method}'s bound {lb:.10g}")
    return Finding(si.name, False, f"opt {opt.value:.10g} not re-proven by {opt.method} in "
                                   f"{opt.time_limit_s} s: status {row['status']}, bound {lb}")
