"""Instance kinds of ``jctlab make-instance``: each has ``help``, ``add_arguments`` and ``build``."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from . import argtypes as T
from . import limits as L
from .errors import InputError
from .model import Instance

#: sizes of synthetic instances (the contract's limits, SPEC §7, are wider)
MAX_SYNTH = 100_000
COUNT = T.integer(1, MAX_SYNTH)
GPUS_PER_NODE = T.integer(1, 1_024)
#: σ of the synthetic per-GPU slowdown 1 + |N(0, σ)|: at 10 a factor beyond 1e3 (SPEC §7) is a 1e-21 event
VARIABILITY_SIGMA = T.number(L.Range(0, 10))
HOURS = T.number(L.Range(0, 1e5, lo_open=True))


def _common(p: argparse.ArgumentParser, gpus: int, nodes: int, jobs: int) -> None:
    p.add_argument("--gpus", type=COUNT, default=gpus, help="number of GPUs")
    p.add_argument("--nodes", type=COUNT, default=nodes, help="number of nodes (homogeneous each)")
    p.add_argument("--jobs", type=COUNT, default=jobs)
    p.add_argument("--types", type=T.names, default=["v100", "p100", "k80"], help="GPU types, round-robin over nodes")
    p.add_argument("--seed", type=T.SEED, default=0)
    p.add_argument("--variability", type=VARIABILITY_SIGMA, default=0.0,
                   help="σ of per-GPU per-class slowdown (1+|N(0,σ)|), in [0, 10]")
    p.add_argument("--locality-penalty", type=T.number(L.LOCALITY), default=1.0)
    p.add_argument("--cpu-mem", action="store_true", help="give jobs Synergy-style cpu_mem tables")
    p.add_argument("--ps", action="store_true", help="make every other job a parameter-server job")
    p.add_argument("--interference", type=T.number(L.INTERFERENCE), default=0.0,
                   help="max interference coefficient between classes")
    p.add_argument("--objective", default="mean_jct", choices=["mean_jct", "weighted_jct", "makespan"])
    p.add_argument("--name", type=T.text, default=None)
    _topology_args(p)


def _topology_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topology", action="store_true",
                   help="two CPU sockets per node, PCIe switches of two GPUs (SPEC v1.1 topology)")
    p.add_argument("--qpi-factor", type=T.number(L.LOCALITY), default=None,
                   help="cross-socket factor, in [1, 1000] (default 1.2 with --topology)")
    p.add_argument("--pcie-interference", type=T.number(L.INTERFERENCE), default=None,
                   help="per job sharing a PCIe switch, in [0, 100] (default 0.1 with --topology)")


def _topology(a: argparse.Namespace, inst: Instance) -> Instance:
    """The generated instance with the factors given on the command line (the generator sets the defaults)."""
    if a.qpi_factor is None and a.pcie_interference is None:
        return inst
    if not a.topology:
        raise InputError("command line", "--qpi-factor/--pcie-interference", "need --topology")
    d = inst.to_dict()
    for key, v in (("qpi_factor", a.qpi_factor), ("pcie_interference", a.pcie_interference)):
        if v is not None:
            d["cluster"][key] = v
    return Instance.from_dict(d, "command line")


def _check(a: argparse.Namespace) -> None:
    if a.nodes > a.gpus:
        raise InputError("command line", "--nodes", f"{a.nodes} nodes for --gpus {a.gpus}: need nodes <= gpus")


@dataclass(frozen=True)
class StaticKind:
    help: str = "synthetic heterogeneous multi-job placement (every job starts at 0)"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        _common(p, 16, 4, 8)
        p.add_argument("--sizes", type=T.integers(1, MAX_SYNTH), default=[1, 2, 4],
                       help="allowed GPU counts of every job")

    def build(self, a: argparse.Namespace) -> Instance:
        from .generators import static_instance

        _check(a)
        return _topology(a, static_instance(
            gpus=a.gpus, nodes=a.nodes, jobs=a.jobs, types=a.types, sizes=a.sizes, seed=a.seed,
            variability=a.variability, locality_penalty=a.locality_penalty, cpu_mem=a.cpu_mem, ps=a.ps,
            interference=a.interference, objective=a.objective, name=a.name, topology=a.topology))


@dataclass(frozen=True)
class OfflineKind:
    help: str = "synthetic jobs with Poisson arrivals, rigid and elastic (offline or preemptive class)"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        _common(p, 32, 4, 20)
        p.add_argument("--interarrival", type=T.number(L.Range(0, 1e6, lo_open=True)), default=900.0,
                       help="mean seconds between arrivals")
        p.add_argument("--min-hours", type=HOURS, default=0.1)
        p.add_argument("--max-hours", type=HOURS, default=2.0)
        p.add_argument("--max-size", type=COUNT, default=8)
        p.add_argument("--elastic", type=T.number(L.Range(0, 1)), default=0.5, help="fraction of elastic jobs")
        p.add_argument("--restart", type=T.number(L.TIME), default=30.0, help="restart_s of preempted jobs")
        p.add_argument("--problem", default="offline", choices=["offline", "preemptive"])

    def build(self, a: argparse.Namespace) -> Instance:
        from .generators import offline_instance

        _check(a)
        if a.min_hours > a.max_hours:
            raise InputError("command line", "--min-hours", f"{a.min_hours:g} is above --max-hours {a.max_hours:g}")
        return _topology(a, offline_instance(
            gpus=a.gpus, nodes=a.nodes, jobs=a.jobs, types=a.types, interarrival_s=a.interarrival,
            duration_h=(a.min_hours, a.max_hours), max_size=a.max_size, elastic=a.elastic, seed=a.seed,
            variability=a.variability, locality_penalty=a.locality_penalty, cpu_mem=a.cpu_mem, ps=a.ps,
            interference=a.interference, restart_s=a.restart, problem=a.problem, objective=a.objective,
            name=a.name, topology=a.topology))


KINDS = {"static": StaticKind(), "offline": OfflineKind()}


# --------------------------------------------------------------------------- real data


def _data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data-dir", type=T.text, default=None,
                   help="raw data directory (default: $JCTLAB_DATA or ../shared/data)")
    p.add_argument("--problem", default="preemptive", choices=["static", "offline", "preemptive"])
    p.add_argument("--objective", default="mean_jct", choices=["mean_jct", "weighted_jct", "makespan"])
    p.add_argument("--restart", type=T.number(L.TIME), default=0.0, help="restart_s of preempted jobs")
    p.add_argument("--max-jobs", type=T.integer(1, L.MAX_JOBS), default=None)
    p.add_argument("--name", type=T.text, default=None)


@dataclass(frozen=True)
class GavelKind:
    help: str = "a Gavel trace (gavel_traces/*.trace) on a K80/P100/V100 cluster with Gavel's measured throughputs"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--trace", required=True, type=T.text, help="Gavel .trace file")
        p.add_argument("--cluster", type=T.text, default="4:4:4", help="V100:P100:K80 GPU counts")
        p.add_argument("--gpus-per-server", type=T.text, default="4", help="one count, or V,P,K counts (e.g. 4,4,8)")
        p.add_argument("--interference", action="store_true", help="attach Gavel's co-location interference")
        _data_args(p)

    def build(self, a: argparse.Namespace) -> Instance:
        from .loaders.gavel import load_trace

        return load_trace(a.trace, a.cluster, a.gpus_per_server, problem=a.problem, objective=a.objective,
                          interference=a.interference, restart_s=a.restart, max_jobs=a.max_jobs, name=a.name)


@dataclass(frozen=True)
class GavelPhillyVCKind:
    help: str = "Gavel's Philly-derived per-virtual-cluster traces (job types and steps from Gavel)"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--vc", type=T.text, default=None, help="virtual cluster id (omit to list them)")
        p.add_argument("--cluster", type=T.text, default="64:0:0", help="V100:P100:K80 GPU counts")
        p.add_argument("--gpus-per-server", type=T.text, default="8")
        p.add_argument("--interference", action="store_true")
        _data_args(p)

    def build(self, a: argparse.Namespace) -> Instance:
        from .loaders.gavel import load_philly_vc

        return load_philly_vc(a.vc, a.cluster, a.gpus_per_server, data_dir=a.data_dir, max_jobs=a.max_jobs,
                              problem=a.problem, objective=a.objective, interference=a.interference,
                              restart_s=a.restart, name=a.name)


@dataclass(frozen=True)
class PhillyKind:
    help: str = "the 82,247-job Philly trace (arrivals, sizes, durations) with Gavel job types drawn by seed"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--trace", type=T.text, default=None,
                       help="philly.csv (default: <data-dir>/pollux_adaptdl/traces/philly.csv)")
        p.add_argument("--vc", type=T.text, default=None, help="keep one virtual cluster (the `cluster` column)")
        p.add_argument("--start", type=T.text, default=None,
                       help="window start: seconds after the first arrival (e.g. 3600), or a date (2017-10-03)")
        p.add_argument("--end", type=T.text, default=None,
                       help="window end (excluded): seconds after the first arrival, or a date")
        p.add_argument("--seed", type=T.SEED, default=0, help="seed of the job-type draw")
        p.add_argument("--nodes", type=COUNT, default=8)
        p.add_argument("--gpus-per-node", type=GPUS_PER_NODE, default=8)
        p.add_argument("--gpu-type", type=T.text, default="v100")
        p.add_argument("--locality-penalty", type=T.number(L.LOCALITY), default=1.0)
        _data_args(p)

    def build(self, a: argparse.Namespace) -> Instance:
        from .loaders.philly import load_philly

        return load_philly(a.trace, data_dir=a.data_dir, vc=a.vc, start=a.start, end=a.end, max_jobs=a.max_jobs,
                           seed=a.seed, nodes=a.nodes, gpus_per_node=a.gpus_per_node, gpu_type=a.gpu_type,
                           problem=a.problem, objective=a.objective, restart_s=a.restart,
                           locality_penalty=a.locality_penalty, name=a.name)


@dataclass(frozen=True)
class PalKind:
    help: str = "PAL's Sia-Philly workloads with per-GPU variability from PAL's Longhorn class profiles"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--workload", type=T.text, default="1", help="workload number (1-6) or a CSV path")
        p.add_argument("--profiles", type=T.text, default=None,
                       help="PAL's raw profile folder (pal_gpu_variability, with sim/*-longhorn-agg.csv) to "
                            "sample from, or a per-GPU factor table in the artifact's CSV format "
                            "(GPU_ID,PerfVar_classA..D) to use as is; default: the profiles shipped with jctlab")
        p.add_argument("--variability", default="pal", choices=["pal", "identity", "artifact", "cluster32", "none"],
                       help="pal: per-class draws as PAL's simulator; identity: each GPU keeps one measured identity")
        p.add_argument("--binned", action="store_true", help="store PAL's k-means bin factors instead of raw values")
        p.add_argument("--background", action="store_true", help="add the artifact's untracked background jobs")
        p.add_argument("--nodes", type=COUNT, default=16)
        p.add_argument("--gpus-per-node", type=GPUS_PER_NODE, default=4)
        p.add_argument("--locality-penalty", type=T.number(L.LOCALITY), default=1.7)
        p.add_argument("--seed", type=T.SEED, default=42)
        _data_args(p)

    def build(self, a: argparse.Namespace) -> Instance:
        from .loaders.pal import load_pal

        w = a.workload
        path = None if w.isdigit() else w
        variability, artifact_csv, profiles_dir = a.variability, None, None
        if a.profiles is not None:
            if Path(a.profiles).is_dir():
                profiles_dir = a.profiles
            elif Path(a.profiles).is_file():
                variability, artifact_csv = "artifact", a.profiles
            else:
                raise InputError(a.profiles, "", "no such file or folder (expected PAL's profiles)")
        return load_pal(int(w) if path is None else 1, path=path, data_dir=a.data_dir, nodes=a.nodes,
                        gpus_per_node=a.gpus_per_node, locality_penalty=a.locality_penalty, variability=variability,
                        seed=a.seed, binned=a.binned, artifact_csv=artifact_csv, background=a.background,
                        problem=a.problem, objective=a.objective, restart_s=a.restart, max_jobs=a.max_jobs,
                        name=a.name, profiles_dir=profiles_dir)


@dataclass(frozen=True)
class AlibabaKind:
    help: str = "re-host an instance's jobs on a heterogeneous cluster shaped like Alibaba PAI's machines"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--base", required=True, type=T.text, help="instance file whose jobs are re-hosted")
        p.add_argument("--machines", type=COUNT, default=16)
        p.add_argument("--sample", default="random", choices=["random", "proportional"])
        p.add_argument("--seed", type=T.SEED, default=0)
        p.add_argument("--name", type=T.text, default=None)
        _topology_args(p)

    def build(self, a: argparse.Namespace) -> Instance:
        from .loaders.alibaba import load_alibaba
        from .model import load_instance

        return _topology(a, load_alibaba(load_instance(a.base), a.machines, seed=a.seed, sample=a.sample,
                                         name=a.name, topology=a.topology))


@dataclass(frozen=True)
class SynergyKind:
    help: str = "attach Synergy's CPU x memory sensitivity (cpu_mem levels) to an instance's jobs by model"

    def add_arguments(self, p: argparse.ArgumentParser) -> None:
        p.add_argument("--base", required=True, type=T.text, help="instance file whose jobs get cpu_mem tables")
        p.add_argument("--overwrite", action="store_true")
        p.add_argument("--name", type=T.text, default=None)

    def build(self, a: argparse.Namespace) -> Instance:
        from .loaders.synergy import attach_cpu_mem
        from .model import load_instance

        return attach_cpu_mem(load_instance(a.base), overwrite=a.overwrite, name=a.name)


KINDS.update({"gavel": GavelKind(), "gavel-philly-vc": GavelPhillyVCKind(), "philly": PhillyKind(),
              "pal": PalKind(), "alibaba": AlibabaKind(), "synergy": SynergyKind()})
