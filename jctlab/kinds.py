"""Instance kinds of ``jctlab make-instance``: each has ``help``, ``add_arguments`` and ``build``."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Callable

from .errors import InputError
from .model import Instance


def _csv(cast: Callable = str) -> Callable[[str], list]:
    def parse(s: str) -> list:
        try:
            return [cast(x) for x in s.split(",") if x.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a comma-separated list, got {s!r}") from None
    return parse


def _common(p: argparse.ArgumentParser, gpus: int, nodes: int, jobs: int) -> None:
    p.add_argument("--gpus", type=int, default=gpus, help="number of GPUs")
    p.add_argument("--nodes", type=int, default=nodes, help="number of nodes (homogeneous each)")
    p.add_argument("--jobs", type=int, default=jobs)
    p.add_argument("--types", type=_csv(), default=["v100", "p100", "k80"], help="GPU types, round-robin over nodes")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--variability", type=float, default=0.0, help="σ of per-GPU per-class slowdown (1+|N(0,σ)|)")
    p.add_argument("--locality-penalty", type=float, default=1.0)
    p.add_argument("--cpu-mem", action="store_true", help="give jobs Synergy-style cpu_mem tables")
    p.add_argument("--ps", action="store_true", help="make every other job a parameter-server job")
    p.add_argument("--interference", type=float, default=0.0, help="max interference coefficient between classes")
    p.add_argument("--objective", default="mean_jct", choices=["mean_jct", "weighted_jct", "makespan"])
    p.add_argument("--name", default=None)


def _check(a: argparse.Namespace) -> None:
    if a.gpus < 1 or a.nodes < 1 or a.nodes > a.gpus:
        raise InputError("command line", "--gpus/--nodes", "need 1 <= nodes <= gpus")
    if a.jobs < 1:
        raise InputError("command line", "--jobs", "must be >= 1")
    if a.variability < 0 or a.interference < 0 or a.locality_penalty < 1:
        raise InputError("command line", "--variability/--interference/--locality-penalty", "out of range")


@dataclass(frozen=True)
class StaticKind:
    help: str = "synthetic heterogeneous multi-job placement (every job starts at 0)"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        _common(p, 16, 4, 8)
        p.add_argument("--sizes", type=_csv(int), default=[1, 2, 4], help="allowed GPU counts of every job")

    def build(self, a: argparse.Namespace) -> Instance:
        from .generators import static_instance

        _check(a)
        if not a.sizes or min(a.sizes) < 1:
            raise InputError("command line", "--sizes", "needs positive GPU counts")
        return static_instance(gpus=a.gpus, nodes=a.nodes, jobs=a.jobs, types=a.types, sizes=a.sizes, seed=a.seed,
                               variability=a.variability, locality_penalty=a.locality_penalty, cpu_mem=a.cpu_mem,
                               ps=a.ps, interference=a.interference, objective=a.objective, name=a.name)


@dataclass(frozen=True)
class OfflineKind:
    help: str = "synthetic jobs with Poisson arrivals, rigid and elastic (offline or preemptive class)"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        _common(p, 32, 4, 20)
        p.add_argument("--interarrival", type=float, default=900.0, help="mean seconds between arrivals")
        p.add_argument("--min-hours", type=float, default=0.1)
        p.add_argument("--max-hours", type=float, default=2.0)
        p.add_argument("--max-size", type=int, default=8)
        p.add_argument("--elastic", type=float, default=0.5, help="fraction of elastic jobs")
        p.add_argument("--restart", type=float, default=30.0, help="restart_s of preempted jobs")
        p.add_argument("--problem", default="offline", choices=["offline", "preemptive"])

    def build(self, a: argparse.Namespace) -> Instance:
        from .generators import offline_instance

        _check(a)
        if not (0 < a.min_hours <= a.max_hours) or a.interarrival <= 0 or a.max_size < 1 or not 0 <= a.elastic <= 1:
            raise InputError("command line", "--min-hours/--max-hours/--interarrival/--max-size/--elastic", "out of range")
        return offline_instance(gpus=a.gpus, nodes=a.nodes, jobs=a.jobs, types=a.types, interarrival_s=a.interarrival,
                                duration_h=(a.min_hours, a.max_hours), max_size=a.max_size, elastic=a.elastic,
                                seed=a.seed, variability=a.variability, locality_penalty=a.locality_penalty,
                                cpu_mem=a.cpu_mem, ps=a.ps, interference=a.interference, restart_s=a.restart,
                                problem=a.problem, objective=a.objective, name=a.name)


KINDS = {"static": StaticKind(), "offline": OfflineKind()}
