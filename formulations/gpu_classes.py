"""Which GPUs (and nodes) are interchangeable: the one definition every model's symmetry rests on.

Two GPUs of one node are interchangeable for every job when they agree on everything the speed model
(SPEC §2) reads of a GPU: its type, its per-class variability factors and its place in the node (SPEC v1.1:
the CPU socket, since a set spanning sockets runs ``qpi_factor`` slower, and the PCIe switch, since jobs
sharing one slow each other). :func:`gpu_class_key` is that key; a new per-GPU attribute the speed model
reads must be added there, and every model that groups GPUs follows:

* the static models decide *how many* GPUs of each :class:`GpuClass` a job takes, never which ones
  (:func:`gpu_classes`);
* the offline relaxations order *twin nodes* (:func:`node_key`: same CPUs, memory and, GPU by GPU, the same
  class key) by their first job (:mod:`formulations.offline.symmetry`).
"""

from __future__ import annotations

from dataclasses import dataclass

from jctlab.model import GPU, Instance, Node


def gpu_class_key(g: GPU) -> tuple:
    """What tells GPUs of one node apart for the speed model: type, variability factors, socket and switch.

    Without the socket a class would mix GPUs of both sockets, a count vector could not say whether an
    allocation spans them, and the first ids of a class (what a candidate takes) could span them while a
    same-socket choice existed: the static models then returned schedules up to ``qpi_factor`` times
    longer than the optimum (``tests/test_topology.py``)."""
    return (g.type, tuple(sorted(g.variability.items())), g.socket, g.switch)


def node_key(nd: Node) -> tuple:
    """What tells nodes apart: CPUs, memory and, index by index, their GPUs' class keys."""
    return (nd.cpus, nd.mem_gb, tuple(gpu_class_key(g) for g in nd.gpus))


@dataclass(frozen=True)
class GpuClass:
    """Interchangeable GPUs: same node and :func:`gpu_class_key` (ids in index order)."""

    index: int
    node: str
    type: str
    variability: tuple[tuple[str, float], ...]
    ids: tuple[str, ...]
    socket: int | None = None       # SPEC v1.1 topology (None: not given)
    switch: int | None = None

    @property
    def size(self) -> int:
        return len(self.ids)

    def factor(self, job_class: str | None) -> float:
        if job_class is None:
            return 1.0
        return dict(self.variability).get(job_class, 1.0)


def gpu_classes(inst: Instance) -> tuple[GpuClass, ...]:
    """Group the cluster's GPUs into classes of interchangeable GPUs, node by node, in GPU order."""
    out: list[GpuClass] = []
    for node in inst.cluster.nodes:
        groups: dict[tuple, list[GPU]] = {}
        for g in node.gpus:
            groups.setdefault(gpu_class_key(g), []).append(g)
        for gs in groups.values():
            out.append(GpuClass(len(out), node.name, gs[0].type, tuple(sorted(gs[0].variability.items())),
                                tuple(g.id for g in gs), gs[0].socket, gs[0].switch))
    return tuple(out)
