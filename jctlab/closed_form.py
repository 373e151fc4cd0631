"""Replay in closed form where no job's rate depends on another job's: the engine's results without its events.

On a cluster without co-location interference (no class table, no PCIe switch factor) a job's progress on a
segment depends only on the segment: it runs at 1 / base iteration time from its start (plus ``restart_s`` when
it resumes) to its end. Replay (:mod:`jctlab.replay`) then needs no event queue, and a schedule of millions of
segments (non-sticky rounds on a whole trace) replays two to three times faster than through
:class:`jctlab.engine.Engine`.

**Only a shortcut to the engine's verdict, never a second rulebook.** :func:`closed_form` returns the engine's
completions, first starts and GPU-seconds, bit for bit, when it can show that the engine accepts the schedule;
it returns None in every other case (anything it does not model, and every schedule the engine would reject),
and replay then runs the engine, whose error messages are the only ones. So a wrong closed form could only make
replay slower, not change a verdict, as long as "not None" implies "the engine accepts, with these numbers":
``tests/test_closed_form.py`` checks that law by Hypothesis on simulated schedules and on mutated ones. Why the
numbers are equal, the engine's operations in the same order for each job:

* the engine starts a segment at ``t`` with ``last = t``, ``restart_until = t + restart`` and factor 1.0, so its
  work begins at ``begin = max(t, t + restart)``, which is ``t + restart`` (restarts are never negative); it
  predicts the completion ``begin + left · base · 1.0`` with ``left = max(0, iterations − progress)``, and a
  stop at ``e`` adds ``(e − begin) / (base · 1.0)`` when ``e > begin``, then completes the job there if its
  progress reaches ``iterations · (1 − EPS)``; ``x · 1.0`` is ``x`` exactly, so the closed form drops the factor;
* the engine pops a predicted completion ``tc`` before any event whose time ``t'`` has ``tc ≤ t' + tol(t')``: so
  before the segment's own stop at ``e`` iff ``tc ≤ e + tol(e)``, where replay requires the segment to be the
  job's last and ``tc ≥ e − tol(e)``; and a GPU it held is free for a start at ``s`` iff ``tc ≤ s + tol(s)``
  (a stop at ``e`` frees it for a start at ``s ≥ e``: at equal times the engine stops before it starts);
* GPU-seconds add ``(release − start) · #GPUs`` per segment in the job's order, from 0.0.

It computes on arrays (:mod:`jctlab.columns`), every segment at once, with the engine's float operations: IEEE
arithmetic is the same in numpy, ``max(a, b)`` is written as the comparison Python makes, and each sum over a job's
segments is a running sum (``np.cumsum`` adds one term at a time, in order, as the engine does).

CPU and memory: every segment at the nodes' fair share (null levels, no parameter server), and each node's fair
shares exact in binary (multiples of 1/1024) with ``GPUs × share ≤ capacity``. Then every sum the engine forms is
exact, and with no GPU held twice a node never holds more than its capacity, so the engine's capacity check
cannot fail. Otherwise (levels, servers, shares such as 10 CPUs / 3 GPUs whose sums round) None.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from .columns import Columns
from .engine import EPS, earliest_start, uses_every_type
from .model import Instance
from .resources import exact_fair_shares
from .speed import BaseTimes, SpeedError

_CHUNK = 1 << 18      # rows (a segment's GPUs) at a time where the work is row by row
_POPCOUNT = np.array([b.bit_count() for b in range(256)], np.intp)     # set bits of each byte


@dataclass(frozen=True)
class Progress:
    """What replaying a schedule yields per job (index order): completion time, first start, GPU-seconds held."""

    completion: list[float]
    first_start: list[float]
    gpu_seconds: list[float]


def applies(inst: Instance) -> bool:
    """Whether the closed form can replay schedules of ``inst`` at all (its segments may still send one to the
    engine)."""
    cl = inst.cluster
    return (not (cl.has_interference or cl.has_switch_interference) and cl.restart_s >= 0
            and all(map(exact_fair_shares, cl.nodes)))


def closed_form(inst: Instance, cols: Columns, resumed: frozenset[int] = frozenset(),
                base_times: BaseTimes | None = None) -> Progress | None:
    """The engine's :class:`Progress` on the segments ``cols`` (as replay checked them: each job has at least one,
    in time order, ends after starts, only the last without an end), or None where it cannot show that the engine
    accepts them (module docstring). ``resumed``: jobs whose first segment pays ``restart_s``. ``base_times``: the
    speed model's memo of this instance, if a run already has one (it is pure: any memo gives the same times)."""
    if not applies(inst):
        return None
    jobs, cl = inst.jobs, inst.cluster
    count, first_of = cols.count, cols.first
    if not jobs or not cols.fair or not count.all():
        return Progress([], [], []) if not jobs else None
    if (not _sizes_allowed(inst, cols.job, cols.size) or not _types_allowed(inst, cols)
            or (inst.problem == "static" and (cols.start != 0).any())):
        return None
    try:
        base = _base_times(inst, cols, _nodes_touched(inst, cols), base_times or BaseTimes(jobs, cl))
    except SpeedError:
        return None
    # in job order from here on: each job's segments together, in time order
    o = cols.by_job
    job, t, e, size, base = cols.job[o], cols.start[o], cols.end[o], cols.size[o], base[o]
    ends = ~np.isnan(e)
    first = np.zeros(len(t), bool)
    first[first_of] = True
    last_of = first_of + count - 1
    last = np.zeros(len(t), bool)
    last[last_of] = True
    if ((t < np.array([earliest_start(jb) for jb in jobs])[job]).any()
            or (t[1:] < e[:-1])[~first[1:]].any()):                      # starts before the job's previous end
        return None
    pays = ~first
    if resumed:
        pays[first_of[sorted(resumed)]] = True
    begin = np.where(pays, t + cl.restart_s, t)     # max(t, t + restart): restart_s >= 0 (applies)
    with np.errstate(invalid="ignore"):
        gain = np.where(ends & (e > begin), (e - begin) / base, 0.0)
    after = _running_sums(gain, count, first_of)    # each job's progress after each of its segments
    before = np.zeros(len(t))
    before[1:] = after[:-1]
    before[first] = 0.0
    iterations = np.array([jb.iterations for jb in jobs])
    left = iterations[job] - before
    tc = begin + np.where(left > 0.0, left, 0.0) * base            # the engine's predicted completion
    tol = np.where(ends, time_tols(e), 0.0)
    with np.errstate(invalid="ignore"):
        by_completion = ~ends | (tc <= e + tol)                     # the predicted completion comes first
        done_at_stop = after >= (iterations * (1 - EPS))[job]         # the engine's test of a stop that completes
    if (by_completion > last).any() or (done_at_stop > last).any():  # a segment after the job's completion
        return None
    completes = by_completion[last_of]
    if ((ends[last_of] & completes & (tc[last_of] < e[last_of] - tol[last_of])).any()   # ends past its completion
            or not (completes | done_at_stop[last_of]).all()):                   # its work is never done
        return None
    release = np.where(by_completion, tc, e)
    if not _gpus_held_once(cols, _unsorted(release, o), _unsorted(by_completion, o)):
        return None
    gpu_seconds = _running_sums((release - t) * size, count, first_of)[last_of]
    completion = np.where(completes, tc[last_of], e[last_of])
    return Progress(completion.tolist(), t[first_of].tolist(), gpu_seconds.tolist())


def _unsorted(x: np.ndarray, order: np.ndarray) -> np.ndarray:
    """``x``, given in ``order``, back in the schedule's order."""
    out = np.empty_like(x)
    out[order] = x
    return out


def _sizes_allowed(inst: Instance, job: np.ndarray, size: np.ndarray) -> bool:
    """Whether every segment's number of GPUs is one its job allows (each (job, size) pair looked at once)."""
    width = int(size.max()) + 1
    for key in np.unique(job * width + size).tolist():
        j, k = divmod(key, width)
        if k not in inst.jobs[j].sizes:
            return False
    return True


def _types_allowed(inst: Instance, cols: Columns) -> bool:
    """Whether every GPU of a segment has a type its job can use (each (job, GPU type) pair looked at once)."""
    jobs, types = inst.jobs, inst.cluster.gpu_types
    if all(uses_every_type(jb, types) for jb in jobs):
        return True
    type_of = np.array([types.index(g.type) for g in inst.cluster.gpus], np.intp)
    pairs = np.unique(np.repeat(cols.job, cols.size) * len(types) + type_of[cols.gpu])
    return all(jobs[j].can_use(types[t]) for j, t in (divmod(p, len(types)) for p in pairs.tolist()))


def _nodes_touched(inst: Instance, cols: Columns) -> np.ndarray:
    """How many distinct nodes each segment's GPUs are on: the bits of its nodes' indices, 64 nodes at a time,
    or-ed over its GPUs and counted."""
    cl, size = inst.cluster, cols.size
    node_index = {nd.name: i for i, nd in enumerate(cl.nodes)}
    node_of = np.array([node_index[g.node] for g in cl.gpus], np.uint64)
    nodes = np.ones(len(size), np.intp)
    for lo, hi, rlo, rhi in _chunks(size):
        multi = size[lo:hi] > 1
        if not multi.any():
            continue
        sizes = size[lo:hi]
        row_node = node_of[cols.gpu[rlo:rhi][np.repeat(multi, sizes)]]
        offsets = np.zeros(int(multi.sum()), np.intp)
        np.cumsum(sizes[multi][:-1], out=offsets[1:])
        count = np.zeros(len(offsets), np.intp)
        for word in range((len(cl.nodes) + 63) // 64):
            bits = np.where(row_node >> 6 == word, np.left_shift(np.uint64(1), row_node & np.uint64(63)), np.uint64(0))
            count += _POPCOUNT[np.bitwise_or.reduceat(bits, offsets).view(np.uint8)].reshape(-1, 8).sum(1)
        nodes[lo:hi][multi] = count
    return nodes


def _base_times(inst: Instance, cols: Columns, nodes: np.ndarray, memo: BaseTimes) -> np.ndarray:
    """Each segment's base iteration time, from ``memo`` (raises SpeedError where the model refuses one)."""
    job, allocs, size = cols.job, cols.allocs, cols.size
    if not memo.simple:
        return np.array([memo.get(j, a, k) for j, a, k in zip(job.tolist(), allocs, nodes.tolist())])
    # one GPU profile and fair shares: the time depends on (job, #GPUs, nodes) alone, the memo's own key there
    key = (job * (int(size.max()) + 1) + size) * (int(nodes.max()) + 1) + nodes
    _, one, inverse = np.unique(key, return_index=True, return_inverse=True)
    return np.array([memo.get(j, allocs[i], k) for i, j, k in zip(one.tolist(), job[one].tolist(),
                                                                    nodes[one].tolist())])[inverse]


def _running_sums(x: np.ndarray, count: np.ndarray, first_of: np.ndarray) -> np.ndarray:
    """Each job's running sum of ``x`` over its segments, added one term at a time from the first, as the engine
    adds them (``np.cumsum`` adds in order; a sum over the whole array would pair terms and round differently)."""
    out = x.copy()
    many = count > 1
    for a, k in zip(first_of[many].tolist(), count[many].tolist()):
        np.cumsum(x[a:a + k], out=out[a:a + k])
    return out


def time_tols(t: np.ndarray) -> np.ndarray:
    """:func:`jctlab.engine.time_tol` of each time, with its float operations (``max(1.0, |t|)`` as Python takes it)."""
    a = np.abs(t)
    return EPS * np.where(a > 1.0, a, 1.0)


def _gpus_held_once(cols: Columns, release: np.ndarray, by_completion: np.ndarray) -> bool:
    """Whether, segment by segment in start order, each GPU is free when the segment starts: released by the GPU's
    previous segment with a stop at or before the start, or by a completion within the engine's tolerance of it;
    two segments starting on one GPU at the same time are left to the engine (its event order decides), and so is
    a segment that names a GPU twice (its two rows start at the same time)."""
    t, size = cols.start, cols.size
    n = len(t)
    by_start = np.argsort(t, kind="stable")
    rank = np.empty(n, np.int64)
    rank[by_start] = np.arange(n)
    # one row per (segment, GPU) held, keyed GPU × n + rank and sorted: each GPU's segments in the order they start
    rows = cols.gpu.astype(np.int64)
    for lo, hi, rlo, rhi in _chunks(size):
        rows[rlo:rhi] *= n
        rows[rlo:rhi] += np.repeat(rank[lo:hi], size[lo:hi])
    rows.sort()
    for lo in range(0, len(rows) - 1, _CHUNK):       # in chunks: small temporaries, reused, not fresh pages
        gpu, seg = np.divmod(rows[lo:lo + _CHUNK + 1], n)
        seg = by_start[seg]
        at, held_to = t[seg], release[seg]
        nxt = at[1:]
        clash = ((held_to[:-1] > nxt) | (at[:-1] == nxt)) & (gpu[1:] == gpu[:-1])
        if clash.any():       # held past the next start: fine only if by a completion within the tolerance
            i = np.flatnonzero(clash)
            nx, held = nxt[i], held_to[i]
            if not ((at[i] != nx) & by_completion[seg[i]] & (held <= nx + time_tols(nx))).all():
                return False
    return True


def _chunks(size: np.ndarray) -> Iterator[tuple[int, int, int, int]]:
    """(first segment, end segment, first row, end row) of consecutive groups of segments, about ``_CHUNK`` rows each
    (the rows of segment i are its ``size[i]`` GPUs, one segment after another)."""
    ends = np.cumsum(size)
    lo = 0
    while lo < len(size):
        row0 = int(ends[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(ends, row0 + _CHUNK, side="right")))
        yield lo, hi, row0, int(ends[hi - 1])
        lo = hi
