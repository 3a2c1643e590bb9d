"""The whole audit of a month read through Athena equals the audit of the same CUR file read locally.

Issue 18's bar for the attribution where the bill lives: the same cents whichever engine summed the
lines. The Athena path is the connector's own (Glue, Athena on moto in server mode, paged results
through a proxy), seeded with the DuckDB rendering of the query it sends (``tests/servers/athena.py``:
moto runs no SQL); the local path is ``format = "cur"`` on the Dec 2018 workshop Parquet. Both
documents are audit.json as ``costaudit run`` writes it, the two sources named alike; only
``sources`` may differ (the format, the path, Athena's query note).
"""
from __future__ import annotations

import csv
import gzip
import json
import re
import shutil
import sys
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import boto3
import duckdb
import pytest

from audit import split_sql
from audit.audit_json import to_dict
from audit.collected import Collected
from audit.pipeline import audit_collected
from benchmarks.cloudgen.generate import generate
from connectors.base import ReadContext, SourceSpec
from connectors.billing import cur_aggregate as agg
from connectors.duck import prepare
from connectors.registry import resolve
from tests.builders import make_case, read_cur_once
from tests.paths import ROOT
from tests.servers.athena import DATABASE, DEC2018, MONTH, local_rows, options, seed, split_engine

sys.path.insert(0, str(ROOT / "benchmarks"))
from cloudgen_check import audit_document, compare  # noqa: E402

sys.path.remove(str(ROOT / "benchmarks"))

pytestmark = pytest.mark.services


def month_case():
    """The workshop month, every account in scope, no declared service."""
    return replace(make_case(accounts=()), name="workshop", start=MONTH[0], end=MONTH[1], services={})


def audit(frame) -> dict:
    return to_dict(audit_collected(month_case(), Collected((frame,))))


def test_the_audit_through_athena_equals_the_audit_of_the_local_file(moto, glue, proxy):
    names, rows = local_rows(MONTH)
    seed(moto, names, rows)
    spec = SourceSpec("cur", "billing", "athena", None, options(proxy.url))
    remote = resolve("athena")(spec, ReadContext(*MONTH, "USD")).read()
    local = read_cur_once(DEC2018, *MONTH)  # its source is named "cur" too
    assert local.spec.name == remote.spec.name == "cur"
    through_athena, from_the_file = audit(remote), audit(local)
    assert through_athena["sources"][0]["format"] == "athena" and from_the_file["sources"][0]["format"] == "cur"
    assert without_line_ids(through_athena) == without_line_ids(from_the_file)
    assert "<line>" in without_line_ids(from_the_file)  # the bridge names its Spot lines without list price
    # not an empty agreement: the month's money is all there, in every bucket it reaches
    assert through_athena["invoice_total"] == "408.38"
    assert through_athena["total"] == "539.85"  # effective cost: the amortised commitments
    assert sum(1 for b in through_athena["buckets"].values() if b["parts"]) >= 2


# ---- a held-out-style case: cloudgen's EKS day as a CUR 2.0 export, with telemetry and a profile ----

EKS_TABLE = "cloudgen_eks"
CUR2_MAPS = ("product", "resource_tags", "cost_category", "discount")


@pytest.fixture(scope="module")
def eks_day(tmp_path_factory):
    """cloudgen's EKS case (seed 5) written with a CUR 2.0 data export as its billing file."""
    folder = tmp_path_factory.mktemp("eks-native") / "case"
    return folder, generate("eks", 5, folder, billing="native")


def glue_type(name: str) -> str:
    """A CUR 2.0 column's type in its Athena table (maps, doubles, timestamps, strings)."""
    if name in CUR2_MAPS:
        return "map<string,string>"
    if name.endswith("_date"):
        return "timestamp"
    numeric = ("cost", "rate", "amount", "factor", "fee", "quantity", "value", "commitment")
    if any(word in name for word in numeric) and not name.endswith(("_code", "_id", "_type", "_option", "_term")):
        return "double"
    return "string"


def athena_view(path: Path) -> tuple[list[tuple[str, str]], str]:
    """The export's columns as Glue types them, and a DuckDB SELECT that holds the file as Athena
    would (maps as MAP, money as DOUBLE, usage dates as UTC timestamps)."""
    with gzip.open(path, "rt", newline="") as handle:
        header = next(csv.reader(handle))
    columns = [(name, glue_type(name)) for name in header]
    cast = {"map<string,string>": "CAST(CAST(NULLIF({c}, '') AS JSON) AS MAP(VARCHAR, VARCHAR))",
            "double": "CAST(NULLIF({c}, '') AS DOUBLE)",
            "timestamp": "CAST(replace(replace(NULLIF({c}, ''), 'T', ' '), 'Z', '') AS TIMESTAMP)",
            "string": "NULLIF({c}, '')"}
    select = ", ".join(f"{cast[kind].format(c=name)} AS {name}" for name, kind in columns)
    return columns, f"SELECT {select} FROM read_csv('{path}', all_varchar = true, header = true)"


def seed_cloudgen_table(moto, path: Path, window) -> None:
    """The Glue table of the export in moto, and Athena's answer to the connector's query: the
    DuckDB rendering of that query over the same rows (moto runs no SQL)."""
    columns, select = athena_view(path)
    client = boto3.client("glue", endpoint_url=moto.url, region_name="us-east-1")
    try:
        try:
            client.delete_table(DatabaseName=DATABASE, Name=EKS_TABLE)
        except client.exceptions.EntityNotFoundException:
            pass
        client.create_table(DatabaseName=DATABASE, TableInput={
            "Name": EKS_TABLE, "TableType": "EXTERNAL_TABLE",
            "StorageDescriptor": {"Columns": [{"Name": n, "Type": t} for n, t in columns]}})
    finally:
        client.close()
    tree = agg.aggregate_query(agg.plan(columns), *window)
    with duckdb.connect() as con:
        prepare(con)
        con.execute(f"CREATE VIEW cur AS {select}")
        rows = con.execute(agg.render(tree, "duckdb", "cur")).fetchall()
    seed(moto, [e.alias_or_name for e in tree.expressions], [tuple(None if v is None else str(v) for v in r)
                                                             for r in rows])


def test_a_held_out_style_eks_case_through_athena_equals_its_local_export(moto, glue, proxy, eks_day,
                                                                          tmp_path):
    """Issue 18's bar on a generated case: the whole audit (telemetry, the profile, the GPU split and
    the options) gives the same audit.json whether its CUR 2.0 export is read as files (``cur``) or
    queried in place (``athena``), and both are the case's truth to the cent."""
    folder, truth = eks_day
    export = next((folder / "billing").rglob("*.csv.gz"))
    seed_cloudgen_table(moto, export, (datetime(2026, 9, 1, tzinfo=timezone.utc),
                                       datetime(2026, 9, 2, tzinfo=timezone.utc)))
    remote = tmp_path / "athena"
    shutil.copytree(folder, remote)
    toml = (remote / "case.toml").read_text()
    local = 'format = "cur"\npath = "billing/cur2/inference-prod/"'
    assert local in toml
    athena_source = "\n".join(f"{k} = {json.dumps(v)}" for k, v in
                              options(proxy.url, table=f"{DATABASE}.{EKS_TABLE}").items())
    (remote / "case.toml").write_text(toml.replace(local, f'format = "athena"\n{athena_source}'))
    shutil.rmtree(remote / "billing")
    local_doc, remote_doc = audit_document(folder), audit_document(remote)
    assert [s["format"] for s in remote_doc["sources"] if s["kind"] == "billing"] == ["athena"]
    assert comparable_text(remote_doc) == comparable_text(local_doc)
    result = compare(remote_doc, truth)
    assert result["ok"] and not result["parts"], result
    assert float(remote_doc["total"]) > 1000 and remote_doc["coverage"]["paid_gpu_hours"] == "480.00"


def test_the_eks_case_with_its_gpu_split_through_athena_too(moto, aws_env, eks_day, monkeypatch):
    """The same case with the GPU split's query sent through Athena as well (its Trino text; moto
    answers with what that text gives on DuckDB): audit.json unchanged, and still the truth."""
    folder, truth = eks_day
    local_doc = audit_document(folder)
    runs: list = []
    monkeypatch.setitem(split_sql.ENGINES, "athena", split_engine(moto, runs))
    monkeypatch.setenv("COSTAUDIT_SPLIT", "athena")
    split_doc = audit_document(folder)
    assert runs == [3]  # three GPU instances, each a run of identical hours
    assert split_doc == local_doc
    assert compare(split_doc, truth)["ok"]


def without_line_ids(document: dict) -> str:
    """audit.json without ``sources``; a line a note names (the Parquet file's row, or the Athena
    query's result row: ``<execution id>:<row>``) as <line>."""
    text = json.dumps({k: v for k, v in document.items() if k != "sources"}, sort_keys=True)
    return re.sub(r"[\w.-]+\.parquet:\d+|[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}:\d+", "<line>", text)


def comparable_text(document: dict) -> str:
    """audit.json without ``sources``; a line id (the file, or the query's result row) as <line>."""
    text = json.dumps({k: v for k, v in document.items() if k != "sources"}, sort_keys=True)
    return re.sub(r"[\w./=-]+\.csv\.gz:\d+(:unused)?|athena:[\w:.-]+", "<line>", text)
