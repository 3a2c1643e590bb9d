"""benchmarks/split/run.py on a small fleet: both walks timed, their ratio printed, the same split."""
from __future__ import annotations

import json
import subprocess
import sys

from tests.paths import ROOT


def test_the_split_benchmark_times_both_walks_and_finds_them_equal():
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "split" / "run.py"), "--nodes", "4",
                             "--hours", "6", "--scale-set", "3", "--json"], capture_output=True, text=True,
                            cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["lines"] == 24 and report["gpu_samples"] == 4 * 6 * 8
    assert report["same_split"] is True
    assert report["python_s"] > 0 and report["duckdb_s"] > 0
    # the times and the ratio (of the times before rounding) are each rounded to 3 places
    ratio, python_s = report["duckdb_over_python"], report["python_s"]
    assert abs(ratio * python_s - report["duckdb_s"]) <= 0.0005 * (ratio + 1 + python_s) + 1e-9


def test_the_split_benchmark_prints_the_ratio_against_the_python_walk():
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "split" / "run.py"), "--nodes", "2",
                             "--hours", "3"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "python walk (baseline)" in result.stdout and "x the baseline)" in result.stdout
    assert "same groups (money to 1E-30) and coverage: yes" in result.stdout
