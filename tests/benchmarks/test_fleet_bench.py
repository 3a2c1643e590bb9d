"""benchmarks/fleet end to end at a tiny size (20,000 CUR lines, 16 GPUs, one day), so that the harness
cannot rot: the data are generated coherent (the billed GPU instances are the TSDB's nodes), a real
Prometheus serves the TSDB, and the harness prints the table, the scaling curve and the stage split.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import duckdb
import pytest

from tests.paths import ROOT

pytestmark = [pytest.mark.services, pytest.mark.slow]

RUN = ROOT / "benchmarks" / "fleet" / "run.py"
TINY = ["--lines", "20000", "--nodes", "2", "--hours", "24", "--repeat", "1"]


def harness(tmp_path, *extra: str) -> subprocess.CompletedProcess:
    # two sources read at once whatever the cores, so that the harness's merged step is exercised
    env = {**os.environ, "COSTAUDIT_BENCH_CACHE": str(tmp_path / "cache"), "COSTAUDIT_READERS": "2"}
    return subprocess.run([sys.executable, str(RUN), *TINY, *extra], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=300)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fleet")
    done = harness(folder, "--format", "json", "--json", "--keep", str(folder / "work"))
    assert done.returncode == 0, done.stderr[-3000:]
    text = done.stdout
    figures = json.loads(text[text.index("\n[") + 1:])
    return folder, text, figures


def test_prints_the_table_the_curve_and_the_stage_split(tiny):
    _folder, text, _figures = tiny
    assert "fleet benchmark: 16 GPUs (2 p5.48xlarge) x 24 h" in text
    for run in ("duckdb floor", "keyed floor", "billing", "prometheus"):
        assert f"20,000 {run}" in text
    assert "Prometheus server apart:" in text
    assert "scaling curve" in text
    assert "stage split, 20,000 lines, billing" in text
    assert "stage split, 20,000 lines, prometheus" in text
    # the two sources are read side by side: one step, and a note with each source's own time
    assert "reading billing source cur (cur) + telemetry source prometheus (prometheus)" in text
    assert "read telemetry source prometheus in " in text and "read billing source cur in " in text


def test_figures_are_measured_per_child(tiny):
    _folder, _text, figures = tiny
    (size,) = figures
    assert size["lines"] == 20000
    for floor in ("floor", "keyed_floor"):  # the 11-key GROUP BY, and the one on the audit's own keys
        assert size[floor]["wall_s"] > 0 and size[floor]["peak_rss"] > 0
    for name in ("billing", "prometheus"):
        run = size[name]
        assert "failed" not in run and run["exit"] in (0, 2)
        assert run["own_hwm"] > 20 * 2**20  # the child's own VmHWM, written as it exited
        steps = [step for step, _seconds, _peak in run["stages"]]
        assert steps[0] == "start" and steps[1].startswith("reading billing source cur (cur)")
        assert abs(sum(seconds for _step, seconds, _peak in run["stages"]) - run["wall_s"]) < 0.01
        peaks = [peak for _step, _seconds, peak in run["stages"]]
        assert max(peaks) == run["polled_rss"]  # each step's polled peak; the largest is the run's
    assert size["prometheus"]["server_rss"] > 0
    assert size["tsdb"]["gpus"] == 16 and size["tsdb"]["scrape_seconds"] == 60


def test_billing_and_telemetry_are_one_fleet(tiny):
    folder, _text, _figures = tiny
    export = next((folder / "cache").rglob("costaudit-bench"))
    gpu_lines = duckdb.sql(
        f"SELECT product_instance_type, count(*), count(DISTINCT line_item_resource_id) "
        f"FROM read_parquet('{export}/data/*/*.parquet') WHERE product_instance_type SIMILAR TO '(p|g|trn).*' "
        f"GROUP BY ALL").fetchall()
    assert gpu_lines == [("p5.48xlarge", 2 * 24, 2)]  # the fleet only: every node, every hour
    audit = json.loads((folder / "work" / "out-20000-prometheus" / "audit.json").read_text())
    coverage = audit["coverage"]
    assert coverage["paid_gpu_hours"] == coverage["observed_gpu_hours"] == "384.00"
    assert coverage["unmeasured_gpu_hours"] == "0.00"


def test_a_baseline_revision_runs_in_turn_with_this_checkout(tmp_path):
    """--baseline-ref: the revision's code (git archive) runs the same case, in turn, and the
    table gives baseline / this for wall and RSS."""
    done = harness(tmp_path, "--no-prometheus", "--format", "json", "--json", "--baseline-ref", "HEAD",
                   "--rounds", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    text = done.stdout
    (size,) = json.loads(text[text.index("\n[") + 1:])
    for name in ("billing", "billing@base"):
        assert "failed" not in size[name] and size[name]["exit"] in (0, 2)
        assert size[name]["own_hwm"] > 20 * 2**20
    assert "baseline HEAD (run@base), 2 round(s) in turn" in text
    assert "20,000 billing@base" in text
    ratio = size["billing@base"]["wall_s"] / size["billing"]["wall_s"]
    assert f"baseline / this: {ratio:.2f}x wall" in text
    assert "prometheus" not in size


def test_a_run_past_the_cap_is_stopped(tmp_path):
    done = harness(tmp_path, "--no-prometheus", "--format", "json", "--cap-gib", "0.03")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "stopped at cap (0.03 GiB)" in done.stdout


def test_the_tree_counts_each_address_space_once():
    """A process is its own address space (kcmp says so), a forked child is another one and is
    counted; the harness's tree RSS is at least the parent's own."""
    import time

    from benchmarks.fleet.run import shares_memory, status_kib, tree_rss

    me = os.getpid()
    assert shares_memory(me, me)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(5)"])
    try:
        time.sleep(0.5)
        assert not shares_memory(me, child.pid)
        own = status_kib(me, "VmRSS") * 1024
        assert tree_rss(me) >= own + status_kib(child.pid, "VmRSS") * 1024 * 0.9
    finally:
        child.kill()
        child.wait()
