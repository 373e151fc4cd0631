"""Gantt charts of schedules (``jctlab plot INSTANCE SCHEDULE --out FILE.png|svg``).

One row per GPU, grouped by node (a rule between nodes, the node's name and GPU type at the right),
each job its own colour and label; idle time is the grey background, a preempted segment ends in a red
cross, and the ``restart_s`` lost at the start of a resumed segment is hatched. Row height and fonts
are set so that 64 GPUs stay readable.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")   # files only, never a window
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402

from jctlab.model import Instance, Schedule  # noqa: E402
from jctlab.replay import replay  # noqa: E402

IDLE = "#e9e9e9"
ROW_IN = 0.17          # inches per GPU row
NODE_GAP = 0.6         # rows of space between nodes


def _colour(i: int) -> Any:
    cmap = plt.get_cmap("tab20")
    return cmap((i * 7) % 20)     # neighbours in job order get far-apart colours


def draw_gantt(ax: Any, inst: Instance, sched: Schedule, title: str | None = None) -> None:
    rep = replay(inst, sched)
    if not rep.valid:
        raise ValueError(f"schedule does not replay: {rep.error}")
    y_of: dict[str, float] = {}
    y = 0.0
    node_spans = []
    for node in inst.cluster.nodes:
        top = y
        for g in node.gpus:
            y_of[g.id] = y
            y += 1.0
        node_spans.append((node, top, y))
        y += NODE_GAP
    t0 = min(j.arrival for j in inst.jobs)
    t1 = max(rep.completion.values())
    ax.set_facecolor("white")
    for _, top, bottom in node_spans:   # idle background of every GPU row
        ax.broken_barh([(t0, t1 - t0)], (top, bottom - top), facecolors=IDLE, zorder=0)
    seen: dict[str, int] = {}
    width = max(t1 - t0, 1e-9)
    for s in sched.segments:
        j = inst.index[s.job]
        end = s.end if s.end is not None else rep.completion[s.job]
        first = s.job not in seen
        seen[s.job] = seen.get(s.job, 0) + 1
        col = _colour(j)
        for gid in s.alloc.gpus:
            yy = y_of[gid] + 0.08
            ax.broken_barh([(s.start, end - s.start)], (yy, 0.84), facecolors=col, edgecolor="black", linewidth=0.3,
                           zorder=2)
            if not first and inst.cluster.restart_s > 0:
                r = min(inst.cluster.restart_s, end - s.start)
                ax.broken_barh([(s.start, r)], (yy, 0.84), facecolors="none", edgecolor="black", hatch="////",
                               linewidth=0.0, zorder=3)
            if s.end is not None and rep.completion[s.job] > s.end + 1e-9:
                ax.plot([s.end], [y_of[gid] + 0.5], marker="x", color="red", markersize=4, zorder=4)
        if (end - s.start) / width > 0.035:
            gy = min(y_of[g] for g in s.alloc.gpus)
            ax.text(s.start + (end - s.start) / 2, gy + 0.5, s.job, ha="center", va="center", fontsize=6, zorder=5,
                    clip_on=True)
    ax.set_xlim(t0, t1 + 0.01 * width)
    ax.set_ylim(y - NODE_GAP, -0.2)
    ticks = sorted(y_of.items(), key=lambda kv: kv[1])
    fs = 7 if len(ticks) <= 32 else 5
    ax.set_yticks([v + 0.5 for _, v in ticks])
    ax.set_yticklabels([k for k, _ in ticks], fontsize=fs)
    for node, top, bottom in node_spans:
        ax.axhline(bottom + NODE_GAP / 2, color="black", linewidth=0.6)
        types = sorted({g.type for g in node.gpus})
        ax.text(1.005, (top + bottom) / 2, f"{node.name}\n{'/'.join(types)}", transform=ax.get_yaxis_transform(),
                va="center", ha="left", fontsize=fs)
    ax.set_xlabel("time (s)")
    preempted = any(s.end is not None for s in sched.segments)
    handles = [Patch(facecolor=IDLE, label="idle")]
    if preempted:
        handles += [Patch(facecolor="white", edgecolor="black", hatch="////", label="restart"),
                    plt.Line2D([], [], color="red", marker="x", linestyle="", label="preempted")]
    ax.legend(handles=handles, loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=3, fontsize=6, frameon=False)
    ax.set_title(title or f"{sched.method} on {inst.name}: objective {rep.objective:.6g}", fontsize=9, loc="left")


def gantt_figure(inst: Instance, sched: Schedule, title: str | None = None) -> Any:
    rows = len(inst.cluster.gpus) + NODE_GAP * len(inst.cluster.nodes)
    fig, ax = plt.subplots(figsize=(10, max(2.5, ROW_IN * rows + 1.2)))
    draw_gantt(ax, inst, sched, title)
    fig.tight_layout()
    return fig


def save_gantt(inst: Instance, sched: Schedule, path: str | os.PathLike, title: str | None = None) -> None:
    """Write the chart to ``path`` (PNG or SVG by its suffix) atomically, making its folder if needed."""
    fig = gantt_figure(inst, sched, title)
    p = Path(path)
    tmp = p.with_name(f".{p.name}.tmp")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(tmp, dpi=130, format=p.suffix.lstrip(".").lower() or "png")
        os.replace(tmp, p)
    finally:
        plt.close(fig)
        tmp.unlink(missing_ok=True)
