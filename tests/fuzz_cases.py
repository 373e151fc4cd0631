"""Hostile inputs for the fuzz suite of issue 44: Hypothesis strategies over the instance and schedule JSON,
the cache file and every verb's options, as :class:`Case` objects (a command line with placeholders and the
files it reads). Each mutation knows whether it makes the input nonsense (``expect="bad"``: a number of the
wrong JSON type, not finite or beyond every range; a container replaced by a scalar; an option that is not
a number...), so that accepted nonsense is measurable. Run and judged by :mod:`tests.fuzzing`.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from jctlab.generators import offline_instance, static_instance
from jctlab.model import Instance
from jctlab.policies import FifoFirstFit
from jctlab.simulate import simulate

from .conftest import tiny_dict

METHODS = ("cpsat", "milp", "milp-cbc", "brute", "bnb", "auto", "matching", "exhaustive", "sampling")
POLICIES = ("fifo-firstfit", "las+pal", "fifo+packed-sticky", "srtf+random-nonsticky", "sjf+pm-first",
            "gittins+packed-nonsticky", "gavel-max-min-fairness", "gavel-fifo-perf", "optimus", "synergy-tune",
            "matching", "sampling")

# ----------------------------------------------------------------------------- base inputs


def ps_heavy(problem: str, nodes: int, t4: float, ps_cpus: float, max_ps: int) -> Instance:
    """A valid instance whose parameter-server jobs have astronomically many placements: 2 GPUs and 64 CPUs
    per node, ``max_ps`` servers of ``ps_cpus`` CPUs with Optimus' per-server term ``t4``."""
    gen = static_instance if problem == "static" else offline_instance
    kw: dict = dict(gpus=2 * nodes, nodes=nodes, jobs=3, ps=True, seed=0)
    kw.update(sizes=(1, 2)) if problem == "static" else kw.update(max_size=2)
    d = gen(**kw).to_dict()
    for n in d["cluster"]["nodes"]:
        n["cpus"] = 64.0
    for j in d["jobs"]:
        if j["ps"]:
            j["ps"].update(max_ps=max_ps, ps_cpus=ps_cpus)
            j["ps"]["theta"][3] = t4
    return Instance.from_dict(d)


def extreme(d: dict[str, Any]) -> dict[str, Any]:
    """``d`` with its first job at the far end of every range (1e12 iterations of batch 1e9 at 1e-6 samples/s:
    1e27 s on any GPU, beyond a MILP solver's infinity) and its second one almost free."""
    d = json.loads(json.dumps(d))
    d["jobs"][0].update(iterations=1e12, batch=1e9, samples_per_s={t: 1e-6 for t in d["jobs"][0]["samples_per_s"]})
    d["jobs"][1]["iterations"] = 1e-3
    return d


@lru_cache(maxsize=None)
def bases() -> dict[str, dict[str, Any]]:
    """Small valid instances of every class and feature: solved in well under a second."""
    rich = offline_instance(gpus=4, nodes=2, jobs=3, ps=True, cpu_mem=True, interference=0.1, seed=5,
                            max_size=2).to_dict()
    rich["jobs"][0]["measured"] = {"v100": {"1": 5.0, "2": 9.0}, "v100/spread": {"2": 8.0}}
    return {
        "offline": tiny_dict(),
        "static": static_instance(gpus=4, nodes=2, jobs=3, sizes=(1, 2), seed=11, variability=0.05).to_dict(),
        "preemptive": offline_instance(gpus=4, nodes=2, jobs=4, problem="preemptive", max_size=2, seed=3,
                                       duration_h=(0.1, 0.5), interarrival_s=600).to_dict(),
        "rich": rich,
        "ps-heavy": ps_heavy("offline", 2, 0.0, 0.0, 1024).to_dict(),
        "extreme": extreme(tiny_dict()),
        # SPEC v1.1 topology: GPU socket/switch, cluster qpi_factor/pcie_interference (preemptive: restarts too)
        "topology": offline_instance(gpus=8, nodes=1, jobs=3, max_size=4, seed=7, topology=True,
                                     problem="preemptive", duration_h=(0.1, 0.3), interarrival_s=300).to_dict(),
    }


@st.composite
def drawn_instance(draw: Any) -> dict[str, Any]:
    """A valid instance of the generators with their parameters drawn over wide ranges (the shapes a user's own
    data may have: one GPU or a dozen, one type or three, every option of SPEC §1-2, every objective)."""
    gpus = draw(st.integers(1, 12))
    kw = {"gpus": gpus, "nodes": draw(st.integers(1, min(4, gpus))), "jobs": draw(st.integers(1, 6)),
          "seed": draw(st.integers(0, 2**31 - 1)),
          "types": tuple(draw(st.lists(st.sampled_from(("v100", "p100", "k80")), min_size=1, max_size=3, unique=True))),
          "variability": draw(st.sampled_from((0.0, 0.05, 0.3))), "locality_penalty": draw(st.sampled_from((1.0, 1.3))),
          "cpu_mem": draw(st.booleans()), "ps": draw(st.booleans()), "interference": draw(st.sampled_from((0.0, 0.1))),
          "objective": draw(st.sampled_from(("mean_jct", "weighted_jct", "makespan"))), "topology": draw(st.booleans()),
          "duration_h": draw(st.sampled_from(((0.01, 0.1), (0.1, 2.0), (1.0, 24.0))))}
    problem = draw(st.sampled_from(("static", "offline", "preemptive")))
    if problem == "static":
        inst = static_instance(sizes=tuple(s for s in (1, 2, 4) if s <= gpus), **kw)
    else:
        inst = offline_instance(problem=problem, max_size=draw(st.sampled_from((1, 2, 4, 8))),
                                interarrival_s=draw(st.sampled_from((0.0, 60.0, 900.0))), **kw)
    return inst.to_dict()


@lru_cache(maxsize=None)
def schedule_of(base: str) -> dict[str, Any] | None:
    """A valid schedule of base instance ``base`` (FIFO first fit), or None when it has none (or is drawn)."""
    if base not in bases():
        return None
    inst = Instance.from_dict(bases()[base])
    try:
        sched, rep = simulate(inst, FifoFirstFit(inst))
    except Exception:  # noqa: BLE001 - a base without a FIFO schedule: schedules are fuzzed on the others
        return None
    return sched.to_dict() if rep.valid else None


# ----------------------------------------------------------------------------- JSON mutations
#: raw JSON texts that no number of the contract may be (wrong JSON type, not finite, beyond every range)
NOT_A_NUMBER = ("NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1" + "0" * 400, "9" * 5000, "true", "false",
                '"12"', "[]", "{}", "[1]", '""')
OUT_OF_EVERY_RANGE = ("1e300", "-1e300", "-1")     # every instance range is within [0, 1e12]
MAYBE = ("0", "1", "2", "0.5", "1e-320", "3600", "1e9", "null", "-0.0", "12345678901234567890")
NOT_A_STRING = ("5", "true", "null", "[]", "{}", '""')
_RAW = "@@RAW{}@@"


@dataclass
class Doc:
    """A JSON document being mutated: the object, raw splices (placeholder -> text), and whether it is
    certainly nonsense now."""

    obj: Any
    raws: dict[str, str] = field(default_factory=dict)
    nonsense: set[str] = field(default_factory=set)     # placeholders whose text makes the document bad
    notes: list[str] = field(default_factory=list)

    def splice(self, text: str, bad: bool = False) -> str:
        key = _RAW.format(len(self.raws))
        self.raws[key] = text
        if bad:
            self.nonsense.add(key)
        return key

    @property
    def bad(self) -> bool:
        """Whether a nonsense splice is still in the document (a later mutation may have removed it)."""
        s = json.dumps(self.obj)
        return any(json.dumps(k) in s for k in self.nonsense)

    def text(self) -> bytes:
        s = json.dumps(self.obj)
        for k, v in self.raws.items():
            s = s.replace(json.dumps(k), v)
        return s.encode()


def _paths(x: Any, path: tuple = ()) -> list[tuple[tuple, Any]]:
    out = [(path, x)]
    if isinstance(x, dict):
        for k, v in x.items():
            out += _paths(v, path + (k,))
    elif isinstance(x, list):
        for i, v in enumerate(x):
            out += _paths(v, path + (i,))
    return out


def _set(obj: Any, path: tuple, value: Any) -> None:
    for k in path[:-1]:
        obj = obj[k]
    obj[path[-1]] = value


def _delete(obj: Any, path: tuple) -> None:
    for k in path[:-1]:
        obj = obj[k]
    del obj[path[-1]]


#: numbers where a negative or huge value is meaningful in a schedule (claims may be anything finite)
_SCHEDULE_FREE = {"lower_bound"}


def _free(kind: str, path: tuple) -> bool:
    """Whether any value at ``path`` may be meaningful (so a mutation there is never certain nonsense): in a
    suite manifest the generator's keyword arguments and the description (read as given), in a cell row of
    a run folder every field (the row's reader checks the fields it uses, not each one)."""
    return (kind == "suite" and ("kwargs" in path or path[-1:] == ("description",))) or kind == "row"


@st.composite
def mutated(draw: Any, base: Any, kind: str) -> Doc:
    """``base`` (a dict) with 1-3 hostile mutations (``kind``: "instance" | "schedule" | "suite" | "row")."""
    doc = Doc(json.loads(json.dumps(base)))
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(("number", "number", "container", "string", "delete", "unknown", "deep")))
        paths = [(p, v) for p, v in _paths(doc.obj) if p and not (isinstance(v, str) and v.startswith("@@RAW"))]
        if op == "number":
            nums = [(p, v) for p, v in paths if isinstance(v, (int, float)) and not isinstance(v, bool)]
            if not nums:
                continue
            p, _ = draw(st.sampled_from(nums))
            pool = draw(st.sampled_from(("bad", "range", "maybe", "maybe")))
            bad = False
            if pool == "bad":
                raw, bad = draw(st.sampled_from(NOT_A_NUMBER)), True
            elif pool == "range":
                raw = draw(st.sampled_from(OUT_OF_EVERY_RANGE))
                bad = not (kind == "schedule" and (p[-1] in _SCHEDULE_FREE or raw == "1e300"))
                bad = bad and not (kind == "suite" and p[-1] == "value" and raw == "1e300")  # an objective
            else:
                raw = draw(st.sampled_from(MAYBE))
            _set(doc.obj, p, doc.splice(raw, bad and not _free(kind, p)))
            doc.notes.append(f"{'.'.join(map(str, p))}={raw[:20]}")
        elif op == "container":
            cons = [(p, v) for p, v in paths if isinstance(v, (dict, list))]
            if not cons:
                continue
            p, v = draw(st.sampled_from(cons))
            other = draw(st.sampled_from(("0", "false", '""', '"x"', "null", "[]", "{}")))
            same = (other == "[]" and isinstance(v, list)) or (other == "{}" and isinstance(v, dict))
            _set(doc.obj, p, doc.splice(other, other != "null" and not same and not _free(kind, p)))
            doc.notes.append(f"{'.'.join(map(str, p))}={other}")
        elif op == "string":
            strs = [(p, v) for p, v in paths if isinstance(v, str)]
            if not strs:
                continue
            p, _ = draw(st.sampled_from(strs))
            raw = draw(st.sampled_from(NOT_A_STRING))
            # null is the default of the optional strings (class, model); every other string is required
            _set(doc.obj, p, doc.splice(raw, not (raw == "null" and p[-1] in ("class", "model", "file", "schedule"))
                                        and not _free(kind, p)))
            doc.notes.append(f"{'.'.join(map(str, p))}={raw}")
        elif op == "delete":
            keys = [(p, v) for p, v in paths if isinstance(p[-1], str)]
            if keys:
                p, _ = draw(st.sampled_from(keys))
                _delete(doc.obj, p)
                doc.notes.append(f"del {'.'.join(map(str, p))}")
        elif op == "unknown":
            objs = [(p, v) for p, v in _paths(doc.obj) if isinstance(v, dict)]
            p, v = draw(st.sampled_from(objs))
            raw = draw(st.sampled_from(("1", '"x"', "[1, 2]", '{"a": {"b": [null]}}', "NaN", "1e400", "[Infinity]")))
            key = draw(st.sampled_from(("x_extra", "zz", "tracked", "source")))
            if key in v:
                continue
            # unknown fields of instances and schedules are kept (so must be finite); suites and rows ignore them
            v[key] = doc.splice(raw, raw in ("NaN", "1e400", "[Infinity]") and kind in ("instance", "schedule"))
            doc.notes.append(f"{'.'.join(map(str, p + (key,)))}={raw}")
        else:  # deep: nesting beyond the limit (64) is refused; within it an unknown field is kept
            objs = [(p, v) for p, v in _paths(doc.obj) if isinstance(v, dict)]
            p, v = draw(st.sampled_from(objs))
            depth = draw(st.sampled_from((5, 40, 100, 5000)))
            key = f"deep_extra{len(doc.raws)}"        # a key of its own: another mutation must not replace it
            v[key] = doc.splice("[" * depth + "]" * depth, depth + len(p) + 1 > 64)
            doc.notes.append(f"deep {depth}")
    return doc


@st.composite
def corrupted(draw: Any, text: bytes) -> tuple[bytes, str]:
    """Whole-file corruption: always bad input."""
    how = draw(st.sampled_from(("truncate", "bytes", "empty", "top", "utf8")))
    if how == "truncate":       # cut before its last character that is not blank (a cut newline leaves it whole)
        return text[: draw(st.integers(0, max(0, len(text.rstrip()) - 1)))], how
    if how == "bytes":
        return draw(st.binary(min_size=1, max_size=200)).replace(b"{", b"<"), how
    if how == "empty":
        return b"", how
    if how == "top":
        return draw(st.sampled_from((b"[]", b"null", b"5", b'"x"', b"[{}]"))), how
    return text[:10] + b"\xff\xfe" + text[10:], how


# ----------------------------------------------------------------------------- command-line options
BAD_NUMBER = ("nan", "inf", "-inf", "abc", "", "-1", "1e400")
MAYBE_NUMBER = ("0", "1.5", "1e-9", "60", "99999999999", "2")


@dataclass(frozen=True)
class Flag:
    name: str
    kind: str            # "number" | "text" | "list" | "switch" (a flag without a value)
    valid: tuple[str, ...]


#: values that no flag of a kind takes
BAD_TEXT = {"text": ("", " "), "list": ("", ",", "a,,b", " ")}


VERB_FLAGS = {
    "solve": (Flag("--time-limit", "number", ("0.5", "1")), Flag("--threads", "number", ("1", "2")),
              Flag("--seed", "number", ("0", "7"))),
    "simulate": (Flag("--round", "number", ("360", "600")), Flag("--seed", "number", ("0", "3"))),
    "static": (Flag("--gpus", "number", ("4", "8")), Flag("--nodes", "number", ("1", "2")),
               Flag("--topology", "switch", ()), Flag("--qpi-factor", "number", ("1", "1.3")),
               Flag("--pcie-interference", "number", ("0", "0.1")),
               Flag("--jobs", "number", ("2", "3")), Flag("--variability", "number", ("0", "0.1")),
               Flag("--locality-penalty", "number", ("1", "1.5")), Flag("--interference", "number", ("0", "0.2")),
               Flag("--seed", "number", ("0", "1")), Flag("--types", "list", ("v100", "v100,k80")),
               Flag("--sizes", "list", ("1", "1,2")), Flag("--name", "text", ("x", ",", "a b"))),
    "offline": (Flag("--gpus", "number", ("4", "8")), Flag("--jobs", "number", ("2", "4")),
                Flag("--interarrival", "number", ("600",)), Flag("--min-hours", "number", ("0.1",)),
                Flag("--max-hours", "number", ("0.5", "1")), Flag("--max-size", "number", ("2",)),
                Flag("--elastic", "number", ("0", "0.5")), Flag("--restart", "number", ("0", "30")),
                Flag("--topology", "switch", ()), Flag("--qpi-factor", "number", ("1.2",)),
                Flag("--pcie-interference", "number", ("0.05",)),
                Flag("--types", "list", ("v100,p100",)), Flag("--name", "text", ("y",))),
}
#: options of plug-ins: (flag, kind, valid values, bad values)
METHOD_OPTIONS = {
    "sampling": (("--samples", ("4", "8"), ("abc", "1.5", "0", "nan")), ("--fairness", ("0", "0.5"), ("nan", "inf", "-1")),
                 ("--sampler", ("uniform",), ("bogus", "")), ("--temperature", ("0.1",), ("-1", "0", "nan")),
                 ("--market-step", ("0.05",), ("0", "-1", "inf"))),
    "matching": (("--width", ("4",), ("-1", "abc")), ("--inner", ("stable",), ("bogus",)),
                 ("--market-step", ("0.1",), ("0",)), ("--fairness", ("0.2",), ("inf",))),
    "cpsat": (("--warm", ("false",), ("maybe", "2")),),
    "auto": (("--warm", ("true",), ("abc",)),),
}
POLICY_OPTIONS = {
    "las+pal": (("--lam", ("1.7",), ("abc", "-1", "0.5", "nan")), ("--thresholds", ("3600,36000",), ("abc", "5,1", ""))),
    "fifo+packed-sticky": (("--round-s", ("600",), ("0", "-5", "inf")),),
    "gavel-max-min-fairness": (("--lp-method", ("simplex",), ("bogus",)), ("--reset-interval-s", ("0",), ("-1",))),
    "matching": (("--width", ("8",), ("-1", "x")),),
    "sampling": (("--samples", ("4",), ("1.5", "abc")),),
}


@dataclass
class Case:
    """One command line (``{dir}`` stands for the case's folder) and the files it reads."""

    verb: str
    argv: list[str]
    files: dict[str, bytes | None] = field(default_factory=dict)   # None: a directory
    expect: str = "any"                                            # "bad": must exit 2; "good": must exit 0
    limit_s: float | None = None                                   # --time-limit, when given and valid
    out: str | None = None                                         # the --out file (or folder) name
    out_kind: str | None = None     # what out holds: instance, schedule, image, text, folder (None: by verb)
    notes: list[str] = field(default_factory=list)
    check: Callable[[Path], list[str]] | None = None  # what the output written on success breaks (empty: nothing)

    def describe(self) -> str:
        return f"{' '.join(self.argv)}  [{'; '.join(self.notes)}]"


@st.composite
def instance_input(draw: Any, base: str | None = None) -> tuple[bytes, bool, list[str], str]:
    """(file content, certainly bad, notes, base name) of an instance file: one of the bases, valid, mutated or
    corrupt, or (without ``base``) one drawn from the generators (base name ``drawn``)."""
    if base is None and draw(st.integers(0, 4)) == 0:
        doc = draw(drawn_instance())
        return json.dumps(doc).encode(), False, [f"drawn {doc['name']} {doc['objective']}"], "drawn"
    name = base or draw(st.sampled_from(sorted(bases())))
    how = draw(st.sampled_from(("valid", "valid", "valid", "mutated", "mutated", "mutated", "corrupt")))
    text = json.dumps(bases()[name]).encode()
    if how == "valid":
        return text, False, [f"{name} valid"], name
    if how == "corrupt":
        data, what = draw(corrupted(text))
        return data, True, [f"{name} corrupt:{what}"], name
    doc = draw(mutated(bases()[name], "instance"))
    return doc.text(), doc.bad, [f"{name}"] + doc.notes, name


def _flag_values(draw: Any, case: Case, flags: tuple[Flag, ...]) -> None:
    """Give some flags fuzzed values (maybe nonsense), the rest their valid values."""
    for f in flags:
        r = draw(st.integers(0, 9))
        if r < 6:
            continue
        if f.kind == "switch":
            case.argv.append(f.name)
            case.notes.append(f.name)
            continue
        if r < 8:
            v = draw(st.sampled_from(f.valid))
        elif f.kind == "number":
            v = draw(st.sampled_from(BAD_NUMBER + MAYBE_NUMBER))
            if v in BAD_NUMBER:
                case.expect = "bad"
        else:
            v = draw(st.sampled_from(BAD_TEXT[f.kind]))
            case.expect = "bad"
        case.argv += [f.name, v]
        case.notes.append(f"{f.name}={v!r}")


def _plugin_options(draw: Any, case: Case, table: dict, name: str) -> None:
    for flag, valid, bad in table.get(name, ()):
        r = draw(st.integers(0, 5))
        if r < 3:
            continue
        if r < 5:
            v = draw(st.sampled_from(valid))
        else:
            v = draw(st.sampled_from(bad))
            case.expect = "bad"
        case.argv += [flag, v]
        case.notes.append(f"{flag}={v!r}")


@st.composite
def _out(draw: Any, case: Case) -> None:
    """An --out: usually a fresh file, sometimes one that cannot be written (bad)."""
    how = draw(st.sampled_from(("file", "file", "file", "sub", "dir", "under-file", "empty")))
    if how == "file":
        case.out = "out.json"
        case.argv += ["--out", "{dir}/out.json"]
    elif how == "sub":
        case.out = "new/sub/out.json"
        case.argv += ["--out", "{dir}/new/sub/out.json"]
    elif how == "dir":
        case.files["outdir"] = None
        case.argv += ["--out", "{dir}/outdir"]
        case.expect = "bad"
    elif how == "under-file":
        case.files["plain"] = b"x"
        case.argv += ["--out", "{dir}/plain/out.json"]
        case.expect = "bad"
    else:
        case.argv += ["--out", ""]
        case.expect = "bad"
    case.notes.append(f"out:{how}")


@st.composite
def replay_case(draw: Any) -> Case:
    base = draw(st.sampled_from([b for b in sorted(bases()) if schedule_of(b) is not None]))
    inst, bad_i, notes, _ = draw(instance_input(base))
    sched = schedule_of(base)
    how = draw(st.sampled_from(("valid", "mutated", "mutated", "corrupt", "late-end", "other-instance")))
    case = Case("replay", ["replay", "{dir}/inst.json", "{dir}/sched.json"], notes=notes)
    if how == "valid":
        text = json.dumps(sched).encode()
    elif how == "corrupt":
        text, what = draw(corrupted(json.dumps(sched).encode()))
        case.expect = "bad"
        case.notes.append(f"schedule corrupt:{what}")
    elif how == "late-end":
        # the last segment of a job ends long after the job completes: invalid (exit 1) per README
        s = json.loads(json.dumps(sched))
        s["segments"][0]["end"] = 1e8
        s.pop("claimed", None)
        text = json.dumps(s).encode()
        case.notes.append("late end")
    elif how == "other-instance":
        s = dict(sched, instance="someone-else")
        text = json.dumps(s).encode()
        case.expect = "bad"
        case.notes.append("schedule of another instance")
    else:
        doc = draw(mutated(sched, "schedule"))
        text = doc.text()
        case.expect = "bad" if doc.bad else case.expect
        case.notes += ["schedule"] + doc.notes
    if bad_i:
        case.expect = "bad"
    case.files = {"inst.json": inst, "sched.json": text}
    if draw(st.booleans()):
        case.argv.append("--json")
    return case


def _plugin_case(draw: Any, verb: str, flag: str, names: tuple[str, ...]) -> tuple[Case, str, str]:
    """(case, base instance, plug-in name) of ``verb INSTANCE flag NAME`` with a fuzzed instance file."""
    inst, bad, notes, base = draw(instance_input())
    name = draw(st.sampled_from(names + (f"bogus-{verb}",)))
    case = Case(verb, [verb, "{dir}/inst.json", flag, name], {"inst.json": inst},
                "bad" if bad or name.startswith("bogus-") else "any", notes=notes + [name])
    return case, base, name


@st.composite
def simulate_case(draw: Any) -> Case:
    case, _, policy = _plugin_case(draw, "simulate", "--policy", POLICIES)
    _flag_values(draw, case, VERB_FLAGS["simulate"])
    _plugin_options(draw, case, POLICY_OPTIONS, policy)
    if draw(st.integers(0, 9)) == 0:
        case.argv += ["--bogus-option", "1"]
        case.expect = "bad"
    if draw(st.booleans()):
        draw(_out(case))
    if draw(st.booleans()):
        case.argv.append("--json")
    return case


@st.composite
def solve_case(draw: Any) -> Case:
    case, base, method = _plugin_case(draw, "solve", "--method", METHODS)
    flags = VERB_FLAGS["solve"]
    _flag_values(draw, case, flags[1:])
    if draw(st.integers(0, 5)) == 0:
        _flag_values(draw, case, flags[:1])
    if "--time-limit" not in case.argv:
        case.argv += ["--time-limit", draw(st.sampled_from(("0.5", "1")))]
    tl = case.argv[case.argv.index("--time-limit") + 1]
    try:
        case.limit_s = float(tl) if 0 < float(tl) <= 60 else None
    except ValueError:
        case.limit_s = None
    _plugin_options(draw, case, METHOD_OPTIONS, method)
    r = draw(st.integers(0, 9))
    if r == 0 and schedule_of(base) is not None:           # a hint: valid, or of another instance (bad)
        other = draw(st.booleans())
        s = dict(schedule_of(base), instance="someone-else") if other else schedule_of(base)
        case.files["hint.json"] = json.dumps(s).encode()
        case.argv += ["--hint", "{dir}/hint.json"]
        case.expect = "bad" if other else case.expect
        case.notes.append(f"hint{' other' if other else ''}")
    elif r == 1 and method in ("cpsat", "milp", "milp-cbc", "brute", "bnb", "auto"):
        how = draw(st.sampled_from(("fresh", "bytes", "foreign", "dir")))
        if how == "bytes":
            case.files["cache.sqlite"] = draw(st.binary(min_size=1, max_size=3000))
        elif how == "foreign":
            case.files["cache.sqlite"] = _foreign_sqlite()
        elif how == "dir":
            case.files["cache.sqlite"] = None
            case.expect = "bad"
        case.argv += ["--cache", "{dir}/cache.sqlite"]
        case.notes.append(f"cache:{how}")
    if draw(st.booleans()):
        draw(_out(case))
    if draw(st.booleans()):
        case.argv.append("--json")
    return case


@lru_cache(maxsize=1)
def _foreign_sqlite() -> bytes:
    d = tempfile.mkdtemp()
    try:
        p = os.path.join(d, "f.sqlite")
        con = sqlite3.connect(p)
        con.execute("CREATE TABLE results (a INTEGER, b TEXT)")
        con.execute("INSERT INTO results VALUES (1, 'x')")
        con.commit()
        con.close()
        return Path(p).read_bytes()
    finally:
        shutil.rmtree(d, ignore_errors=True)


@st.composite
def make_instance_case(draw: Any) -> Case:
    kind = draw(st.sampled_from(("static", "offline", "synergy", "alibaba")))
    case = Case("make-instance", ["make-instance", kind], notes=[kind])
    if kind in ("synergy", "alibaba"):
        inst, bad, notes, _ = draw(instance_input())
        case.files["base.json"] = inst
        case.argv += ["--base", "{dir}/base.json"]
        case.expect = "bad" if bad else "any"
        case.notes += notes
        if kind == "alibaba" and draw(st.booleans()):
            v = draw(st.sampled_from(("4", "0", "-2", "abc", "1.5")))
            case.argv += ["--machines", v]
            case.expect = "bad" if v in ("0", "-2", "abc", "1.5") else case.expect
    else:
        _flag_values(draw, case, VERB_FLAGS[kind])
    draw(_out(case))
    return case


@st.composite
def schema_case(draw: Any) -> Case:
    which = draw(st.sampled_from(("instance", "schedule", "bogus")))
    argv = ["schema", which] + (["--json"] if draw(st.booleans()) else [])
    return Case("schema", argv, expect="bad" if which == "bogus" else "any", notes=[which])


#: the core verbs and their relative weights in a fuzz run (mostly cheap verbs)
CORE_WEIGHTS = {"replay": 4, "simulate": 3, "solve": 2, "make-instance": 2, "schema": 1}


def core_strategies() -> dict[str, st.SearchStrategy[Case]]:
    return {"replay": replay_case(), "simulate": simulate_case(), "solve": solve_case(),
            "make-instance": make_instance_case(), "schema": schema_case()}
