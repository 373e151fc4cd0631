"""Suites: versioned JSON manifests of instances with precomputed references (JSPLIB-style).

A manifest ``evaluation/suites/NAME.json`` (``"format": "jctlab.suite/1"``) describes how its instances
are made (``families``: a generator or loader call and the seeds to draw) and holds what ``jctlab suite
build NAME`` computed for each draw (``instances``): its class, size, content hash, file (when shipped)
and its references. Files sit beside the manifest in ``NAME/instances/`` and ``NAME/references/``.

A reference (SPEC §3) is ``opt`` (a proven optimum of its class, with the schedule that attains it), ``lb``
(a proven lower bound of its class) or ``best`` (the best schedule known; no guarantee), with the method,
time limit, threads and jctlab version that produced it, and the time it took. An instance's difficulty
label is the time the reference oracle needed to prove it: ``easy`` (< 1 min), ``medium`` (< 1 h),
``hard`` (more), ``open`` (never proven).

Seeds: a family lists its generator seeds (>= 10,000, the project's evaluation range); each kept seed is a
*draw* (index 0, 1, ... in the family), so ``jctlab evaluate --seeds K`` takes the first K draws of every
family, and a method's own seed in that cell is the draw's seed.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import math
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from jctlab import limits as L
from jctlab.errors import InputError
from jctlab.fields import FieldReader
from jctlab.model import Instance, load_instance, read_json, write_json_atomic

SUITE_FORMAT = "jctlab.suite/1"
SUITES_DIR = Path(__file__).resolve().parent / "suites"
#: problem classes from the narrowest to the widest (SPEC §3): a bound of a class bounds every narrower one
CLASSES = ("static", "offline", "preemptive")
KINDS = ("opt", "lb", "best")
DIFFICULTIES = ("easy", "medium", "hard", "open")
EASY_S, MEDIUM_S = 60.0, 3600.0
#: seeds of evaluation suites start here (seeds below are for development and training)
EVAL_SEED_MIN = 10_000


def difficulty(proven: bool, runtime_s: float | None) -> str:
    """ScheduleOpt-style label from the time the reference oracle needed to prove the optimum."""
    if not proven or runtime_s is None:
        return "open"
    return "easy" if runtime_s < EASY_S else "medium" if runtime_s < MEDIUM_S else "hard"


def canonical_hash(d: Any) -> str:
    """sha256 of a JSON value written canonically (sorted keys, no spaces): equal content, equal hash."""
    text = json.dumps(d, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def instance_hash(inst: Instance) -> str:
    return canonical_hash(inst.to_dict())


def import_object(spec: str, source: str, field_: str) -> Any:
    """``module:attr`` (attr may be dotted) -> the object; a clear one-line error otherwise."""
    mod, sep, attr = spec.partition(":")
    if not sep or not mod or not attr:
        raise InputError(source, field_, f"expected module:attribute, got {spec!r}")
    try:
        obj: Any = importlib.import_module(mod)
    except ImportError as e:
        raise InputError(source, field_, f"cannot import {mod!r} ({e})") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InputError(source, field_, f"module {mod!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


# ----------------------------------------------------------------------------- values


@dataclass(frozen=True)
class Reference:
    """One reference value of an instance (SPEC §3). ``problem_class`` is the class it is optimal for or
    bounds; ``schedule`` the reference schedule's file (relative to the suite folder) when shipped."""

    kind: str
    value: float
    problem_class: str
    method: str
    time_limit_s: float | None
    threads: int
    jctlab_version: str
    runtime_s: float | None = None
    schedule: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "value": self.value, "class": self.problem_class, "method": self.method,
                "time_limit_s": self.time_limit_s, "threads": self.threads, "jctlab_version": self.jctlab_version,
                "runtime_s": self.runtime_s, "schedule": self.schedule}


@dataclass(frozen=True)
class Generator:
    """A call that makes an instance: ``function`` (``module:attr``) with ``kwargs``, the draw's ``seed``
    and ``name`` added; ``data_dir`` added too when the suite needs the raw data."""

    function: str
    kwargs: Mapping[str, Any]
    field: str = field(default="generator", compare=False)    # where the manifest has it: families[k]

    def build(self, seed: int, name: str, data_dir: str | os.PathLike | None, source: str) -> Instance:
        fn = import_object(self.function, source, f"{self.field}.function")
        kw = dict(self.kwargs, seed=seed, name=name)
        if data_dir is not None:
            kw["data_dir"] = str(data_dir)
        try:
            return fn(**kw)
        except (ValueError, TypeError, OverflowError) as e:   # the generator refuses these arguments
            why = " ".join(str(e).split())     # one line, whatever the generator's message
            raise InputError(source, f"{self.field}.kwargs",
                             f"{self.function} refuses them for {name}: {why}") from None

    def to_dict(self) -> dict[str, Any]:
        return {"function": self.function, "kwargs": dict(self.kwargs)}


@dataclass(frozen=True)
class Family:
    """Draws of one generator call: ``seeds`` tried in order, the first ``draws`` kept (all when None)."""

    name: str
    generator: Generator
    seeds: tuple[int, ...]
    draws: int | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {"name": self.name, **self.generator.to_dict(), "seeds": list(self.seeds)}
        if self.draws is not None:
            d["draws"] = self.draws
        return d


@dataclass(frozen=True)
class Size:
    jobs: int
    gpus: int
    nodes: int
    gpu_types: tuple[str, ...]

    @staticmethod
    def of(inst: Instance) -> "Size":
        return Size(len(inst.jobs), len(inst.cluster.gpus), len(inst.cluster.nodes), tuple(inst.cluster.gpu_types))

    def to_dict(self) -> dict[str, Any]:
        return {"jobs": self.jobs, "gpus": self.gpus, "nodes": self.nodes, "gpu_types": list(self.gpu_types)}


@dataclass(frozen=True)
class SuiteInstance:
    """One draw of a family, with its references (strongest first: opt, then lb, then best)."""

    name: str
    family: str
    draw: int
    seed: int
    problem: str
    size: Size
    sha256: str
    references: tuple[Reference, ...]
    difficulty: str
    file: str | None = None

    def reference(self, kind: str) -> Reference | None:
        return next((r for r in self.references if r.kind == kind), None)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "family": self.family, "draw": self.draw, "seed": self.seed,
                "class": self.problem, "size": self.size.to_dict(), "sha256": self.sha256, "file": self.file,
                "difficulty": self.difficulty, "references": [r.to_dict() for r in self.references]}


@dataclass(frozen=True)
class BuildSpec:
    """How ``jctlab suite build`` computes references: the oracle ``method`` with ``time_limit_s`` and
    ``threads`` (one CP-SAT worker where reproducibility matters), the policies whose schedules compete for
    ``best``, which draws to keep (``proven``: only those whose optimum is proven) and what to ship."""

    method: str = "auto"
    time_limit_s: float = 300.0
    threads: int = 1
    seed: int = 0
    best_of: tuple[str, ...] = ()
    keep: str = "all"
    ship_instances: bool = True
    ship_schedules: bool = True

    def to_dict(self) -> dict[str, Any]:
        return {"method": self.method, "time_limit_s": self.time_limit_s, "threads": self.threads,
                "seed": self.seed, "best_of": list(self.best_of), "keep": self.keep,
                "ship_instances": self.ship_instances, "ship_schedules": self.ship_schedules}


@dataclass(frozen=True)
class EvalSpec:
    """Defaults of ``jctlab evaluate --suite NAME`` when the command line gives none. ``methods`` in the
    manifest is a list (run on every instance) or an object from class to list (each method run on the
    instances of the classes that list it: online policies queue jobs, which static instances forbid)."""

    methods: tuple[str, ...] = ()
    time_limit_s: float | None = 10.0
    threads: int = 1
    by_class: Mapping[str, tuple[str, ...]] | None = None

    def classes_of(self) -> dict[str, tuple[str, ...]] | None:
        """method -> the classes it runs on (None: every method on every class)."""
        if self.by_class is None:
            return None
        out: dict[str, tuple[str, ...]] = {}
        for cls in CLASSES:
            for m in self.by_class.get(cls, ()):
                out[m] = out.get(m, ()) + (cls,)
        return out

    def to_dict(self) -> dict[str, Any]:
        methods: Any = list(self.methods) if self.by_class is None else {c: list(v) for c, v in self.by_class.items()}
        return {"methods": methods, "time_limit_s": self.time_limit_s, "threads": self.threads}


@dataclass(frozen=True)
class Suite:
    name: str
    version: int
    description: str
    requires_data: bool
    evaluate: EvalSpec
    build: BuildSpec
    families: tuple[Family, ...]
    instances: tuple[SuiteInstance, ...] = ()
    path: Path | None = field(default=None, compare=False)

    @property
    def folder(self) -> Path:
        """Where the suite's instance and reference files live (``NAME/`` beside the manifest)."""
        base = self.path.parent if self.path is not None else SUITES_DIR
        return base / self.name

    @property
    def source(self) -> str:
        return str(self.path) if self.path is not None else self.name

    def family(self, name: str) -> Family:
        return next(f for f in self.families if f.name == name)

    def selected(self, seeds: int | None) -> tuple[SuiteInstance, ...]:
        """The first ``seeds`` draws of every family (all when None)."""
        return tuple(i for i in self.instances if seeds is None or i.draw < seeds)

    def max_draws(self) -> int:
        return 1 + max((i.draw for i in self.instances), default=-1)

    def load_instance(self, si: SuiteInstance, data_dir: str | os.PathLike | None = None) -> Instance:
        """The instance of a draw: its shipped file, else its generator call (checked against its hash)."""
        if si.file is not None:
            inst = load_instance(self.folder / si.file)
            if instance_hash(inst) != si.sha256:   # the references hold for the instance of the hash only
                raise InputError(str(self.folder / si.file), "", f"differs from the sha256 of {si.name} in "
                                 f"{self.source}: the suite's references are not this instance's")
            return inst
        if self.requires_data and data_dir is None:
            raise InputError(self.source, si.name, "needs the raw data (../shared/data or $JCTLAB_DATA)")
        inst = self.family(si.family).generator.build(si.seed, si.name, data_dir if self.requires_data else None,
                                                      self.source)
        if instance_hash(inst) != si.sha256:
            raise InputError(self.source, f"{si.name}.sha256",
                             "the generator no longer makes the instance the references were computed on "
                             "(other data or code): rebuild with `jctlab suite build`")
        return inst

    def with_instances(self, instances: tuple[SuiteInstance, ...]) -> "Suite":
        return replace(self, instances=instances)

    def to_dict(self) -> dict[str, Any]:
        return {"format": SUITE_FORMAT, "name": self.name, "version": self.version, "description": self.description,
                "requires_data": self.requires_data, "evaluate": self.evaluate.to_dict(),
                "build": self.build.to_dict(), "families": [f.to_dict() for f in self.families],
                "instances": [i.to_dict() for i in self.instances]}

    def save(self, path: str | os.PathLike | None = None) -> None:
        write_json_atomic(path or self.path, self.to_dict())


# ----------------------------------------------------------------------------- reading


#: a reference's objective value: positive and finite (SPEC §7 keeps every objective far below inf)
_VALUE = L.Range(0, math.inf, lo_open=True)


class _SuiteReader(FieldReader):
    def read(self, d: Any, path: Path | None) -> Suite:
        d = self.obj(d, "")
        self.fmt(d, SUITE_FORMAT)
        name = self.str_(self.get(d, "name", ""), "name")
        if "/" in name or name.startswith("."):
            raise self.fail("name", f"not a plain name: {name!r}")
        version = self.int_(self.get(d, "version", ""), "version", 1)
        ev = self.obj(d.get("evaluate", {}), "evaluate")
        ms = ev.get("methods", [])
        by_class = None
        if isinstance(ms, dict):
            by_class = {self.choice(c, "evaluate.methods", CLASSES): self._names(v, f"evaluate.methods.{c}")
                        for c, v in ms.items()}
            names = tuple(dict.fromkeys(m for v in by_class.values() for m in v))
        else:
            names = self._names(ms, "evaluate.methods")
        evaluate = EvalSpec(names, self._opt_num(ev.get("time_limit_s", 10.0), "evaluate.time_limit_s"),
                            self.int_(ev.get("threads", 1), "evaluate.threads", 1, L.MAX_THREADS), by_class)
        bd = self.obj(d.get("build", {}), "build")
        build = BuildSpec(self.str_(bd.get("method", "auto"), "build.method"),
                          self.num(bd.get("time_limit_s", 300.0), "build.time_limit_s", L.TIME_LIMIT),
                          self.int_(bd.get("threads", 1), "build.threads", 1, L.MAX_THREADS),
                          self.int_(bd.get("seed", 0), "build.seed", 0, L.MAX_SEED),
                          self._names(bd.get("best_of", []), "build.best_of"),
                          self.choice(bd.get("keep", "all"), "build.keep", ("all", "proven")),
                          self._bool(bd.get("ship_instances", True), "build.ship_instances"),
                          self._bool(bd.get("ship_schedules", True), "build.ship_schedules"))
        families = tuple(self.family(f, f"families[{k}]")
                         for k, f in enumerate(self.lst(self.get(d, "families", ""), "families")))
        names = [f.name for f in families]
        if len(set(names)) != len(names):
            raise self.fail("families", "family names must be unique")
        instances = tuple(self.instance(x, f"instances[{k}]", set(names))
                          for k, x in enumerate(self.lst(d.get("instances", []), "instances")))
        seen: set[str] = set()
        for k, si in enumerate(instances):
            if si.name in seen:
                raise self.fail(f"instances[{k}].name", f"duplicate instance {si.name!r}")
            seen.add(si.name)
        return Suite(name, version, str(d.get("description", "")),
                     self._bool(d.get("requires_data", False), "requires_data"), evaluate, build, families,
                     instances, path)

    def _names(self, v: Any, p: str) -> tuple[str, ...]:
        return tuple(self.str_(m, f"{p}[{k}]") for k, m in enumerate(self.lst(v, p)))

    def _opt_num(self, v: Any, p: str) -> float | None:
        return None if v is None else self.num(v, p, L.TIME_LIMIT)

    def _bool(self, v: Any, p: str) -> bool:
        if not isinstance(v, bool):
            raise self.fail(p, "expected true or false")
        return v

    def family(self, f: Any, p: str) -> Family:
        f = self.obj(f, p)
        kwargs = self.obj(f.get("kwargs", {}), f"{p}.kwargs")
        L.check_free_value(kwargs, self.source, f"{p}.kwargs")   # finite, so that the suite can be written back
        for bad in ("seed", "name", "data_dir"):
            if bad in kwargs:
                raise self.fail(f"{p}.kwargs.{bad}", "set by the suite (seeds, instance names, data folder)")
        seeds = tuple(self.int_(s, f"{p}.seeds[{k}]", EVAL_SEED_MIN, L.MAX_SEED)
                      for k, s in enumerate(self.lst(self.get(f, "seeds", p), f"{p}.seeds")))
        if not seeds:
            raise self.fail(f"{p}.seeds", "needs at least one seed")
        draws = f.get("draws")
        return Family(self.str_(self.get(f, "name", p), f"{p}.name"),
                      Generator(self.str_(self.get(f, "function", p), f"{p}.function"), kwargs, p), seeds,
                      None if draws is None else self.int_(draws, f"{p}.draws", 1))

    def reference(self, r: Any, p: str) -> Reference:
        r = self.obj(r, p)
        tl = r.get("time_limit_s")
        rt = r.get("runtime_s")
        sched = r.get("schedule")
        return Reference(self.choice(self.get(r, "kind", p), f"{p}.kind", KINDS),
                         self.num(self.get(r, "value", p), f"{p}.value", _VALUE),
                         self.choice(self.get(r, "class", p), f"{p}.class", CLASSES),
                         self.str_(self.get(r, "method", p), f"{p}.method"),
                         None if tl is None else self.num(tl, f"{p}.time_limit_s", L.TIME_LIMIT),
                         self.int_(r.get("threads", 1), f"{p}.threads", 1, L.MAX_THREADS),
                         self.str_(self.get(r, "jctlab_version", p), f"{p}.jctlab_version"),
                         None if rt is None else self.num(rt, f"{p}.runtime_s", L.RUNTIME),
                         None if sched is None else self.str_(sched, f"{p}.schedule"))

    def instance(self, x: Any, p: str, families: set[str]) -> SuiteInstance:
        x = self.obj(x, p)
        fam = self.str_(self.get(x, "family", p), f"{p}.family")
        if fam not in families:
            raise self.fail(f"{p}.family", f"no family {fam!r} in this suite")
        sz = self.obj(self.get(x, "size", p), f"{p}.size")
        size = Size(self.int_(self.get(sz, "jobs", f"{p}.size"), f"{p}.size.jobs", 1, L.MAX_JOBS),
                    self.int_(self.get(sz, "gpus", f"{p}.size"), f"{p}.size.gpus", 1, L.MAX_GPUS),
                    self.int_(self.get(sz, "nodes", f"{p}.size"), f"{p}.size.nodes", 1, L.MAX_NODES),
                    tuple(self.str_(t, f"{p}.size.gpu_types")
                          for t in self.lst(self.get(sz, "gpu_types", f"{p}.size"), f"{p}.size.gpu_types")))
        refs = tuple(self.reference(r, f"{p}.references[{k}]")
                     for k, r in enumerate(self.lst(self.get(x, "references", p), f"{p}.references")))
        kinds = [r.kind for r in refs]
        if len(set(kinds)) != len(kinds):
            raise self.fail(f"{p}.references", "at most one reference of each kind")
        if refs and list(refs) != sorted(refs, key=lambda r: KINDS.index(r.kind)):
            raise self.fail(f"{p}.references", "order them opt, lb, best")
        opt, lb, best = (next((r for r in refs if r.kind == k), None) for k in KINDS)
        if lb is not None and best is not None and lb.value > best.value * (1 + 1e-9):
            raise self.fail(f"{p}.references", f"lb {lb.value:.10g} is above best {best.value:.10g}")
        if opt is not None and lb is not None and lb.value > opt.value * (1 + 1e-9):
            raise self.fail(f"{p}.references", f"lb {lb.value:.10g} is above opt {opt.value:.10g}")
        sha = self.str_(self.get(x, "sha256", p), f"{p}.sha256")
        if len(sha) != 64:
            raise self.fail(f"{p}.sha256", "expected 64 hex digits")
        f = x.get("file")
        return SuiteInstance(self.str_(self.get(x, "name", p), f"{p}.name"), fam,
                             self.int_(self.get(x, "draw", p), f"{p}.draw"),
                             self.int_(self.get(x, "seed", p), f"{p}.seed", EVAL_SEED_MIN, L.MAX_SEED),
                             self.choice(self.get(x, "class", p), f"{p}.class", CLASSES), size, sha, refs,
                             self.choice(x.get("difficulty", "open"), f"{p}.difficulty", DIFFICULTIES),
                             None if f is None else self.str_(f, f"{p}.file"))


def read_suite(d: Any, path: str | os.PathLike | None = None) -> Suite:
    p = None if path is None else Path(path)
    return _SuiteReader(str(p) if p else "<suite>").read(d, p)


def available() -> list[str]:
    return sorted(p.stem for p in SUITES_DIR.glob("*.json"))


def find_suite(name_or_path: str) -> Path:
    """A suite name (``evaluation/suites/NAME.json``) or a manifest's path."""
    p = Path(name_or_path)
    if p.suffix == ".json" or os.sep in name_or_path:
        if not p.is_file():
            raise InputError(name_or_path, "", "no such suite manifest")
        return p
    q = SUITES_DIR / f"{name_or_path}.json"
    if not q.is_file():
        raise InputError("command line", "--suite", f"unknown suite {name_or_path!r} (known: {', '.join(available())})")
    return q


def load_suite(name_or_path: str) -> Suite:
    p = find_suite(name_or_path)
    return read_suite(read_json(p), p)


def finite(x: Any) -> float | None:
    """A float, or None for a missing or non-finite value (JSON has no NaN)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None
