"""Kubernetes binding targets of a decision, for a scheduler extender or ``kubectl create -f``.

Each job started now becomes core/v1 ``Binding`` objects (the body of ``POST
/api/v1/namespaces/{namespace}/pods/{name}/binding``, which is what a scheduler extender's ``bind`` verb
issues; Kubernetes API reference, "Binding v1 core"), gathered in a ``v1`` ``List``: one Binding per
node the job uses. The pod of a one-node job has the job's name; a job over several nodes has one pod
per node, ``<job>-<k>`` (k = 0, 1, ... in the order of the plan's GPUs), the convention of multi-worker
operators' pod names being theirs to map. The GPU indices on the node go in the annotation
``jctlab.io/gpu-indices`` (comma-separated); the default NVIDIA device plugin chooses devices itself, so
a plugin or an admission hook that reads this annotation (e.g. to set ``NVIDIA_VISIBLE_DEVICES``) is
what pins them. ``jctlab.io/sockets`` carries the CPU sockets of those GPUs when the cluster file gives them.
"""

from __future__ import annotations

from typing import Any

from .state import ClusterSpec, Plan

GPU_ANNOTATION = "jctlab.io/gpu-indices"
SOCKET_ANNOTATION = "jctlab.io/sockets"
JOB_ANNOTATION = "jctlab.io/job"


def pod_targets(job: str, gpus: tuple[str, ...]) -> list[tuple[str, str, list[int]]]:
    """(pod name, node, GPU indices) of a job's placement: one pod per node, in GPU order."""
    by_node: dict[str, list[int]] = {}
    for g in gpus:
        node, idx = g.rsplit(":", 1)
        by_node.setdefault(node, []).append(int(idx))
    if len(by_node) == 1:
        node, idx = next(iter(by_node.items()))
        return [(job, node, idx)]
    return [(f"{job}-{k}", node, idx) for k, (node, idx) in enumerate(by_node.items())]


def bindings(plan: Plan, cluster: ClusterSpec, namespace: str = "default") -> dict[str, Any]:
    """A ``v1`` ``List`` of ``Binding`` objects for the jobs ``plan`` starts now."""
    sockets = {n.gpu_id(g.index): g.socket for n in cluster.nodes for g in n.gpus}
    items = []
    for p in plan.start_now:
        for pod, node, idx in pod_targets(p.job, p.gpus):
            ann = {JOB_ANNOTATION: p.job, GPU_ANNOTATION: ",".join(str(i) for i in idx)}
            socks = sorted({s for i in idx if (s := sockets.get(f"{node}:{i}")) is not None})
            if socks:
                ann[SOCKET_ANNOTATION] = ",".join(str(s) for s in socks)
            items.append({"apiVersion": "v1", "kind": "Binding",
                          "metadata": {"name": pod, "namespace": namespace, "annotations": ann},
                          "target": {"apiVersion": "v1", "kind": "Node", "name": node}})
    return {"apiVersion": "v1", "kind": "List", "items": items}
