"""Reports and plots: files written, and the HTML loaded in a real browser (headless Chromium)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess

import pytest

from evaluation.leaderboard import default_methods
from evaluation.methods import resolve_all
from evaluation.report import write_report
from evaluation.runner import RunConfig, evaluate
from evaluation.suites import load_suite
from jctlab.cli import main
from jctlab.registry import featured_policies

from .eval_helpers import tiny_suite_path

CHECK = """<script>window.__errors=[];window.onerror=function(m){window.__errors.push(String(m));};
window.addEventListener('load',function(){var imgs=[].slice.call(document.images);
var bad=imgs.filter(function(i){return !(i.complete&&i.naturalWidth>0);}).map(function(i){return i.alt;});
var d=document.createElement('pre');d.id='jctlab-check';
d.textContent=JSON.stringify({images:imgs.length,bad:bad,errors:window.__errors});document.body.appendChild(d);});
</script>"""


def chromium() -> str | None:
    found = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if found is None and os.environ.get("JCTLAB_REQUIRE_BROWSER"):
        pytest.fail("JCTLAB_REQUIRE_BROWSER is set but no chromium is installed (make test installs it)")
    return found


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    suite = load_suite(str(tiny_suite_path()))
    out = d / "run"
    evaluate(RunConfig(suite, resolve_all("auto,fifo-firstfit,srtf+pal,las+packed-sticky"), out, None, 2.0, 1,
                       "inline", progress=False))
    return out


@pytest.fixture(scope="module")
def report(run_dir):
    return write_report(run_dir)


def test_report_files(run_dir, report):
    html, md = report
    page = html.read_text()
    assert page.count("data:image/png;base64,") >= 5          # four plots and at least one Gantt chart
    assert "<script" not in page and "src=\"http" not in page  # self-contained
    assert "≤" in page                                         # gaps against lower bounds shown as bounds
    text = md.read_text()
    for name in re.findall(r"\]\((report/[^)]+\.png)\)", text):
        assert (run_dir / name).stat().st_size > 1000
    assert "| method |" in text


def test_report_in_headless_chromium(report, tmp_path):
    exe = chromium()
    if exe is None:
        pytest.skip("chromium is not installed (make test installs it: apt-get install chromium)")
    html, _ = report
    page = html.read_text().replace("<head>", "<head>" + CHECK, 1)
    probe = tmp_path / "probe.html"
    probe.write_text(page)
    cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
           "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    m = re.search(r'<pre id="jctlab-check">(.*?)</pre>', r.stdout, re.S)
    assert m, f"no check output from chromium: {r.stderr[-2000:]}"
    res = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert res["images"] >= 5 and res["bad"] == [] and res["errors"] == []


def test_plot_command(run_dir, tmp_path, capsys):
    inst = next((run_dir / "instances").glob("preemptive-*.json"))
    rows = [json.loads(x) for x in (run_dir / "cells.jsonl").read_text().splitlines()]
    row = next(r for r in rows if r["instance"] == inst.stem and r["method"] == "srtf+pal")
    for ext in ("png", "svg"):
        out = tmp_path / f"g.{ext}"
        assert main(["plot", str(inst), str(run_dir / row["schedule"]), "--out", str(out)]) == 0
        assert out.stat().st_size > 1000
    assert (tmp_path / "g.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["plot", str(inst), str(run_dir / row["schedule"]), "--out", str(tmp_path / "g.pdf")]) == 2


def test_leaderboard_runs_the_featured_learned_policies_by_default():
    """The shipped learned policies are on the leaderboard without --methods: policy families feature them
    (registry.featured_policies), and each is run on the online classes of the suite."""
    methods, classes = default_methods(load_suite("queue-small"), None)
    names = {m.name for m in methods}
    assert {"hrl", "ppo", "maifs"} <= names and {"hrl", "ppo", "maifs"} <= set(featured_policies())
    assert "static" not in classes["hrl"] and "offline" in classes["maifs"]
