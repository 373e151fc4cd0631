"""The ``jctlab`` command (SPEC §6). Exit codes: 0 ok/valid, 1 invalid schedule, 2 bad input.

Verbs from other packages (evaluate, report, train...) and the methods, policies and instance kinds
they bring are found through entry points (:mod:`jctlab.registry`); the core imports none of them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from typing import Any, Sequence

from tqdm import tqdm

from . import __version__, registry
from . import argtypes as T
from .errors import InputError
from .kinds import KINDS
from .limits import json_safe
from .model import load_instance, load_schedule, save_instance, save_schedule
from .replay import Replay, check_references, replay
from .schema import SCHEMAS


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # one line, exit 2
        raise InputError("command line", "", message)


def _summary(inst_name: str, method: str, status: str, rep: Replay | None, lower_bound: float | None,
             runtime_s: float | None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "instance": inst_name, "method": method, "status": status,
        "valid": bool(rep and rep.valid), "objective": rep.objective if rep else None,
        "lower_bound": lower_bound, "runtime_s": runtime_s,
        "metrics": dict(rep.metrics) if rep else {},
    }
    if rep is not None and not rep.valid:
        out["error"] = rep.error
    return out


def _print(summary: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print(json.dumps(summary, allow_nan=False, default=_nan_to_none))
        return
    print(f"{summary['instance']}  method={summary['method']}  status={summary['status']}  valid={summary['valid']}")
    if summary.get("error"):
        print(f"  error: {summary['error']}")
    if summary.get("blocks"):
        bl = summary["blocks"]
        proven = sum(b["status"] == "optimal" for b in bl)
        print(f"  blocks: {len(bl)} busy periods of {'+'.join(str(b['jobs']) for b in bl)} jobs, {proven} proven optimal")
    if summary["objective"] is not None:
        lb, obj = summary["lower_bound"], summary["objective"]
        gap = f"  gap(lb)={(obj - lb) / lb:.4%}" if lb is not None and lb > 0 else ""
        lbs = "None" if lb is None else f"{lb:.10g}"
        rt = summary["runtime_s"]
        print(f"  objective={obj:.10g}  lower_bound={lbs}{gap}  runtime_s={'None' if rt is None else f'{rt:.2f}'}")
    for k, v in summary["metrics"].items():
        print(f"  {k:>20} = {v:.6g}" if isinstance(v, float) else f"  {k:>20} = {v}")


def _nan_to_none(x: Any) -> Any:
    return None


# ----------------------------------------------------------------------------- verbs


def cmd_replay(a: argparse.Namespace) -> int:
    inst = load_instance(a.instance)
    sched = load_schedule(a.schedule)
    rep = replay(inst, sched, source=a.schedule)
    c = sched.claimed
    status = c.status if c else ("feasible" if rep.valid else "error")
    _print(json_safe(_summary(inst.name, sched.method, status, rep, c.lower_bound if c else None,
                              c.runtime_s if c else None)), a.json)
    return 0 if rep.valid else 1


def cmd_schema(a: argparse.Namespace) -> int:
    print(json.dumps(SCHEMAS[a.which](), indent=1))
    return 0


@contextlib.contextmanager
def _named_file(inst, path: str):
    """A method or policy refusing the instance names it by its name; the user knows it by its file."""
    try:
        yield
    except InputError as e:
        if e.source != inst.name:
            raise
        raise InputError(path, e.field, e.reason) from None


def cmd_solve(a: argparse.Namespace, extra: Sequence[str]) -> int:
    inst = load_instance(a.instance)
    fn = registry.method(a.method)
    if fn is None:
        raise InputError("command line", "--method",
                         f"unknown method {a.method!r} (known: {', '.join(registry.names('jctlab.methods')) or 'none'})")
    opts = T.parse_options(fn, extra, f"method {a.method}")
    hint = None
    if a.hint:
        hint = load_schedule(a.hint)
        check_references(inst, hint, a.hint)
    with _named_file(inst, a.instance):
        res = fn(inst, time_limit=a.time_limit, threads=a.threads, seed=a.seed, hint=hint, **opts)
    rep = None
    sched = res.claimed_schedule()
    if sched is not None:
        rep = replay(inst, sched)
        if a.out and rep.valid:
            save_schedule(sched, a.out)
    summary = _summary(inst.name, a.method, res.status if (rep is None or rep.valid) else "error", rep,
                       res.lower_bound, res.runtime_s)
    if res.status == "error" and "error" not in summary and res.params.get("error"):
        summary["error"] = str(res.params["error"])     # why the method did not run (e.g. not applicable)
    if res.params.get("blocks"):                        # solved busy period by busy period (oracle.blocks)
        summary["blocks"] = [{"jobs": b["jobs"], "status": b["status"]} for b in res.params["blocks"]]
    _print(json_safe(summary), a.json)
    return 1 if rep is not None and not rep.valid else 0


def cmd_simulate(a: argparse.Namespace, extra: Sequence[str]) -> int:
    from .simulate import PolicyError, simulate

    inst = load_instance(a.instance)
    factory = registry.policy_factory(a.policy)
    if factory is None:
        raise InputError("command line", "--policy",
                         f"unknown policy {a.policy!r} (known: {', '.join(registry.names('jctlab.policies'))}; "
                         f"{'; '.join(registry.family_patterns())})")
    opts = T.parse_options(factory, extra, f"policy {a.policy}")
    round_s = a.round       # None: the policy's own round length, if it has one (Simulator)
    try:
        with _named_file(inst, a.instance):
            try:
                policy = factory(inst, seed=a.seed, **opts)
            except ValueError as e:  # a policy refusing its options (e.g. Tiresias thresholds not increasing)
                raise InputError("command line", "--policy", f"{a.policy}: {e}") from None
            # jobs done, on stderr when it is a terminal (tqdm's default): a trace takes minutes
            with tqdm(total=len(inst.jobs), desc=a.policy, unit="job", disable=None, leave=False,
                      file=sys.stderr) as bar:
                sched, rep = simulate(inst, policy, round_s=round_s, method=a.policy,
                                      progress=None if bar.disable else lambda done: _advance(bar, done))
    except PolicyError as e:
        raise InputError(a.instance, "--policy", str(e)) from None
    if a.out:
        save_schedule(sched, a.out)
    _print(json_safe(_summary(inst.name, a.policy, "feasible", rep, None, sched.claimed.runtime_s)), a.json)  # type: ignore[union-attr]
    return 0


def _advance(bar: tqdm, done: int) -> None:
    """Move the bar to ``done`` jobs; at the last one the schedule's replay (a third of a run) begins."""
    if done != bar.n:
        bar.update(done - bar.n)
        if done == bar.total:
            bar.set_postfix_str("replaying the schedule")


def cmd_make_instance(a: argparse.Namespace) -> int:
    kind = a.kind_obj
    try:
        inst = kind.build(a)
    except ValueError as e:  # a generator refusing its arguments
        raise InputError("command line", a.kind, str(e)) from None
    except InputError as e:  # options that make a generated instance break the contract (SPEC §7)
        if not e.source.startswith("<generated"):
            raise
        raise InputError("command line", a.kind, f"these options make an invalid instance: {e.field}: {e.reason}") from None
    save_instance(inst, a.out)
    print(f"wrote {a.out}: {inst.name} ({inst.problem}, {len(inst.jobs)} jobs, {len(inst.cluster.gpus)} GPUs)",
          file=sys.stderr)
    return 0


# ----------------------------------------------------------------------------- parser


#: the verbs this module defines; the rest come from ``jctlab.commands`` plug-ins
CORE_VERBS = ("replay", "schema", "solve", "simulate", "make-instance")


def build_parser(plugins: bool = True) -> argparse.ArgumentParser:
    """The command line; ``plugins=False`` leaves out the verbs of ``jctlab.commands`` plug-ins, whose
    modules import pandas, torch or the solvers (a core verb pays none of that at start-up)."""
    p = _Parser(prog="jctlab", description="Exact and certified-bounded JCT references for DL cluster schedulers.")
    p.add_argument("--version", action="version", version=f"jctlab {__version__}")
    sub = p.add_subparsers(dest="verb", required=True, parser_class=_Parser)

    r = sub.add_parser("replay", help="check a schedule against an instance and compute its metrics")
    r.add_argument("instance")
    r.add_argument("schedule")
    r.add_argument("--json", action="store_true")
    r.set_defaults(func=cmd_replay)

    s = sub.add_parser("schema", help="print the JSON Schema of a format")
    s.add_argument("which", choices=sorted(SCHEMAS))
    s.add_argument("--json", action="store_true", help="(the output is JSON in any case)")
    s.set_defaults(func=cmd_schema)

    so = sub.add_parser("solve", help="run an offline method (oracle, matching, sampling...) on an instance")
    so.add_argument("instance")
    so.add_argument("--method", required=True)
    so.add_argument("--time-limit", type=T.TIME_LIMIT, default=None)
    so.add_argument("--threads", type=T.THREADS, default=1)
    so.add_argument("--seed", type=T.SEED, default=0)
    so.add_argument("--hint", type=T.text, default=None, help="a schedule to warm-start from")
    so.add_argument("--out", type=T.out_path, default=None)
    so.add_argument("--json", action="store_true")
    so.set_defaults(func=cmd_solve, takes_extra=True)

    si = sub.add_parser("simulate", help="run an online policy through the event-driven simulator")
    si.add_argument("instance")
    si.add_argument("--policy", required=True)
    si.add_argument("--round", type=T.ROUND, default=None, help="round length in seconds (round-based policies)")
    si.add_argument("--seed", type=T.SEED, default=0)
    si.add_argument("--out", type=T.out_path, default=None)
    si.add_argument("--json", action="store_true")
    si.set_defaults(func=cmd_simulate, takes_extra=True)

    mk = sub.add_parser("make-instance", help="generate an instance or build one from real traces")
    mk_sub = mk.add_subparsers(dest="kind", required=True, parser_class=_Parser)
    kinds = dict(KINDS)
    for name in registry.names("jctlab.instance_kinds"):
        kinds.setdefault(name, registry.load("jctlab.instance_kinds", name))
    for name, kind in sorted(kinds.items()):
        kp = mk_sub.add_parser(name, help=kind.help)
        kind.add_arguments(kp)
        kp.add_argument("--out", required=True, type=T.out_path, help="instance file to write")
        kp.set_defaults(func=cmd_make_instance, kind_obj=kind)

    if plugins:
        for name in registry.names("jctlab.commands"):
            registry.load("jctlab.commands", name)(sub)
    return p


class _Warnings(logging.Handler):
    """Library warnings (logger ``jctlab``, e.g. a cache file moved aside) as one ``jctlab: warning:`` line on
    the standard error of the moment (a caller may have redirected it)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(f"jctlab: warning: {record.getMessage()}", file=sys.stderr)


def _log_to_stderr() -> None:
    log = logging.getLogger("jctlab")
    if not any(isinstance(h, _Warnings) for h in log.handlers):
        log.addHandler(_Warnings(logging.WARNING))
        log.propagate = False


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _log_to_stderr()
    try:
        verb = next((x for x in argv if not x.startswith("-")), None)
        parser = build_parser(plugins=verb not in CORE_VERBS)
        a, extra = parser.parse_known_args(argv)
        if extra and not getattr(a, "takes_extra", False):
            raise InputError("command line", extra[0], "unrecognized argument")
        if getattr(a, "takes_extra", False):
            return a.func(a, extra)
        return a.func(a)
    except InputError as e:
        print(f"jctlab: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("jctlab: interrupted", file=sys.stderr)
        return 130


def entry() -> None:
    sys.exit(main())


if __name__ == "__main__":
    entry()
