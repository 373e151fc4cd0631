"""What ``--methods`` names: registered solvers and policies, or a user's ``module:factory``.

A method spec is ``NAME`` or ``NAME[key=value,key=value]`` (options passed to the solver or policy
factory, e.g. ``sampling[samples=16]``, typed by its signature as the ``solve``/``simulate`` verbs type
theirs: :mod:`jctlab.argtypes`). ``NAME`` is looked up in this order:

1. ``solver:NAME`` / ``policy:NAME``: a registered solver (``jctlab.methods``) or policy, explicitly (for a
   name registered as both, such as ``matching`` and ``sampling``);
2. a registered solver (``jctlab.methods``: oracles, matching, sampling...);
3. a registered policy or a member of a policy family (``jctlab.policies``, ``jctlab.policy_families``:
   baselines like ``fifo+pal``, RL policies like ``hrl:CHECKPOINT``);
4. ``module:attr``: a user's own callable, imported from ``module`` (on ``PYTHONPATH``, no entry point
   needed). A callable that takes a ``time_limit`` argument is a solver (``fn(inst, *, time_limit,
   threads, seed, hint, **options) -> jctlab.Result``); any other is a policy factory
   (``factory(inst, seed=0, **options) -> policy`` with ``decide(sim)``).
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from dataclasses import dataclass
from typing import Any, Callable

from jctlab import argtypes as T
from jctlab import registry
from jctlab.errors import InputError

from .suites import import_object

SOLVER, POLICY = "solver", "policy"


@dataclass(frozen=True)
class MethodSpec:
    """A resolved method: ``label`` as the user wrote it (the table's method column), its ``name``,
    ``kind`` (solver or policy), ``source`` (registry or module) and options."""

    label: str
    name: str
    kind: str
    source: str
    options: tuple[tuple[str, Any], ...] = ()

    def load(self) -> Callable[..., Any]:
        """The solver or policy factory (in whichever process runs the cell)."""
        if self.source == "module":
            return import_object(self.name, "--methods", self.label)
        fn = registry.method(self.name) if self.kind == SOLVER else registry.policy_factory(self.name)
        if fn is None:
            raise InputError("--methods", self.label, f"no registered {self.kind} {self.name!r}")
        return fn

    def key(self) -> dict[str, Any]:
        """What identifies the method in a cell's content hash."""
        return {"name": self.name, "kind": self.kind, "source": self.source, "options": dict(self.options)}


def split_specs(text: str) -> list[str]:
    """Split ``a,b[x=1,y=2],c`` on the commas outside brackets."""
    out, depth, cur = [], 0, ""
    for ch in text:
        depth += ch == "["
        depth -= ch == "]"
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [s.strip() for s in out if s.strip()]


def _parse(spec: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """``NAME[k=v,...]`` -> (NAME, ((k, raw v), ...)), the values still text (see :func:`_typed`)."""
    if "[" not in spec:
        return spec, ()
    name, _, rest = spec.partition("[")
    if not rest.endswith("]") or not name:
        raise InputError("command line", "--methods", f"{spec!r}: expected NAME[key=value,...]")
    opts = []
    for item in rest[:-1].split(","):
        if not item.strip():
            continue
        k, eq, v = item.partition("=")
        if not eq or not k.strip():
            raise InputError("command line", "--methods", f"{spec!r}: option {item!r} is not key=value")
        opts.append((k.strip(), v.strip()))
    return name.strip(), tuple(sorted(opts))


def _typed(spec: str, fn: Callable[..., Any], opts: tuple[tuple[str, str], ...],
           what: str) -> tuple[tuple[str, Any], ...]:
    """The options typed by ``fn``'s signature (ranges and choices of its ``Annotated`` metadata): an
    unknown key, a key given twice or a value of the wrong type is a one-line InputError naming the spec."""
    try:
        typed = T.parse_options(fn, [f"--{k}={v}" for k, v in opts], what)
    except InputError as e:
        raise InputError("command line", "--methods", f"{spec!r}: {e.field.lstrip('-')}: {e.reason}") from None
    return tuple(sorted(typed.items()))


def _is_solver(fn: Any) -> bool:
    try:
        return "time_limit" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def resolve(spec: str) -> MethodSpec:
    """A ``--methods`` entry -> :class:`MethodSpec`, or a one-line InputError saying what is known."""
    name, opts = _parse(spec)
    forced = None
    for kind in (SOLVER, POLICY):
        if name.startswith(kind + ":") and not _importable_module(kind):
            forced, name = kind, name[len(kind) + 1:]
    if forced != POLICY and (fn := registry.method(name)) is not None:
        return MethodSpec(spec, name, SOLVER, "registry", _typed(spec, fn, opts, f"method {name}"))
    if forced != SOLVER and (fn := registry.policy_factory(name)) is not None:
        return MethodSpec(spec, name, POLICY, "registry", _typed(spec, fn, opts, f"policy {name}"))
    if forced is None and ":" in name:
        fn = import_object(name, "command line", "--methods")
        if not callable(fn):
            raise InputError("command line", "--methods", f"{name!r} is not callable")
        return MethodSpec(spec, name, SOLVER if _is_solver(fn) else POLICY, "module", _typed(spec, fn, opts, name))
    known = ", ".join(registry.names("jctlab.methods") + registry.names("jctlab.policies"))
    raise InputError("command line", "--methods",
                     f"unknown method {name!r} (known: {known}; {'; '.join(registry.family_patterns())}; "
                     f"or module:factory)")


def _importable_module(name: str) -> bool:
    """``solver:`` / ``policy:`` are prefixes unless the user really has a module of that name."""
    if name in sys.modules:
        return True
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def resolve_all(text: str | list[str]) -> tuple[MethodSpec, ...]:
    specs = split_specs(text) if isinstance(text, str) else list(text)
    if not specs:
        raise InputError("command line", "--methods", "no method given")
    out = tuple(resolve(s) for s in specs)
    labels = [m.label for m in out]
    dup = next((x for x in labels if labels.count(x) > 1), None)
    if dup is not None:
        raise InputError("command line", "--methods", f"{dup!r} given twice")
    return out


def registered() -> list[str]:
    """Every registered solver and policy by name (families add their members through a ``members``
    attribute of their resolver, when they have one; ``all`` in ``--methods`` means this list)."""
    out = list(registry.names("jctlab.methods"))
    pols = registry.names("jctlab.policies")
    out += [p if p not in out else f"policy:{p}" for p in pols]
    for ep in sorted(registry.group("jctlab.policy_families").values(), key=lambda e: e.name):
        try:
            members = getattr(ep.load(), "members", ())
        except Exception:   # a broken family is reported when it is named, not here
            members = ()
        out += [m for m in members if m not in out]
    return out
