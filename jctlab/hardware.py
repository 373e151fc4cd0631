"""The cluster of SPEC §1: GPUs, nodes and the cluster's network, topology and interference settings.

Frozen dataclasses only; :mod:`jctlab.model` reads and writes them with the rest of an instance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Mapping


@dataclass(frozen=True)
class GPU:
    node: str
    index: int
    type: str
    variability: Mapping[str, float] = field(default_factory=dict)
    socket: int | None = None    # CPU socket of the node it hangs off (SPEC §1 topology, v1.1)
    switch: int | None = None    # PCIe switch of the node it sits under
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.node}:{self.index}"

    def factor(self, job_class: str | None) -> float:
        """PAL's per-GPU slowdown for a job class (1.0 when absent)."""
        if job_class is None:
            return 1.0
        return self.variability.get(job_class, 1.0)


@dataclass(frozen=True)
class Node:
    name: str
    cpus: float
    mem_gb: float
    gpus: tuple[GPU, ...]
    extra: Mapping[str, Any] = field(default_factory=dict)

    @property
    def fair_cpus(self) -> float:
        return self.cpus / len(self.gpus) if self.gpus else 0.0

    @property
    def fair_mem_gb(self) -> float:
        return self.mem_gb / len(self.gpus) if self.gpus else 0.0


@dataclass(frozen=True)
class Cluster:
    nodes: tuple[Node, ...]
    intra_node_gbps: float = 100.0
    inter_node_gbps: float = 25.0
    locality_penalty: float = 1.0
    split: str = "proportional"
    interference: Mapping[str, Mapping[str, float]] = field(default_factory=dict)
    restart_s: float = 0.0
    qpi_factor: float = 1.0          # a job whose GPUs on one node span CPU sockets (v1.1)
    pcie_interference: float = 0.0   # per other job sharing a PCIe switch (v1.1)
    extra: Mapping[str, Any] = field(default_factory=dict)

    @cached_property
    def gpus(self) -> tuple[GPU, ...]:
        return tuple(g for n in self.nodes for g in n.gpus)

    @cached_property
    def gpu(self) -> dict[str, GPU]:
        return {g.id: g for g in self.gpus}

    @cached_property
    def node(self) -> dict[str, Node]:
        return {n.name: n for n in self.nodes}

    @cached_property
    def gpu_types(self) -> tuple[str, ...]:
        return tuple(sorted({g.type for g in self.gpus}))

    @cached_property
    def has_interference(self) -> bool:
        return any(v > 0 for row in self.interference.values() for v in row.values())

    @cached_property
    def has_switch_interference(self) -> bool:
        return self.pcie_interference > 0 and any(g.switch is not None for g in self.gpus)

    def interference_of(self, a: str | None, b: str | None) -> float:
        if a is None or b is None:
            return 0.0
        return self.interference.get(a, {}).get(b, 0.0)
