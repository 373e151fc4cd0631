"""Synergy-TUNE (Mohan et al., OSDI'22): resource-sensitivity-aware CPU/memory allocation.

Jobs are started in FIFO order (arrival; the head blocks the queue) with packed placement: its
largest allowed GPU count that fits, on the single node with the fewest free GPUs that holds it
(best fit), else on the fewest nodes. Each job first gets its GPU-proportional CPU/memory share
(the ``cpu_mem`` level with speedup 1.0, or the node's fair share for jobs without a table; when
that does not fit, the best lower level that does). Then TUNE shifts CPU/memory, greedily, to the
jobs that gain most from it (largest throughput gain per unit of the node's dominant resource for
moving one ``cpu_mem`` level up) from the node's free resources and from the jobs that lose least
(moving one level down). A shift is made only when the receiver gains more than the donor loses
(both in GPU-weighted speedup), and with ``no_slowdown=True`` (default, Synergy's guarantee) a
donor never drops below speedup 1.0. Node CPU and memory capacities hold at every step.

Jobs are never preempted: levels are chosen when a job starts (the jobs being started at one
decision point can trade among themselves; running jobs keep theirs). In ``preemptive`` instances
this is still a valid schedule. Entry point: ``baselines.synergy:factory``.
"""

from __future__ import annotations

import math

from jctlab.errors import InputError
from jctlab.model import Allocation, Instance, Job
from jctlab.simulate import Action, Simulator, Start

EPS = 1e-9


class SynergyTune:
    def __init__(self, inst: Instance, seed: int = 0, no_slowdown: bool = True):
        self.inst = inst
        self.cl = inst.cluster
        self.no_slowdown = bool(no_slowdown)
        self.node_order = [n.name for n in self.cl.nodes]
        for j, job in enumerate(inst.jobs):
            if job.ps is not None:
                raise InputError(inst.name, f"jobs[{j}].ps", "Synergy-TUNE does not place parameter servers")
        # each job's levels sorted by CPUs then memory
        self.levels = {j: sorted(job.cpu_mem.levels) if job.cpu_mem is not None else None
                       for j, job in enumerate(inst.jobs)}

    # ------------------------------------------------------------------ helpers
    def _fair_level(self, j: int, node: str) -> int | None:
        """The GPU-proportional level: the one equal to the node's fair share, else the cheapest
        level with speedup 1.0 (the SPEC's fair share), else the cheapest level at or above 1."""
        lv = self.levels[j]
        if lv is None:
            return None
        nd = self.cl.node[node]
        for k, (c, m, _) in enumerate(lv):
            if math.isclose(c, nd.fair_cpus, rel_tol=1e-9, abs_tol=1e-9) and \
                    math.isclose(m, nd.fair_mem_gb, rel_tol=1e-9, abs_tol=1e-9):
                return k
        ones = [k for k, (_, _, s) in enumerate(lv) if math.isclose(s, 1.0, abs_tol=1e-9)]
        if ones:
            return ones[0]
        above = [k for k, (_, _, s) in enumerate(lv) if s >= 1.0]
        return above[0] if above else max(range(len(lv)), key=lambda k: lv[k][2])

    def _per_gpu(self, j: int, level: int | None, node: str) -> tuple[float, float]:
        if level is None:
            nd = self.cl.node[node]
            return nd.fair_cpus, nd.fair_mem_gb
        c, m, _ = self.levels[j][level]
        return c, m

    def _fits(self, j: int, level: int | None, per_node: dict[str, int], cpus: dict[str, float],
              mem: dict[str, float]) -> bool:
        for n, k in per_node.items():
            c, m = self._per_gpu(j, level, n)
            if c * k > cpus[n] + EPS * max(1.0, cpus[n]) or m * k > mem[n] + EPS * max(1.0, mem[n]):
                return False
        return True

    def _charge(self, j: int, level: int | None, per_node: dict[str, int], cpus: dict[str, float],
                mem: dict[str, float], sign: float) -> None:
        for n, k in per_node.items():
            c, m = self._per_gpu(j, level, n)
            cpus[n] += sign * c * k
            mem[n] += sign * m * k

    def _alloc(self, j: int, gpus: tuple[str, ...], level: int | None) -> Allocation:
        if level is None:
            return Allocation(gpus)
        c, m, _ = self.levels[j][level]
        return Allocation(gpus, (), c, m)

    # ------------------------------------------------------------------ placement
    def _place(self, job: Job, n: int, free: dict[str, list[str]]) -> tuple[str, ...] | None:
        cl = self.cl
        usable = {nm: [g for g in free[nm] if job.can_use(cl.gpu[g].type)] for nm in self.node_order}
        single = [nm for nm in self.node_order if len(usable[nm]) >= n]
        if single:  # best fit: the node left with the fewest free GPUs
            nm = min(single, key=lambda x: (len(usable[x]), self.node_order.index(x)))
            return tuple(usable[nm][:n])
        out: list[str] = []
        for nm in sorted(self.node_order, key=lambda x: (-len(usable[x]), self.node_order.index(x))):
            out.extend(usable[nm][: n - len(out)])
            if len(out) == n:
                return tuple(out)
        return None

    # ------------------------------------------------------------------ policy entry
    def decide(self, sim: Simulator) -> list[Action]:
        if not sim.waiting or sim.engine.free_total == 0:
            return []
        inst, eng = self.inst, sim.engine
        free = {nm: sorted(eng.free[nm], key=_gidx) for nm in self.node_order}
        cpus = {n.name: n.cpus - eng.cpu_used[n.name] for n in self.cl.nodes}
        mem = {n.name: n.mem_gb - eng.mem_used[n.name] for n in self.cl.nodes}
        started: dict[int, list] = {}   # j -> [gpus, per_node counts, level]
        for j in sorted(sim.waiting, key=lambda x: (inst.jobs[x].arrival, x)):
            job = inst.jobs[j]
            placed = None
            for n in sorted(job.sizes, reverse=True):
                if n > sum(len(v) for v in free.values()):
                    continue
                gpus = self._place(job, n, free)
                if gpus is None:
                    continue
                per_node: dict[str, int] = {}
                for g in gpus:
                    per_node[g.split(":")[0]] = per_node.get(g.split(":")[0], 0) + 1
                level = self._start_level(j, per_node, cpus, mem)
                if level is False:
                    continue
                placed = (gpus, per_node, level)
                break
            if placed is None:
                break  # FIFO: the head blocks the queue
            gpus, per_node, level = placed
            self._charge(j, level, per_node, cpus, mem, -1.0)
            for g in gpus:
                free[g.split(":")[0]].remove(g)
            started[j] = [gpus, per_node, level]
        self.tune(started, cpus, mem)
        return [Start(j, self._alloc(j, s[0], s[2])) for j, s in started.items()]

    def _start_level(self, j: int, per_node: dict[str, int], cpus: dict[str, float], mem: dict[str, float]):
        """The proportional-share level if it fits, else the best level that fits; False if none."""
        fair = self._fair_level(j, next(iter(per_node)))
        if self._fits(j, fair, per_node, cpus, mem):
            return fair
        lv = self.levels[j]
        if lv is None:
            return False
        ok = [k for k in range(len(lv)) if self._fits(j, k, per_node, cpus, mem)]
        return max(ok, key=lambda k: lv[k][2]) if ok else False

    # ------------------------------------------------------------------ TUNE
    def _share(self, per_node: dict[str, int], dc: float, dm: float) -> float:
        """Dominant share (of the nodes' capacities) of dc CPUs and dm GB more per GPU."""
        s = 0.0
        for n, k in per_node.items():
            nd = self.cl.node[n]
            s = max(s, (dc * k / nd.cpus) if nd.cpus > 0 else math.inf, (dm * k / nd.mem_gb) if nd.mem_gb > 0 else math.inf)
        return s

    def tune(self, started: dict[int, list], cpus: dict[str, float], mem: dict[str, float]) -> int:
        """Greedy level shifts among ``started`` jobs within node capacities; returns the number made."""
        moves = 0
        for _ in range(10_000):
            best = None
            for a, (ga, pa, la) in started.items():
                lv = self.levels[a]
                if lv is None or la is None or la + 1 >= len(lv):
                    continue
                up = la + 1
                gain = len(ga) * (lv[up][2] - lv[la][2])
                if gain <= EPS:
                    continue
                dc, dm = lv[up][0] - lv[la][0], lv[up][1] - lv[la][1]
                rate = gain / max(self._share(pa, dc, dm), EPS)
                # from free resources alone
                self._charge(a, la, pa, cpus, mem, +1.0)
                ok = self._fits(a, up, pa, cpus, mem)
                self._charge(a, la, pa, cpus, mem, -1.0)
                if ok:
                    if best is None or rate > best[0]:
                        best = (rate, a, up, None, None)
                    continue
                # else from the donor that loses least and frees enough on the shared nodes
                for b, (gb, pb, lb) in started.items():
                    lvb = self.levels[b]
                    if b == a or lvb is None or lb is None or lb == 0 or not set(pb) & set(pa):
                        continue
                    down = lb - 1
                    if self.no_slowdown and lvb[down][2] < 1.0 - 1e-9:
                        continue
                    loss = len(gb) * (lvb[lb][2] - lvb[down][2])
                    if loss >= gain - EPS:
                        continue
                    self._charge(a, la, pa, cpus, mem, +1.0)
                    self._charge(b, lb, pb, cpus, mem, +1.0)
                    ok = self._fits(b, down, pb, cpus, mem)
                    if ok:
                        self._charge(b, down, pb, cpus, mem, -1.0)
                        ok = self._fits(a, up, pa, cpus, mem)
                        self._charge(b, down, pb, cpus, mem, +1.0)
                    self._charge(b, lb, pb, cpus, mem, -1.0)
                    self._charge(a, la, pa, cpus, mem, -1.0)
                    r = (gain - loss) / max(self._share(pa, dc, dm), EPS)
                    if ok and (best is None or r > best[0]):
                        best = (r, a, up, b, down)
            if best is None:
                return moves
            _, a, up, b, down = best
            if b is not None:
                gb, pb, lb = started[b]
                self._charge(b, lb, pb, cpus, mem, +1.0)
                self._charge(b, down, pb, cpus, mem, -1.0)
                started[b][2] = down
            ga, pa, la = started[a]
            self._charge(a, la, pa, cpus, mem, +1.0)
            self._charge(a, up, pa, cpus, mem, -1.0)
            started[a][2] = up
            moves += 1
        return moves


def _gidx(g: str) -> tuple[str, int]:
    n, i = g.rsplit(":", 1)
    return n, int(i)


def factory(inst: Instance, seed: int = 0, no_slowdown: bool = True) -> SynergyTune:
    """Synergy-TUNE: FIFO, packed placement, sensitivity-aware CPU/memory levels."""
    return SynergyTune(inst, seed=seed, no_slowdown=no_slowdown)

