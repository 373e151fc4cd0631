"""A schedule's segments as arrays, read once: what replay checks and computes from.

Replay reads each segment's job, start, end and GPUs. On a schedule of a million segments (non-sticky rounds on
a trace, five million GPUs named) reading them is most of its work, so :func:`read_segments` reads them once,
into arrays in the schedule's order with the permutation that groups them by job, and resolves every reference
on the way: an unknown job, GPU or node is an :class:`InputError` naming the first at fault.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain
from operator import attrgetter

import numpy as np

from .errors import InputError
from .model import Allocation, Instance, Schedule, Segment

_job, _start, _end, _alloc = attrgetter("job"), attrgetter("start"), attrgetter("end"), attrgetter("alloc")
_gpus, _ps, _cpus, _mem = (attrgetter("gpus"), attrgetter("ps_nodes"), attrgetter("cpus_per_gpu"),
                           attrgetter("mem_gb_per_gpu"))


@dataclass(frozen=True, eq=False)
class Columns:
    """A schedule's segments and what replay reads of them, as arrays: one entry per segment, in the schedule's
    order; ``by_job`` puts them in job order (each job's segments together, in the schedule's order)."""

    segments: tuple[Segment, ...]
    allocs: list[Allocation]
    job: np.ndarray          # the segment's job (index in the instance)
    start: np.ndarray
    end: np.ndarray          # NaN where the segment has no end
    size: np.ndarray         # how many GPUs it holds
    gpu: np.ndarray          # every segment's GPUs (index in the cluster's order), one segment after another
    by_job: np.ndarray       # the segments' positions in job order
    count: np.ndarray        # per job (index order): how many segments it has
    first: np.ndarray        # per job: its first segment's place in job order (where it would be, if it has none)
    fair: bool               # no segment names a parameter server or a CPU/memory level

    def per_job(self) -> list[list[Segment]]:
        """Each job's segments, in the schedule's order."""
        ordered = list(map(self.segments.__getitem__, self.by_job.tolist()))
        return [ordered[a:a + k] for a, k in zip(self.first.tolist(), self.count.tolist())]


def read_segments(inst: Instance, sched: Schedule, source: str = "<schedule>") -> Columns:
    """``sched``'s segments as :class:`Columns`; :class:`InputError` where a reference does not resolve in ``inst``
    (a schedule made for another instance, an unknown job, GPU id or node)."""
    if sched.instance != inst.name:
        raise InputError(source, "instance", f"schedule is for instance {sched.instance!r}, not {inst.name!r}")
    segs = sched.segments
    n = len(segs)
    gpu_index = {g.id: i for i, g in enumerate(inst.cluster.gpus)}
    allocs = list(map(_alloc, segs))
    gpus = list(map(_gpus, allocs))
    size = np.fromiter(map(len, gpus), np.intp, n)
    try:
        job = np.fromiter(map(inst.index.__getitem__, map(_job, segs)), np.intp, n)
        gpu = np.fromiter(map(gpu_index.__getitem__, chain.from_iterable(gpus)), np.int32, int(size.sum()))
    except KeyError:
        _name_the_unknown(inst, sched, source)
        raise
    fair = n > 0 and not any(map(_ps, allocs)) and set(map(_cpus, allocs)) == {None} == set(map(_mem, allocs))
    if not fair and not inst.cluster.node.keys() >= set(chain.from_iterable(map(_ps, allocs))):
        _name_the_unknown(inst, sched, source)
    count = np.bincount(job, minlength=len(inst.jobs))
    return Columns(segs, allocs, job, np.fromiter(map(_start, segs), float, n),
                   np.array(list(map(_end, segs)), dtype=float), size, gpu, np.argsort(job, kind="stable"), count,
                   np.cumsum(count) - count, fair)


def _name_the_unknown(inst: Instance, sched: Schedule, source: str) -> None:
    """Raise :class:`InputError` naming the first reference of ``sched`` that ``inst`` does not have."""
    gpu, node = inst.cluster.gpu, inst.cluster.node
    for i, s in enumerate(sched.segments):
        if s.job not in inst.job:
            raise InputError(source, f"segments[{i}].job", f"unknown job {s.job!r}")
        for k, g in enumerate(s.alloc.gpus):
            if g not in gpu:
                raise InputError(source, f"segments[{i}].gpus[{k}]", f"unknown GPU id {g!r}")
        for k, n in enumerate(s.alloc.ps_nodes):
            if n not in node:
                raise InputError(source, f"segments[{i}].ps_nodes[{k}]", f"unknown node {n!r}")
