"""The GPU split's walks on held-out-style generated cases (benchmarks/cloudgen): GKE's machines billed
in parts, AKS's scale sets billed one row per VM under a reservation, EKS's instances with credits and
tax, each in its provider's own export. The lines walked in Python, placed and summed by the engine
query in DuckDB, and the query's BigQuery and Trino renderings read back and run on DuckDB give the
same audit.json (its ``sources`` apart), cent for cent."""
from __future__ import annotations

import decimal

import pytest

from audit import split_sql
from benchmarks.cloudgen.generate import generate
from benchmarks.cloudgen_check import audit_document
from tests.builders import on_walk

CASES = {"gke-native-commitments": ("gke", 5, "native", {"commitments": True}),
         "aks-focus-commitments": ("aks", 6, "focus", {"commitments": True}),
         "eks-native-adjustments": ("eks", 7, "native", {"adjustments": True})}
WALKS = ("duckdb", "bigquery", "trino")


@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, tmp_path_factory):
    """A generated case and its audit.json on the Python walk."""
    cloud, seed, billing, variant = CASES[request.param]
    folder = tmp_path_factory.mktemp(request.param) / "case"
    with decimal.localcontext():  # cloudgen sets its own precision
        generate(cloud, seed, folder, billing=billing, **variant)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COSTAUDIT_SPLIT", "python")
        return folder, audit_document(folder)


@pytest.mark.slow
@pytest.mark.parametrize("walk", WALKS)
def test_every_walk_gives_the_same_audit_json(case, walk, monkeypatch):
    folder, python_walk = case
    used = on_walk(monkeypatch, walk)
    got = audit_document(folder)
    assert used == [split_sql.ENGINES[walk]]
    assert python_walk["coverage"]["paid_gpu_hours"] not in (None, "0", 0)  # the split had lines to walk
    assert {k: v for k, v in got.items() if k != "sources"} == \
        {k: v for k, v in python_walk.items() if k != "sources"}
