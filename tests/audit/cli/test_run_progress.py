"""`costaudit run` names every step on stderr as it starts: sources, each group of stages, audit.json,
and each report (the PDF takes seconds); a spinner on a terminal, one line per step otherwise;
nothing with --quiet."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.hostile.harness import write_case
from tests.paths import ROOT

STAGES = ["preparing invoice lines and telemetry", "splitting GPU time per service and interval",
          "unit costs, reconciliation and options", "gathering the evidence", "formatting audit.json"]


def run(case: Path, out: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "audit", "run", str(case), "--out", str(out), *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=300,
                          env={**os.environ, **(env or {})})


def progress_lines(stderr: str) -> list[str]:
    return [line.removeprefix("costaudit: ") for line in stderr.splitlines()
            if line.startswith("costaudit: ") and not line.startswith(("costaudit: warning", "costaudit: error"))]


def test_each_step_and_each_report_is_named_as_it_starts(tmp_path):
    case = write_case(tmp_path / "case")
    done = run(case, tmp_path / "out", "--format", "json,pdf,html,xlsx,csv")
    assert done.returncode == 0, done.stderr
    assert progress_lines(done.stderr) == [
        "reading billing source bill (focus)", *STAGES,
        "writing audit.json", "writing report.pdf", "writing report.html", "writing tables.xlsx",
        "writing tables/"]
    assert "reports in" in done.stdout  # the summary stays on stdout


def test_quiet_names_nothing(tmp_path):
    case = write_case(tmp_path / "case")
    done = run(case, tmp_path / "out", "--format", "json", "--quiet")
    assert done.returncode == 0, done.stderr
    # warnings still print (the case's one line is a charge no rule classes: lines_unmatched)
    assert progress_lines(done.stderr) == []
    assert all(line.startswith("costaudit: warning: ") for line in done.stderr.splitlines())
    assert (tmp_path / "out" / "audit.json").is_file()


def test_a_terminal_gets_a_spinner_naming_the_step(tmp_path):
    """FORCE_COLOR makes rich treat stderr as a terminal: the step text goes into the spinner (redrawn,
    then cleared), not into lines of its own."""
    case = write_case(tmp_path / "case")
    done = run(case, tmp_path / "out", "--format", "json,pdf", env={"FORCE_COLOR": "1", "TTY_COMPATIBLE": "1"})
    assert done.returncode == 0, done.stderr
    assert progress_lines(done.stderr) == []
    assert "writing report.pdf" in done.stderr  # seconds long: the spinner shows it
