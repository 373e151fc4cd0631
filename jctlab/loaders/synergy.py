"""Synergy (Mohan et al., OSDI'22): CPU x memory sensitivity of jobs as SPEC ``cpu_mem`` tables.

The shipped table ``synergy_cpu_mem.json`` holds, per Synergy model, levels
``[cpus_per_gpu, mem_gb_per_gpu, speedup]`` with speedup 1.0 at Synergy's fair share of 3 CPUs and
62.5 GB per GPU (a 24-CPU, 500-GB, 8-GPU server split evenly). SPEC's null level means the node's
fair share (cpus / #GPUs, mem_gb / #GPUs), so the speedups are calibrated for nodes with 3 CPUs and
62.5 GB per GPU: the loaders' default node shape.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..errors import InputError
from ..model import Instance
from ._common import load_table

# job model name (Gavel job types by their model part, PAL, Synergy's own) -> Synergy model
DEFAULT_MAP = {
    "ResNet-18": "res18", "ResNet-50": "res50", "Transformer": "transformer", "LM": "lstm",
    "resnet50": "res50", "resnet18": "res18", "BERT": "bert", "bert": "bert", "transformer": "transformer",
    "alexnet": "alexnet", "res18": "res18", "res50": "res50", "mobilenet": "mobilenet",
    "shufflenet": "shufflenet", "gnmt": "gnmt", "lstm": "lstm", "vae": "vae", "deepspeech": "deepspeech",
    "m5": "m5",
}


def models(variant: str = "models") -> dict[str, dict[str, Any]]:
    """Synergy model -> {batch, iter_time_s, cpu_mem: {levels}} for a profile variant."""
    tab = load_table("synergy_cpu_mem.json")["models"]
    if variant not in tab:
        raise InputError("variant", "", f"{variant!r}: one of {', '.join(sorted(tab))}")
    return tab[variant]


def cpu_mem_for(model: str | None, variant: str = "models",
                mapping: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """The SPEC ``cpu_mem`` dict for a job model name, or None when no Synergy model matches.

    Gavel job-type names ("ResNet-50 (batch size 64)") are matched by their model part.
    """
    if model is None:
        return None
    m = dict(DEFAULT_MAP, **(mapping or {}))
    key = m.get(model) or m.get(model.split(" (batch size")[0])
    if key is None:
        return None
    tab = models(variant)
    if key not in tab:
        raise InputError("mapping", model, f"maps to {key!r}, which is not a Synergy model")
    return {"levels": [list(lv) for lv in tab[key]["cpu_mem"]["levels"]]}


def attach_cpu_mem(instance: Instance, *, variant: str = "models", mapping: Mapping[str, str] | None = None,
                   overwrite: bool = False, name: str | None = None) -> Instance:
    """A copy of ``instance`` whose jobs carry the Synergy ``cpu_mem`` table of their model.

    Jobs whose model has no Synergy profile (A3C, CycleGAN, Recommendation, vgg19...) keep theirs
    (None); ``mapping`` adds or overrides model -> Synergy model entries. The count of jobs that got
    a table is recorded in the instance's ``source.cpu_mem_jobs``.
    """
    d = instance.to_dict()
    hit = 0
    for j in d["jobs"]:
        if j.get("cpu_mem") is not None and not overwrite:
            continue
        cm = cpu_mem_for(j.get("model"), variant, mapping)
        if cm is not None:
            j["cpu_mem"] = cm
            hit += 1
    src = dict(d.get("source") or {})
    src.update(cpu_mem_variant=variant, cpu_mem_jobs=hit)
    d["source"] = src
    if name:
        d["name"] = name
    return Instance.from_dict(d, source=f"{instance.name} + synergy")


__all__ = ["models", "cpu_mem_for", "attach_cpu_mem", "DEFAULT_MAP"]
