"""Workloads of the MAIFS-like policy: jobs with Synergy's CPU/memory sensitivity and co-location interference.

Two instance makers, both seeded (same arguments and seed, same instance) and usable as evaluation-suite
generators (``module:function`` with ``seed`` and ``name``):

- :func:`synergy_instance` (no raw data): arrivals, sizes, durations and per-type throughputs of
  :func:`jctlab.generators.offline_instance` (Poisson, or ``bursts``); every job is one of Synergy's 12
  profiled models (drawn uniformly, Synergy's own workload mix) and carries that model's measured
  ``cpu_mem`` table (the shipped ``synergy_cpu_mem.json``, so it runs without ``../shared``); nodes are
  Synergy's calibrated server shape (3 CPUs and 62.5 GB per GPU: the tables' speedup 1.0) or machines
  drawn from Alibaba PAI's population (``cluster="pai"``, :func:`jctlab.loaders.alibaba.alibaba_nodes`);
  class interference from Gavel's measured co-location table (below).
- :func:`philly_synergy_instance` (needs the Philly trace): a window of the Philly trace (arrivals,
  GPU counts, durations; :func:`jctlab.loaders.philly.load_philly`, Gavel job types), Synergy's tables
  attached by model (:func:`jctlab.loaders.synergy.attach_cpu_mem`: the ResNet types get one, the others
  keep the fair share), Gavel's interference, optionally re-hosted on PAI machine shapes
  (:func:`jctlab.loaders.alibaba.load_alibaba`). This is the ``make-instance philly | synergy | alibaba``
  pipeline as one call.

Interference: Gavel measured two jobs sharing *one GPU*; SPEC applies ``interference`` to jobs sharing a
*node*, so the coefficients are scaled by ``interference_scale`` (default 0.1: a median slowdown of 7 %
per co-located neighbour; an assumption, not a measurement). Synergy's models are mapped to the Gavel
job type of the closest model family (:data:`GAVEL_FAMILY`: image CNNs to ResNet-18, speech and LSTM
models to LM, attention models to Transformer; also an assumption).

:data:`FAMILIES` names the training and evaluation families (:class:`MaifsFamily`); seeds 0-8,999 are
for training, 9,000-9,999 for development (choosing between checkpoints), 10,000 and above for evaluation
(:func:`family_instances`, :func:`suite_instance`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from jctlab.errors import InputError
from jctlab.generators import offline_instance
from jctlab.loaders.alibaba import alibaba_nodes, load_alibaba, rehost
from jctlab.loaders.gavel import interference_table
from jctlab.loaders.philly import load_philly
from jctlab.loaders.synergy import attach_cpu_mem, models as synergy_models
from jctlab.model import Instance

EVAL_SEED = 10_000
DEV_SEED = 9_000        # seeds 9,000-9,999: development (model selection), never drawn in training
SYNERGY_CPUS_PER_GPU = 3.0      # the fair share Synergy's speedups are relative to
SYNERGY_MEM_GB_PER_GPU = 62.5

#: Synergy model -> the Gavel job type whose co-location figures stand for it (assumed model families)
GAVEL_FAMILY = {
    "alexnet": "ResNet-18 (batch size 128)", "mobilenet": "ResNet-18 (batch size 128)",
    "shufflenet": "ResNet-18 (batch size 128)", "res18": "ResNet-18 (batch size 64)",
    "res50": "ResNet-50 (batch size 64)", "vae": "ResNet-18 (batch size 32)",
    "lstm": "LM (batch size 20)", "deepspeech": "LM (batch size 40)", "m5": "LM (batch size 80)",
    "transformer": "Transformer (batch size 64)", "bert": "Transformer (batch size 32)",
    "gnmt": "Transformer (batch size 128)",
}


def scaled_interference(classes: dict[str, str], scale: float) -> dict[str, dict[str, float]]:
    """SPEC ``interference`` between job classes, from Gavel's table through ``classes`` (class -> Gavel
    type) times ``scale``; pairs Gavel does not have are 0."""
    gavel = interference_table(sorted(set(classes.values())))
    out: dict[str, dict[str, float]] = {}
    for a, ga in classes.items():
        row = {b: round(scale * gavel.get(ga, {}).get(gb, 0.0), 4) for b, gb in classes.items()}
        row = {b: v for b, v in row.items() if v > 0}
        if row:
            out[a] = row
    return out


def synergy_instance(gpus: int = 16, nodes: int = 4, jobs: int = 12, seed: int = 0,
                     types: tuple[str, ...] | list[str] = ("v100", "p100"), interarrival_s: float = 600.0,
                     duration_h: tuple[float, float] | list[float] = (0.1, 1.5), max_size: int = 8,
                     elastic: float = 0.5, bursts: int = 0, burst_gap_s: float = 3600.0,
                     interference_scale: float = 0.1, cluster: str = "synergy", topology: bool = False,
                     problem: str = "offline", name: str | None = None) -> Instance:
    """Jobs of Synergy's models with their measured ``cpu_mem`` tables (see the module docstring).

    ``cluster="synergy"``: ``gpus`` over ``nodes`` nodes of ``types`` (round robin), 3 CPUs and 62.5 GB
    per GPU; ``cluster="pai"``: ``nodes`` machines drawn from PAI's V100/P100 population (``gpus`` and
    ``types`` are then the machines'). ``bursts`` > 0 redraws arrivals in that many bursts
    ``burst_gap_s`` apart (queue-heavy); ``interference_scale`` 0 switches interference off.
    """
    if interference_scale < 0:
        raise InputError("interference_scale", "", "must be >= 0")
    if cluster not in ("synergy", "pai"):
        raise InputError("cluster", "", f"{cluster!r}: 'synergy' or 'pai'")
    base = offline_instance(gpus=gpus, nodes=nodes, jobs=jobs, types=tuple(types), interarrival_s=interarrival_s,
                            duration_h=tuple(duration_h), max_size=max_size, elastic=elastic, seed=seed,
                            problem=problem, topology=topology and cluster == "synergy",
                            name=name or f"synergy-{cluster}-{problem}-k{gpus}-n{jobs}-seed{seed}")
    rng = np.random.default_rng([seed, 47])          # a stream of its own: the base instance stays the same
    tab = synergy_models()
    names = sorted(tab)
    d = base.to_dict()
    for j in d["jobs"]:
        m = names[int(rng.integers(len(names)))]
        j["model"] = m
        j["class"] = m
        j["cpu_mem"] = {"levels": [list(lv) for lv in tab[m]["cpu_mem"]["levels"]]}
    if bursts > 0:
        per = np.array_split(np.arange(len(d["jobs"])), bursts)
        for b, idx in enumerate(per):
            for k in idx:
                d["jobs"][int(k)]["arrival"] = round(b * burst_gap_s + float(rng.uniform(0.0, 60.0)), 3)
        d["jobs"].sort(key=lambda j: j["arrival"])
    for nd in d["cluster"]["nodes"]:
        k = len(nd["gpus"])
        nd["cpus"], nd["mem_gb"] = SYNERGY_CPUS_PER_GPU * k, SYNERGY_MEM_GB_PER_GPU * k
    d["cluster"]["interference"] = scaled_interference({m: GAVEL_FAMILY[m] for m in names}, interference_scale)
    d["source"] = {"kind": "maifs-synergy", "seed": seed, "cpu_mem": "synergy models", "interference_scale":
                   interference_scale, "cluster": cluster}
    inst = Instance.from_dict(d, "<generated synergy>")
    if cluster == "pai":
        pai = alibaba_nodes(nodes, seed=seed)
        inst = rehost(inst, pai, type_map={"v100": types[0], "v100m32": types[0],
                                           "p100": types[1] if len(types) > 1 else types[0]}, name=inst.name)
    return inst


def philly_synergy_instance(seed: int = 0, name: str | None = None, data_dir: str | None = None, jobs: int = 24,
                            nodes: int = 4, gpus_per_node: int = 8, window_days: float = 60.0,
                            interference_scale: float = 0.1, pai_machines: int = 0,
                            locality_penalty: float = 1.3) -> Instance:
    """``jobs`` consecutive Philly jobs from a start drawn by ``seed`` within the first ``window_days`` of
    the trace, offline class, on ``nodes`` x ``gpus_per_node`` V100s (or ``pai_machines`` PAI machines),
    with Synergy's tables and Gavel's scaled interference (see the module docstring)."""
    start = float(np.random.default_rng([seed, 4747]).uniform(0.0, window_days * 86400.0))
    base = load_philly(data_dir=data_dir, start=start, max_jobs=jobs, seed=seed, nodes=nodes,
                       gpus_per_node=gpus_per_node, problem="offline", locality_penalty=locality_penalty)
    inst = attach_cpu_mem(base)
    d = inst.to_dict()
    classes = sorted({j["class"] for j in d["jobs"]})
    d["cluster"]["interference"] = scaled_interference({c: c for c in classes}, interference_scale)
    d["name"] = name or f"philly-synergy-j{jobs}-{nodes}x{gpus_per_node}-s{seed}"
    inst = Instance.from_dict(d, "<philly + synergy>")
    if pai_machines:
        inst = load_alibaba(inst, pai_machines, seed=seed, name=d["name"])
    return inst


# ----------------------------------------------------------------------------- families


@dataclass(frozen=True)
class MaifsFamily:
    """A seeded :func:`synergy_instance` family with sizes drawn per seed."""

    name: str
    nodes: tuple[int, ...]
    jobs: tuple[int, ...]
    gpus_per_node: int = 4
    fixed: dict[str, Any] = field(default_factory=dict)

    def make(self, seed: int, scale: int = 1, **overrides: Any) -> Instance:
        """The family's instance of ``seed``; ``scale`` multiplies its nodes and jobs (the same load);
        ``overrides`` replace the family's fixed :func:`synergy_instance` arguments."""
        rng = np.random.default_rng([seed, 4700])
        n = int(self.nodes[rng.integers(len(self.nodes))]) * scale
        j = int(self.jobs[rng.integers(len(self.jobs))]) * scale
        kw = dict(self.fixed, **overrides)
        if "interarrival_s" in kw:
            kw["interarrival_s"] = kw["interarrival_s"] / scale
        return synergy_instance(gpus=n * self.gpus_per_node, nodes=n, jobs=j, seed=seed,
                                name=f"{self.name}{'' if scale == 1 else f'-x{scale}'}-k{n * self.gpus_per_node}"
                                     f"-n{j}-seed{seed}", **kw)


FAMILIES = {
    # the floor class: small enough for proven optima (6-8 jobs on 2 nodes of 4 GPUs)
    "syn-small": MaifsFamily("syn-small", (2,), (6, 7, 8), fixed=dict(interarrival_s=900.0, duration_h=(0.2, 1.5))),
    # queues: 10-16 jobs in bursts on 2-4 nodes
    "syn-queue": MaifsFamily("syn-queue", (2, 3, 4), (10, 12, 16),
                             fixed=dict(bursts=3, burst_gap_s=2400.0, duration_h=(0.1, 1.0))),
    # Poisson arrivals, 12-20 jobs on 2-4 nodes
    "syn-mixed": MaifsFamily("syn-mixed", (2, 3, 4), (12, 16, 20), fixed=dict(interarrival_s=400.0)),
    # Alibaba PAI machine shapes (8-GPU V100 with 96 CPUs, 2-GPU P100 with 64 CPUs)
    "syn-pai": MaifsFamily("syn-pai", (2, 3, 4), (12, 16), gpus_per_node=4,
                           fixed=dict(cluster="pai", interarrival_s=300.0)),
    # evaluation only: syn-small without interference (the oracle relaxes interference, so it proves optima
    # only where no two jobs would share a node; without it many of these instances are proven)
    "syn-proof": MaifsFamily("syn-proof", (2,), (5, 6, 7),
                             fixed=dict(interarrival_s=900.0, duration_h=(0.2, 1.5), interference_scale=0.0)),
}
TRAIN_FAMILIES = "syn-small,syn-queue,syn-mixed,syn-pai"


def family(name: str) -> MaifsFamily:
    f = FAMILIES.get(name)
    if f is None:
        raise InputError("command line", "--suite", f"unknown MAIFS family {name!r} (known: {', '.join(FAMILIES)})")
    return f


def family_instances(name: str, count: int, split: str = "eval", start: int = 0, scale: int = 1) -> list[Instance]:
    """``count`` instances of a family: seeds 10,000 + start + i for ``eval``, 9,000 + start + i for ``dev``,
    start + i for ``train`` (below 9,000)."""
    base = {"eval": EVAL_SEED, "dev": DEV_SEED, "train": 0}[split]
    if split != "eval" and base + start + count > (DEV_SEED if split == "train" else EVAL_SEED):
        raise ValueError(f"{split} seeds stay below {DEV_SEED if split == 'train' else EVAL_SEED}")
    return [family(name).make(base + start + i, scale) for i in range(count)]


def training_source(names: str = TRAIN_FAMILIES):
    """An env source drawing a family (of a comma-separated list) and a training seed (< 9,000) per episode."""
    fams = [family(n.strip()) for n in names.split(",") if n.strip()]

    def source(rng: np.random.Generator) -> Instance:
        f = fams[int(rng.integers(len(fams)))]
        return f.make(int(rng.integers(0, DEV_SEED)))

    return source


def suite_instance(family_name: str, seed: int, name: str | None = None, scale: int = 1, **overrides: Any) -> Instance:
    """The evaluation-suite generator: ``family_name``'s instance of ``seed`` (>= 10,000), its nodes and jobs
    multiplied by ``scale``, ``overrides`` replacing the family's fixed arguments, named ``name``."""
    if seed < EVAL_SEED:
        raise InputError("seed", "", f"evaluation instances have seeds >= {EVAL_SEED}, got {seed}")
    inst = family(family_name).make(seed, scale, **overrides)
    return inst if name is None else inst.replace_jobs(inst.jobs, name=name)
