"""benchmarks/trace/run_fanout.py on a small set: `costaudit run` in this process and with two
worker processes, the same audit.json, the ratios printed against the single process."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from tests.paths import ROOT


def test_the_run_fanout_benchmark_finds_the_same_audit_and_prints_its_ratios(tmp_path):
    save = tmp_path / "last.json"
    result = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "trace" / "run_fanout.py"), "--ranks", "3",
                             "--kernels", "300", "--skip-dask", "--save", str(save)], capture_output=True, text=True,
                            cwd=ROOT, timeout=600, env={**os.environ, "COSTAUDIT_BENCH_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads(save.read_text())
    single, workers = report["rows"]
    assert (single["mode"], workers["mode"]) == ("single", "workers-2")
    assert single["same_bytes"] and workers["same_bytes"] and single["sha256"] == workers["sha256"]
    assert single["wall_ratio"] == 1.0 and workers["wall_s"] > 0
    assert workers["tree_peak_mib"] > 0 and single["own_hwm_mib"] > 0
    assert "vs single: wall, run VmHWM" in result.stdout and "3 ranks" in result.stdout
