"""Microsoft Philly trace (Jeon et al., ATC'19) as copied by Pollux/AdaptDL (``traces/philly.csv``).

82,247 jobs: ``timestamp`` (submission, used as arrival), ``duration`` (s), ``num_gpus``,
``gpu_time``, ``cluster`` (virtual-cluster hash). The trace has no model names, so each job is given
a Gavel job type drawn uniformly with ``seed`` and an iteration count such that its run time on its
own GPU count of the reference type (``gpu_type``, packed on as few nodes as possible, SPEC §2 with
Gavel's measured tables) equals the trace duration. Jobs are rigid (``sizes = [num_gpus]``).

Loading is vectorised: the full trace builds in a few seconds.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pandas as pd

from ..errors import InputError
from ..limits import TIME
from ..model import Instance
from ._common import check_numeric, load_table, node_dicts, read_csv, require_data_dir
from .gavel import GAVEL_TYPES, job_types as gavel_job_types, reference_iteration_time

COLUMNS = ("timestamp", "duration", "num_gpus", "cluster")


def trace_path(data_dir: str | os.PathLike | None = None) -> Path:
    return require_data_dir(data_dir, "the Philly trace") / "pollux_adaptdl" / "traces" / "philly.csv"


def _when(v: Any, t0: pd.Timestamp, what: str) -> pd.Timestamp:
    """A window bound: seconds after the first arrival (a number, or a string of one: ``"3600"``) or a
    date/time string without a time zone (``"2017-10-03"``, ``"2017-10-03 12:00"``)."""
    flag = f"--{what}"
    if isinstance(v, str):
        try:
            v = float(v.strip())
        except ValueError:
            pass
    if isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool):
        x = float(v)
        if not math.isfinite(x) or abs(x) > TIME.hi:
            raise InputError("command line", flag, f"{v!r} seconds: must be finite, within ±{TIME.hi:g}")
        return t0 + pd.Timedelta(seconds=x)
    try:
        ts = pd.Timestamp(v)
    except (TypeError, ValueError, OverflowError):
        ts = pd.NaT
    if ts is pd.NaT or pd.isna(ts):
        raise InputError("command line", flag, f"{v!r} is neither seconds after the first arrival nor a date/time")
    if ts.tzinfo is not None:
        raise InputError("command line", flag, f"{v!r}: give a date/time without a time zone (the trace has none)")
    return ts


def read_trace(path: str | os.PathLike | None = None, *, data_dir: str | os.PathLike | None = None,
               vc: str | Sequence[str] | None = None, start: Any = None, end: Any = None,
               max_jobs: int | None = None) -> pd.DataFrame:
    """The selected rows, sorted by (timestamp, duration), with ``arrival`` (s after the first kept job).

    ``vc``: one or several ``cluster`` values; ``start``/``end``: window on submission time, either
    seconds after the first (VC-filtered) submission or date strings (``"2017-10-01"``), end
    exclusive; ``max_jobs``: first N after that.
    """
    p = Path(path) if path is not None else trace_path(data_dir)
    df = read_csv(p, COLUMNS, dtype={"cluster": str})
    for col, kw in (("duration", {"positive": True}), ("num_gpus", {"positive": True})):
        check_numeric(df, p, col, **kw)
    ts = pd.to_datetime(df["timestamp"], format="%Y-%m-%d %H:%M:%S", errors="coerce")
    if ts.isna().any():
        i = int(ts.isna().to_numpy().nonzero()[0][0])
        raise InputError(str(p), "timestamp", f"row {i + 2}: {df['timestamp'].iloc[i]!r} is not YYYY-MM-DD HH:MM:SS")
    df = df.assign(ts=ts)
    if vc is not None:
        want = [vc] if isinstance(vc, str) else list(vc)
        known = set(df["cluster"].unique())
        bad = [v for v in want if v not in known]
        if bad:
            raise InputError(str(p), "cluster", f"unknown virtual cluster {bad[0]!r}; known: "
                             f"{', '.join(sorted(known))}")
        df = df[df["cluster"].isin(want)]
    df = df.sort_values(["ts", "duration"], kind="stable")
    t0 = df["ts"].iloc[0]
    if start is not None:
        df = df[df["ts"] >= _when(start, t0, "start")]
    if end is not None:
        df = df[df["ts"] < _when(end, t0, "end")]
    if max_jobs is not None:
        df = df.iloc[:max_jobs]
    if df.empty:
        raise InputError(str(p), "", "no job left after selecting virtual cluster / window")
    arrival = (df["ts"] - df["ts"].iloc[0]).dt.total_seconds().to_numpy()
    return df.assign(arrival=arrival).reset_index(drop=True)


def load_philly(path: str | os.PathLike | None = None, *, data_dir: str | os.PathLike | None = None,
                vc: str | Sequence[str] | None = None, start: Any = None, end: Any = None,
                max_jobs: int | None = None, seed: int = 0, nodes: int = 8, gpus_per_node: int = 8,
                gpu_type: str = "v100", job_types: Sequence[str] | None = None,
                problem: str = "preemptive", objective: str = "mean_jct", restart_s: float = 0.0,
                locality_penalty: float = 1.0, name: str | None = None) -> Instance:
    """Instance of (a selection of) the Philly trace on ``nodes`` x ``gpus_per_node`` GPUs of ``gpu_type``.

    See :func:`read_trace` for the selection. ``job_types`` restricts the Gavel types drawn from
    (default all 26). Jobs needing more GPUs than the cluster has are dropped and counted in the
    instance's ``source.dropped_too_large``; for ``problem="static"`` arrivals are set to 0.
    """
    if gpu_type not in GAVEL_TYPES:
        raise InputError("gpu_type", "", f"{gpu_type!r}: one of {', '.join(GAVEL_TYPES)}")
    if nodes < 1 or gpus_per_node < 1:
        raise InputError("nodes", "", "the cluster needs at least one node with one GPU")
    df = read_trace(path, data_dir=data_dir, vc=vc, start=start, end=end, max_jobs=max_jobs)
    total = nodes * gpus_per_node
    n_all = len(df)
    df = df[df["num_gpus"] <= total].reset_index(drop=True)
    if df.empty:
        raise InputError("nodes", "", f"no job fits a {total}-GPU cluster")

    types = gavel_job_types()
    names = sorted(job_types) if job_types is not None else sorted(types)
    for t in names:
        if t not in types:
            raise InputError("job_types", "", f"unknown Gavel job type {t!r}")
    names = [t for t in names if types[t]["samples_per_s"].get(gpu_type, 0) > 0]
    if not names:
        raise InputError("job_types", "", f"no chosen job type runs on {gpu_type}")
    rng = np.random.default_rng(seed)
    pick = rng.integers(len(names), size=len(df))
    gpus = df["num_gpus"].to_numpy().astype(int)

    # iteration time per (type, GPU count): at most 26 x ~10 distinct pairs
    tab = load_table("gavel_job_types.json")
    t_ref = np.empty(len(df))
    for ti, n in set(zip(pick.tolist(), gpus.tolist())):
        t = reference_iteration_time(names[ti], n, gpu_type, gpus_per_node,
                                     locality_penalty=locality_penalty, types=types,
                                     intra_gbps=tab["intra_node_gbps"], inter_gbps=tab["inter_node_gbps"])
        t_ref[(pick == ti) & (gpus == n)] = t
    iters = df["duration"].to_numpy() / t_ref

    static = problem == "static"
    proto = []
    for t in names:
        jt = types[t]
        proto.append({"model": t, "class": t, "batch": jt["batch"], "samples_per_s": jt["samples_per_s"],
                      "comm_mb": jt["comm_mb"], "measured": jt["measured"]})
    arrival = df["arrival"].to_numpy()
    jobs = [dict(proto[ti], name=f"j{i}", arrival=0.0 if static else float(a), iterations=float(it),
                 sizes=[int(n)])
            for i, (ti, a, it, n) in enumerate(zip(pick.tolist(), arrival.tolist(), iters.tolist(), gpus.tolist()))]
    vcs = vc if vc is None or isinstance(vc, str) else "+".join(vc)
    d = {
        "format": "jctlab.instance/1",
        "name": name or f"philly-{vcs or 'all'}-{len(jobs)}-{nodes}x{gpus_per_node}{gpu_type}-s{seed}",
        "problem": problem, "objective": objective,
        "cluster": {"nodes": node_dicts([(gpu_type, nodes, gpus_per_node)]),
                    "intra_node_gbps": tab["intra_node_gbps"], "inter_node_gbps": tab["inter_node_gbps"],
                    "locality_penalty": locality_penalty, "split": "proportional", "restart_s": restart_s},
        "jobs": jobs,
        "source": {"kind": "philly", "vc": vcs, "seed": seed, "reference_gpu": gpu_type,
                   "first_submit": str(df["ts"].iloc[0]), "dropped_too_large": n_all - len(df)},
    }
    return Instance.from_dict(d, source=str(path or "philly.csv"))


__all__ = ["read_trace", "load_philly", "trace_path"]

