"""The import structure: no cycles between modules, and the package layers in one direction.

Read from the sources (module-level imports, and imports inside functions too: an import moved into a
function to break a cycle is still a cycle). Layers: the core (``jctlab``) imports none of the other packages;
``matching`` does not import ``samplers``; ``formulations`` does not import ``oracle``; no package imports a
private name (``_x``) of another.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from jctlab.generators import offline_instance
from jctlab.model import Instance
from jctlab.policies import FifoFirstFit
from jctlab.simulate import Simulator

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("jctlab", "formulations", "oracle", "matching", "samplers", "baselines", "rl", "evaluation", "live")


def _modules() -> dict[str, Path]:
    out = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> list[tuple[str, list[str], bool]]:
    """(imported module, names taken from it, inside a function) of every import of a module."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    in_function = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            in_function.update(id(n) for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, [], id(node) in in_function) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                up = up[:len(up) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            names = [a.name for a in node.names]
            # "from pkg import module" imports the module
            subs = [f"{base}.{n}" for n in names if f"{base}.{n}" in modules]
            out += [(s, [], id(node) in in_function) for s in subs] or [(base, names, id(node) in in_function)]
    return [(m, names, f) for m, names, f in out if m.split(".")[0] in PACKAGES]


def _graph():
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        graph[name] = _imports(name, path, modules)
    return modules, graph


def test_no_import_cycles():
    modules, graph = _graph()
    edges = {m: {t for t, _, _ in imps if t in modules and t != m} for m, imps in graph.items()}
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    assert cycles == []


def test_layers_and_private_names():
    _, graph = _graph()
    forbidden = {"jctlab": set(PACKAGES) - {"jctlab"}, "matching": {"samplers"}, "formulations": {"oracle"}}
    for m, imps in graph.items():
        pkg = m.split(".")[0]
        for target, names, _ in imps:
            tpkg = target.split(".")[0]
            assert tpkg not in forbidden.get(pkg, ()), (m, target)
            if tpkg != pkg:
                private = [n for n in names if n.startswith("_") and not n.endswith("__")]   # dunders are public
                assert not private, (m, target, private)


#: numpy is not among them: replay reads and checks a schedule's segments as arrays (jctlab.columns,
#: jctlab.closed_form), which costs the verbs about 0.15 s of start-up and saves seconds on long schedules
HEAVY = ("pandas", "scipy", "torch", "ortools", "pulp", "numba", "highspy", "sklearn", "matplotlib")


@pytest.mark.parametrize("argv", [["replay", "{i}", "{s}"], ["schema", "instance"], ["replay", "{i}", "{s}", "--json"]])
def test_core_verbs_import_no_numerical_library(tmp_path, argv):
    """``replay`` and ``schema`` start without pandas, scipy, torch or a solver: neither their own modules nor
    the ``jctlab.commands`` plug-ins (loaded only for the verbs they add) may pull one in. A fresh process,
    since this one has them all loaded."""
    inst = offline_instance(gpus=4, nodes=1, jobs=3, max_size=2, seed=5)
    (tmp_path / "i.json").write_text(json.dumps(inst.to_dict()))
    sched, _ = Simulator(inst, FifoFirstFit(inst)).run()
    (tmp_path / "s.json").write_text(json.dumps(sched.to_dict()))
    args = [a.format(i=tmp_path / "i.json", s=tmp_path / "s.json") for a in argv]
    code = ("import sys\nfrom jctlab.cli import main\nrc = main(sys.argv[1:])\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\nsys.exit(rc)")
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "[]", p.stdout[-500:]


@pytest.mark.parametrize("policy", ["fifo+pal", "gittins+packed-nonsticky", "gavel-fifo-perf"])
def test_simulating_a_baseline_does_not_load_torch(tmp_path, policy):
    """``jctlab simulate --policy P`` asks every policy family in turn; the learned families answer for their
    own names only and import torch only then (a second of start-up in every baseline run before)."""
    inst = offline_instance(gpus=4, nodes=1, jobs=3, max_size=2, seed=5)
    if policy.startswith("gavel"):
        inst = Instance.from_dict({**inst.to_dict(), "problem": "preemptive"})
    (tmp_path / "i.json").write_text(json.dumps(inst.to_dict()))
    code = ("import sys\nfrom jctlab.cli import main\nrc = main(sys.argv[1:])\n"
            "print('torch' in sys.modules)\nsys.exit(rc)")
    p = subprocess.run([sys.executable, "-c", code, "simulate", str(tmp_path / "i.json"), "--policy", policy],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "False", p.stdout[-500:]


def test_a_finished_verb_leaves_its_locals_to_be_freed(tmp_path):
    """PuLP keeps the errors of the solvers it cannot load, tracebacks and so frames included: every frame on the
    stack at its first import (``jctlab simulate`` resolving a policy family) stayed alive with its locals, the
    schedule among them, until the process ended. ``jctlab.lp`` drops those tracebacks."""
    inst = offline_instance(gpus=4, nodes=1, jobs=3, max_size=2, seed=5)
    (tmp_path / "i.json").write_text(json.dumps(inst.to_dict()))
    code = ("import gc, sys, types\nfrom jctlab.cli import main\nrc = main(sys.argv[1:])\n"
            "from jctlab.model import Schedule\n"
            "objs = gc.get_objects()\n"
            "print(sum(isinstance(o, Schedule) for o in objs),"
            " sorted({o.f_code.co_name for o in objs if isinstance(o, types.FrameType)} & {'cmd_simulate', 'main'}))\n"
            "sys.exit(rc)")
    p = subprocess.run([sys.executable, "-c", code, "simulate", str(tmp_path / "i.json"), "--policy", "fifo+pal"],
                       capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1] == "0 []", p.stdout[-500:]
