"""The MAIFS-like policy's tables from an evaluation run (``jctlab evaluate --suite maifs-synergy|maifs-philly``).

    jctlab evaluate --suite maifs-synergy --out runs/maifs-eval
    python scripts/maifs_report.py runs/maifs-eval [--baseline synergy-tune] [--policy maifs]

Per family and method (from ``RUN/results.csv``): valid schedules, mean JCT and makespan over the baseline's
(the mean of per-instance ratios), instances where the mean JCT is lower than the baseline's, the mean gap
to the suite's reference (to the proven optimum where every instance of the family has one, else to the
strongest reference, printed with its kind), and p99 decision latency. Then the scaling check: the policy's
standing (its mean JCT over the baseline's) on each ``NAME-x4`` family against ``NAME``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd


def tables(df: pd.DataFrame, baseline: str) -> list[str]:
    out = []
    for fam, g in df.groupby("family", sort=False):
        base = g[g.method == baseline].set_index("instance")
        kinds = sorted(set(g.ref_kind.dropna()))
        out.append(f"\n**{fam}** ({g.instance.nunique()} instances, {g.jobs.min()}-{g.jobs.max()} jobs, "
                   f"{g.gpus.min()}-{g.gpus.max()} GPUs, {g.nodes.min()}-{g.nodes.max()} nodes; references: "
                   f"{', '.join(kinds)})\n")
        out.append(f"| method | valid | mean JCT / {baseline} | makespan / {baseline} | wins | mean gap (ref) | "
                   f"p99 decide ms |")
        out.append("|---|---:|---:|---:|---:|---:|---:|")
        for m, r in g.groupby("method", sort=False):
            r = r.set_index("instance")
            ok = r.valid.astype(bool)
            jct = (r.mean_jct / base.mean_jct.reindex(r.index)).where(ok)
            mk = (r.makespan / base.makespan.reindex(r.index)).where(ok)
            wins = int((r.mean_jct < base.mean_jct.reindex(r.index) - 1e-9).where(ok, False).sum())
            gaps = r.gap.where(ok)
            kind = "/".join(sorted(set(r.ref_kind.dropna()))) or "-"
            out.append(f"| {m} | {int(ok.sum())}/{len(r)} | {np.nanmean(jct):.3f} | {np.nanmean(mk):.3f} | "
                       f"{wins}/{len(r)} | {100 * np.nanmean(gaps):.1f} % ({kind}) | "
                       f"{np.nanmedian(r.latency_p99_ms):.2f} |")
    return out


def scaling(df: pd.DataFrame, baseline: str, policies: list[str]) -> list[str]:
    out = ["", f"| policy | family | standing at 1x (mean JCT / {baseline}) | at 4x | change |", "|---|---|---:|---:|---:|"]
    fams = set(df.family)
    for p in policies:
        for fam in sorted(f for f in fams if f.endswith("-x4")):
            small = fam[: -len("-x4")]
            if small not in fams:
                continue
            s = []
            for f in (small, fam):
                g = df[df.family == f]
                b = g[g.method == baseline].set_index("instance").mean_jct
                r = g[g.method == p].set_index("instance")
                s.append(float(np.nanmean(r.mean_jct / b.reindex(r.index))))
            out.append(f"| {p} | {small} | {s[0]:.3f} | {s[1]:.3f} | {100 * (s[1] / s[0] - 1):+.1f} % |")
    return out if len(out) > 3 else []          # no NAME-x4 family beside its NAME: no table


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", type=Path)
    p.add_argument("--baseline", default="synergy-tune")
    p.add_argument("--policy", default="maifs,maifs-greedy")
    a = p.parse_args(argv)
    df = pd.read_csv(a.run / "results.csv")
    print("\n".join(tables(df, a.baseline) + scaling(df, a.baseline, a.policy.split(","))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
