"""Relaxed candidate families of the static models: their exact members, and splits of the large ones.

A relaxed candidate (:class:`formulations.static.candidates.Candidate`) stands for every allocation of one
job with given GPU-type counts on one node (``relaxed-node``) or on several (``relaxed-spread``). When a
model's answer picks one and the gap is open, :func:`expand_families` replaces it by its exact members
(:func:`family_members`), or, when it has too many, splits it into sub-families by the exact GPUs of one
of its types (:func:`split_family`). Both keep the candidate set complete: the model stays a relaxation.
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Iterable, Sequence

from jctlab.model import Instance

from ..gpu_classes import GpuClass
from .candidates import (Candidate, CandidateSet, count_vectors, count_vectors_number, exact_candidates,
                         optimistic_duration)


def family_members(inst: Instance, classes: Sequence[GpuClass], fam: Candidate,
                   cap: int) -> tuple[list[Candidate], bool] | None:
    """The exact candidates of every allocation a relaxed family stands for (same job, same GPU-type
    counts, on ``fam.node`` for ``relaxed-node``, on two or more nodes for ``relaxed-spread``), with
    the flag of :func:`formulations.static.candidates.exact_candidates` (PS placements exhaustive). None when the family has more
    than ``cap`` count vectors. Replacing a family by its members keeps a candidate set complete."""
    if fam.exact:
        return [fam], True
    job = inst.jobs[fam.job]
    tc = dict(fam.type_counts)
    fixed = dict(fam.counts)                      # a sub-family (see split_family): these GPUs are set
    fixed_types = {classes[c].type for c in fixed}
    pools: list[list[GpuClass]] = []
    for t in sorted(tc):
        if t in fixed_types:
            pool = [classes[c] for c in sorted(fixed) if classes[c].type == t]
        else:
            pool = [cl for cl in classes if cl.type == t and job.can_use(t)
                    and (fam.kind != "relaxed-node" or cl.node == fam.node)]
        pools.append(pool)

    def vectors(t: str, pool: list[GpuClass]) -> list[tuple[int, ...]]:
        if t in fixed_types:
            return [tuple(fixed[cl.index] for cl in pool)]
        return list(count_vectors([cl.size for cl in pool], tc[t]))

    total = 1
    for t, pool in zip(sorted(tc), pools):
        total *= 1 if t in fixed_types else count_vectors_number([cl.size for cl in pool], tc[t])
        if total > cap:
            return None
    sel = [cl.index for pool in pools for cl in pool]
    kind = "node" if fam.kind == "relaxed-node" else "spread"
    out: list[Candidate] = []
    full = True
    for parts in itertools.product(*[vectors(t, pool) for t, pool in zip(sorted(tc), pools)]):
        vec = [k for part in parts for k in part]
        if kind == "spread" and len({classes[c].node for c, k in zip(sel, vec) if k}) < 2:
            continue
        cs, f = exact_candidates(inst, fam.job, classes, sel, vec, kind)
        out.extend(cs)
        full &= f
    return out, full


def split_family(inst: Instance, classes: Sequence[GpuClass], fam: Candidate, cap: int) -> list[Candidate] | None:
    """A relaxed family too large to expand, split into sub-families by the exact GPUs of one of its
    GPU types (the type with the fewest count vectors, at most ``cap``): each sub-family fixes those
    GPUs (``counts``: class rows) and keeps the other types aggregated (type / node rows), with the
    optimistic duration over its own members (:func:`optimistic_duration` on a pool holding exactly
    the fixed GPUs of that type). The sub-families partition the family's members, so the model stays
    a relaxation, and each is tighter and expandable later (:func:`family_members`). None when no
    type qualifies (one free type only, or too many vectors)."""
    if fam.exact:
        return None
    job = inst.jobs[fam.job]
    tc = dict(fam.type_counts)
    fixed = dict(fam.counts)
    fixed_types = {classes[c].type for c in fixed}
    free_types = [t for t in sorted(tc) if t not in fixed_types]
    if len(free_types) < 2:
        return None

    def pool_of(t: str) -> list[GpuClass]:
        return [cl for cl in classes if cl.type == t and job.can_use(t)
                and (fam.kind != "relaxed-node" or cl.node == fam.node)]

    best_t = min(free_types, key=lambda t: (count_vectors_number([cl.size for cl in pool_of(t)], tc[t]), t))
    pool_t = pool_of(best_t)
    if count_vectors_number([cl.size for cl in pool_t], tc[best_t]) > cap:
        return None
    rest = [cl for t in free_types if t != best_t for cl in pool_of(t)]
    kept = [classes[c] for c in sorted(fixed)]
    out = []
    for vec in count_vectors([cl.size for cl in pool_t], tc[best_t]):
        counts = dict(fixed)
        for cl, k in zip(pool_t, vec):
            if k:
                counts[cl.index] = counts.get(cl.index, 0) + k
        # a pool with exactly the fixed GPUs (class sizes cut to the counts) + the free types' classes
        pool = [dataclasses.replace(cl, ids=cl.ids[:counts[cl.index]])
                for cl in kept + [cl for cl, k in zip(pool_t, vec) if k]] + rest
        d = optimistic_duration(inst, job, pool, tc, spread=fam.kind == "relaxed-spread")
        out.append(Candidate(fam.job, fam.kind, d, fam.n, counts=tuple(sorted(counts.items())), node=fam.node,
                             type_counts=fam.type_counts))
    return out


def expand_families(inst: Instance, cset: CandidateSet, fams: Iterable[Candidate], cap: int, split_cap: int,
                    split: bool = True) -> tuple[CandidateSet, int]:
    """``cset`` with each relaxed family of ``fams`` that has at most ``cap`` members replaced by
    them, and each larger one split into sub-families (``split``, :func:`split_family`); returns (new
    set, number of families expanded or split)."""
    per_job = [list(cs) for cs in cset.per_job]
    complete = cset.complete
    done = 0
    for fam in dict.fromkeys(f for f in fams if not f.exact):
        got = family_members(inst, cset.classes, fam, cap)
        if got is None:
            subs = split_family(inst, cset.classes, fam, split_cap) if split else None
            if subs is None:
                continue
            got = (subs, True)
        members, full = got
        lst = per_job[fam.job]
        k = lst.index(fam)
        lst[k:k + 1] = members
        complete &= full
        done += 1
    new = CandidateSet(cset.classes, tuple(tuple(x) for x in per_job), complete, cset.enum_s)
    return new, done
