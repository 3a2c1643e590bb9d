"""The GPU split's walks on the demo case: the lines walked in Python, placed and summed by the
engine query in DuckDB, and the query's BigQuery and Trino renderings run back on DuckDB: the same
audit.json every way. And the money's integer limbs (audit.split_limbs) sum exactly."""
from __future__ import annotations

import decimal
import subprocess
import sys
from decimal import Decimal

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit import gpusplit, split_sql
from audit.split_limbs import joined, limbs, scale_of
from schemas.errors import UsageError
from tests.builders import on_walk
from tests.paths import DEMO, ROOT


@pytest.mark.parametrize("walk", ["duckdb", "bigquery", "trino"])
def test_the_demo_gives_the_same_audit_json_every_walk(walk, demo_audit, monkeypatch):
    from audit.audit_json import to_dict
    from audit.case import load_case
    from audit.pipeline import run_audit

    used = on_walk(monkeypatch, walk)
    got = to_dict(run_audit(load_case(DEMO)))
    assert used == [split_sql.ENGINES[walk]]
    assert {k: v for k, v in got.items() if k != "sources"} == {k: v for k, v in demo_audit.items() if k != "sources"}


def test_a_walk_no_engine_has_is_refused_by_name(monkeypatch):
    monkeypatch.setenv("COSTAUDIT_SPLIT", "spark")
    with pytest.raises(UsageError, match=r"COSTAUDIT_SPLIT='spark': expected one of python, duckdb"):
        gpusplit.walk_named()
    assert gpusplit.walk_named("duckdb") == "duckdb"
    monkeypatch.setenv("COSTAUDIT_SPLIT", " ")
    assert gpusplit.walk_named() == "python"


def test_the_cli_says_which_walk_it_did_not_know(tmp_path):
    env = {"COSTAUDIT_SPLIT": "spark", "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    result = subprocess.run([sys.executable, "-m", "audit", "run", str(DEMO), "--out", str(tmp_path / "out"),
                             "--format", "json", "--quiet"], capture_output=True, text=True, cwd=ROOT, env=env,
                            timeout=300)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "COSTAUDIT_SPLIT='spark'" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


# --- limbs -------------------------------------------------------------------------------------

@settings(max_examples=200, deadline=None)
@given(st.lists(st.decimals(allow_nan=False, allow_infinity=False, min_value=-10 ** 12, max_value=10 ** 12),
                min_size=1, max_size=40),
       st.lists(st.integers(0, 39), max_size=40))
def test_limbs_sum_exactly(values, picks):
    """Any amounts (50 digits, any exponent and sign): the limb columns summed over any rows put back
    together are the exact sum, in a context wide enough to hold it."""
    with decimal.localcontext(decimal.Context(prec=50)):
        values = [+v for v in values]  # as the audit holds them: 50 significant digits
    rows = sorted({p % len(values) for p in picks}) or [0]
    scale = scale_of([values])
    columns = limbs(values, scale)
    assert columns.dtype == np.int64 and np.abs(columns).max(initial=0) < 10 ** 9
    sums = [int(columns[j][rows].sum()) for j in range(columns.shape[0])]
    with decimal.localcontext(decimal.Context(prec=1000)):
        want = sum((values[r] for r in rows), Decimal(0))
        assert joined(sums, scale) == want


def test_limbs_of_one_50_digit_amount_and_its_negative():
    value = Decimal("-98.318867" + "3" * 42)
    scale = scale_of([[value, -value]])
    columns = limbs([value, -value], scale)
    assert scale == 48 and columns.shape == (6, 2)
    assert joined(list(columns[:, 0]), scale) == value and joined(list(columns[:, 1]), scale) == -value
    assert joined(list(columns.sum(axis=1)), scale) == 0
