"""The long fuzz run of issue 44 (``make fuzz``): N hostile cases through every verb, the count of each outcome.

    python scripts/fuzz.py --cases 2000 [--seed 0] [--verbs evaluate,train] [--log fuzz.jsonl] [--save failures/]

Cases come from the Hypothesis strategies of ``tests/fuzzing.py`` (instances, schedules, cache files, suite
manifests, run folders, demonstrations and options, each mutation knowing whether it makes the input
nonsense; every verb, core and plug-in, by default, or those of ``--verbs``) and run in-process through
``jctlab.cli.main``; each is judged on the properties of the issue (no traceback, exit code with its
documented meaning, one stderr line on exit 2, no RuntimeWarning, nothing written on error, within its
time limit + 2 s or 10 s). Outcomes: ``ok:exit-N`` (``:nonsense-refused`` when the input was nonsense
and exit 2 came back) or ``FAIL:<properties broken>``. ``--log`` appends one JSON line per case and
resumes after a kill (the cases already logged are generated again but not run). Exit code 1 when a
case failed. Timings under load (other processes on the machine) can push a slow case over its limit:
the report says which cases, with their times, so that they can be re-run on a quiet machine.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import seed as hypothesis_seed  # noqa: E402
from tqdm import tqdm  # noqa: E402

from jctlab import jsonl  # noqa: E402
from tests.fuzzing import ALL_WEIGHTS, cases, materialize, outcome_name, run_and_judge  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--verbs", default=None, help=f"comma list of verbs (default: all: {','.join(ALL_WEIGHTS)})")
    ap.add_argument("--log", type=Path, default=None, help="JSON lines, one per case; resumes from it (delete it to start over)")
    ap.add_argument("--save", type=Path, default=None, help="folder for the files and command of failing cases")
    a = ap.parse_args(argv)
    weights = None
    if a.verbs:
        weights = {v: ALL_WEIGHTS[v] for v in a.verbs.split(",") if v in ALL_WEIGHTS}
        if not weights:
            ap.error(f"--verbs: none of {a.verbs!r} is a verb ({', '.join(ALL_WEIGHTS)})")
    done: list[dict] = []
    if a.log is not None:
        a.log.parent.mkdir(parents=True, exist_ok=True)
    if a.log is not None:
        done = jsonl.read_all(a.log, repair=True)      # a case cut short by a kill runs again
    counts = collections.Counter(d["outcome"] for d in done)
    by_verb = collections.Counter((d["verb"], d["outcome"].split(":")[0]) for d in done)
    failures = [d for d in done if d["outcome"].startswith("FAIL")]
    seen = [0]
    bar = tqdm(total=a.cases, initial=len(done), unit="case", file=sys.stderr)
    t_start = time.perf_counter()

    @hypothesis_seed(a.seed)
    @settings(max_examples=a.cases, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))
    @given(case=cases(weights))
    def run(case):
        i = seen[0]
        seen[0] += 1
        if i < len(done) or i >= a.cases:
            return
        o, broken = run_and_judge(case)
        name = outcome_name(case, o, broken)
        rec = {"i": i, "verb": case.verb, "outcome": name, "seconds": round(o.seconds, 3),
               "case": case.describe(), "stderr": o.stderr[-400:], "error": (o.error or "")[-2000:]}
        counts[name] += 1
        by_verb[(case.verb, name.split(":")[0])] += 1
        if broken:
            failures.append(rec)
            if a.save is not None:
                d = a.save / f"case-{i:05d}"
                d.mkdir(parents=True, exist_ok=True)
                (d / "argv.json").write_text(json.dumps(materialize(case, d)))
        if a.log is not None:
            jsonl.append(a.log, rec)
        bar.update(1)

    run()
    bar.close()
    total = sum(counts.values())
    print(f"\n{total} cases (seed {a.seed}) in {time.perf_counter() - t_start:.0f} s this run")
    for name, k in sorted(counts.items()):
        print(f"  {k:6d}  {name}")
    print("by verb (ok / FAIL):")
    for verb in sorted({v for v, _ in by_verb}):
        print(f"  {verb:14s} {by_verb[(verb, 'ok')]:6d} / {by_verb[(verb, 'FAIL')]}")
    for rec in failures:
        print(f"\n#{rec['i']} {rec['outcome']} ({rec['seconds']} s): {rec['case']}\n{rec['stderr']}\n{rec['error']}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
