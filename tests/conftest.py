"""Session-wide results the tests only read: the demo case audited once in-process, and once
through the command line; the generated EKS case (cloudgen seed 1). Copy a result before changing it."""
from __future__ import annotations

import subprocess
import sys

import pytest

from tests.paths import DEMO, ROOT


@pytest.fixture(scope="session")
def demo_audit() -> dict:
    """audit.json of fixtures/demo as a dict (``run_audit`` in this process)."""
    from audit.audit_json import to_dict
    from audit.case import load_case
    from audit.pipeline import run_audit

    return to_dict(run_audit(load_case(DEMO)))


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory):
    """``costaudit run fixtures/demo --format json`` in a subprocess: (completed process, out folder)."""
    out = tmp_path_factory.mktemp("demo-run") / "out"
    result = subprocess.run([sys.executable, "-m", "audit", "run", str(DEMO), "--out", str(out), "--format", "json"],
                            capture_output=True, text=True, cwd=ROOT, timeout=600)
    return result, out


@pytest.fixture(scope="session")
def eks(tmp_path_factory):
    """The cloudgen EKS case of seed 1 (benchmarks/cloudgen), written once: copy it to edit it."""
    out = tmp_path_factory.mktemp("cloudgen") / "eks"
    done = subprocess.run([sys.executable, "-m", "benchmarks.cloudgen", "--cloud", "eks", "--seed", "1",
                           "--out", str(out)], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    return out
