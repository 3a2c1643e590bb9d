"""A run that spills says so as it happens; one that runs out of DuckDB memory ends in one line that
names the limit and how to raise it (exit 1, nothing written, no traceback).

The watch is tested on real files and its real thread; the end-to-end runs check the error line
only, since whether DuckDB spills long enough for a poll to see it before it gives up is timing."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from audit.cli.spill import GIB, SpillWatch
from tests.paths import ROOT

CASE = """[case]
name = "spill"
window = ["2025-01-01", "2025-02-01"]
currency = "USD"
tolerance = 0.02
loaded_rate = 150

[[billing]]
name = "cur"
format = "cur"
path = "{path}"

[services.app1]
tags = {{application = "app-1"}}
"""


def test_the_first_spill_and_each_further_gib_are_named_once(tmp_path):
    folder = tmp_path / "duckdb-tmp"
    folder.mkdir()
    (folder / "other-run.tmp").write_bytes(b"x" * 4096)  # there before this run: not counted
    said: list[str] = []
    watch = SpillWatch(folder, "512MB", said.append)
    assert watch.poll() is None and watch.spilled() == 0
    block = folder / "duckdb_temp_storage-0.tmp"
    with open(block, "wb") as f:
        f.truncate(3 * 2**20)
    words = watch.poll()
    assert words is not None and "3 MiB" in words and str(folder) in words and "512MB" in words
    assert "COSTAUDIT_DUCKDB_MEMORY" in words
    assert watch.poll() is None  # the same size: said once
    with open(block, "r+b") as f:
        f.truncate(GIB + 2**20)
    assert "1.0 GiB" in (watch.poll() or "")
    assert watch.poll() is None
    block.unlink()
    assert watch.poll() is None and watch.peak == GIB + 2**20


def test_the_watch_thread_says_what_it_sees(tmp_path):
    folder = tmp_path / "duckdb-tmp"
    said: list[str] = []
    with SpillWatch(folder, "1GB", said.append, interval=0.01):
        folder.mkdir()
        (folder / "block.tmp").write_bytes(b"x" * 2**20)
        for _ in range(500):
            if said:
                break
            time.sleep(0.01)
    assert len(said) == 1 and "1 MiB" in said[0]


@pytest.mark.parametrize("limit", ["30MB", "50MB"])  # out of memory reading a file's schema; in the audit's query
def test_a_run_out_of_duckdb_memory_is_one_line_naming_the_limit(tmp_path, limit):
    export = tmp_path / "export"
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "billing" / "generate.py"), str(export), "100000"],
                   check=True, capture_output=True, timeout=120)
    case = tmp_path / "case"
    case.mkdir()
    (case / "case.toml").write_text(CASE.format(path=export / "costaudit-bench"))
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "audit", "run", str(case), "--out", str(out), "--format", "json"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, "COSTAUDIT_CACHE": str(tmp_path / "cache"),
                               "COSTAUDIT_DUCKDB_MEMORY": limit})
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("costaudit: error:")]
    assert len(errors) == 1, done.stderr
    assert "out of memory" in errors[0] and limit in errors[0] and "COSTAUDIT_DUCKDB_MEMORY" in errors[0]
    assert "Traceback" not in done.stderr and "╭" not in done.stderr
    assert str(tmp_path / "cache" / "duckdb-tmp") in errors[0]  # where it spilled
    assert not out.exists()  # whether a spill line came first depends on the watch's timing: see above


@pytest.mark.parametrize("name, value, said", [
    ("COSTAUDIT_DUCKDB_MEMORY", "4 gigs", "COSTAUDIT_DUCKDB_MEMORY='4 gigs': expected a positive size such as 4GB, 512MiB or 80%"),
    ("COSTAUDIT_CACHE", "/proc/nope", "COSTAUDIT_CACHE: the spill folder /proc/nope/duckdb-tmp cannot be made")])
def test_a_bad_duckdb_setting_is_one_line(tmp_path, name, value, said):
    """Before: a 300-line traceback of DuckDB's parser, or of mkdir, and exit 1."""
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "audit", "run", str(ROOT / "fixtures" / "demo"), "--out", str(out), "-q"],
                          capture_output=True, text=True, cwd=ROOT, timeout=300, env={**os.environ, name: value})
    assert done.returncode == 1 and "Traceback" not in done.stderr and not out.exists()
    assert done.stderr.startswith(f"costaudit: error: {said}") and len(done.stderr.splitlines()) == 1
