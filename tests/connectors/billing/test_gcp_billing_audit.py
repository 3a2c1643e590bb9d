"""The whole audit of a month read from BigQuery equals the audit of the same export read locally.

Issue 18's bar for the attribution where the bill lives: the same cents whichever engine ran the
query. The BigQuery path is the connector's own (google-cloud-bigquery against the session's
bqemulator on 127.0.0.1) over the synthetic May 2024 detailed export of
``tests/servers/gcp_export.py`` (FLOAT64 money, credits arrays, GPU SKUs, machines billed in parts,
tax, adjustments); the local path is the same rows as ``bq extract`` NDJSON and as Parquet, read by
DuckDB. Both documents are audit.json as ``costaudit run`` writes it, the sources named alike;
only ``sources`` may differ, and what names the table or the file read: its name where a reason
cites it, and the line ids, replaced by their position among the lines before the comparison.
"""
from __future__ import annotations

import json
import re
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from audit import split_sql
from audit.audit_json import to_dict
from audit.collected import Collected
from audit.pipeline import audit_collected
from benchmarks.cloudgen.generate import generate
from tests.builders import make_case
from tests.connectors.billing.test_gcp_billing import (  # noqa: F401 (fixtures)
    DETAILED,
    connector,
    from_bigquery,
    loaded,
    local_files,
    rows,
)
from tests.paths import ROOT
from tests.servers.bigquery import DATASET, PROJECT, client_for, load_table, split_engine
from tests.servers.gcp_export import JUNE, MAY, bq_schema

sys.path.insert(0, str(ROOT / "benchmarks"))
from cloudgen_check import audit_document, compare  # noqa: E402

sys.path.remove(str(ROOT / "benchmarks"))

pytestmark = pytest.mark.services


def may_case():
    """May 2024, every project in scope, no declared service."""
    return replace(make_case(accounts=()), name="gcp-may", start=MAY, end=JUNE, services={})


def document(frame, read: str, shown: str | None = None) -> str:
    """audit.json without ``sources``, as text, the name of what was ``read`` (a table, a file) and
    the name the audit shows for it (``shown``: a file outside the case folder by its name)
    replaced, and each line id by its position."""
    doc = to_dict(audit_collected(may_case(), Collected((frame,))))
    text = json.dumps({k: v for k, v in doc.items() if k != "sources"}, sort_keys=True)
    assert (shown or read) in text  # the bridge says on which source ListCost and ContractedCost are missing
    text = text.replace(read, "<source>").replace(shown or read, "<source>")
    ids = list(frame.tables["lines"]["line_id"])
    for position, line_id in sorted(enumerate(ids), key=lambda p: -len(p[1])):
        text = text.replace(line_id, f"<line {position}>")
    return text


@pytest.mark.parametrize("fmt", ["json", "parquet"])
def test_the_audit_from_bigquery_equals_the_audit_of_the_local_export(from_bigquery, local_files, fmt):  # noqa: F811
    _, remote = from_bigquery
    local = connector(path=local_files[fmt]).read()
    assert remote.spec.name == local.spec.name
    through_bigquery = document(remote, DETAILED)
    assert through_bigquery == document(local, str(local_files[fmt]), local_files[fmt].name)
    # not an empty agreement: the month's money, GPU lines among it
    doc = json.loads(through_bigquery)
    assert doc["invoice_total"] == doc["total"] and float(doc["total"]) > 1000
    assert doc["coverage"]["paid_gpu_hours"] not in (None, "0.00")


# ---- a held-out-style case: cloudgen's GKE day in the detailed export, with telemetry and a profile ----

CLOUDGEN_TABLE = f"{PROJECT}.{DATASET}.gcp_billing_export_resource_v1_01A2B3_C4D5E6_F7A8B9"


@pytest.fixture(scope="module")
def gke_day(tmp_path_factory):
    """cloudgen's GKE case (seed 5) written with the GCP detailed export as its billing file."""
    folder = tmp_path_factory.mktemp("gke-native") / "case"
    return folder, generate("gke", 5, folder, billing="native")


def through_bigquery(folder: Path, target: Path, port: int) -> Path:
    """A copy of the case whose billing source is the export table in the emulator."""
    shutil.copytree(folder, target)
    toml = (target / "case.toml").read_text()
    local = 'path = "billing/gcp_billing_export_resource_v1.jsonl"'
    assert local in toml
    (target / "case.toml").write_text(toml.replace(local, f'table = "{CLOUDGEN_TABLE}"\nproject = "{PROJECT}"\n'
                                                          f'api_endpoint = "http://127.0.0.1:{port}"'))
    (target / "billing" / "gcp_billing_export_resource_v1.jsonl").unlink()
    return target


def local_and_bigquery(port: int, folder: Path, records: list[dict], target: Path) -> tuple[dict, dict]:
    """The audit.json of the case folder, and of its copy at ``target`` whose export is ``records``
    loaded into the emulator's CLOUDGEN_TABLE."""
    client = client_for(port)
    try:
        client.create_dataset(f"{PROJECT}.{DATASET}", exists_ok=True)
        load_table(client, CLOUDGEN_TABLE, records, bq_schema(full=True))
    finally:
        client.close()
    remote = through_bigquery(folder, target, port)
    return audit_document(folder), audit_document(remote)


def comparable_text(document: dict, *read: str) -> str:
    """audit.json without ``sources``, the names of what was read (and the row numbers a line id
    appends to it; a file by its path and by its path in the case folder, as the bridge shows it)
    replaced."""
    text = json.dumps({k: v for k, v in document.items() if k != "sources"}, sort_keys=True)
    for name in read:
        text = re.sub(re.escape(name) + r"(:\d+)?", "<source>", text)
    return text


def test_a_held_out_style_gke_case_through_bigquery_equals_its_local_export(emulator, gke_day, tmp_path):
    """Issue 18's bar on a generated case: the whole audit (telemetry, the profile, the GPU split and
    the options) gives the same audit.json whether its detailed export is a local NDJSON file or a
    BigQuery table, and both are the case's truth to the cent."""
    folder, truth = gke_day
    export = folder / "billing" / "gcp_billing_export_resource_v1.jsonl"
    records = [json.loads(line) for line in export.read_text().splitlines()]
    local_doc, remote_doc = local_and_bigquery(emulator, folder, records, tmp_path / "bigquery")
    assert CLOUDGEN_TABLE in json.dumps(remote_doc["sources"]) and str(export) not in json.dumps(remote_doc["sources"])
    assert comparable_text(remote_doc, CLOUDGEN_TABLE) == comparable_text(
        local_doc, str(export), "billing/gcp_billing_export_resource_v1.jsonl")
    result = compare(remote_doc, truth)
    assert result["ok"] and not result["parts"], result
    assert remote_doc["coverage"]["paid_gpu_hours"] == "480.00" and float(remote_doc["total"]) > 1000


def test_the_gke_case_with_its_gpu_split_on_bigquery_too(emulator, gke_day, tmp_path, monkeypatch):
    """The same case with the GPU split's query run on the emulator as well (audit.split_sql, the
    prepared tables loaded there): audit.json unchanged, sources and all, and still the truth."""
    folder, truth = gke_day
    client = client_for(emulator)
    runs: list = []
    try:
        local_doc = audit_document(folder)
        monkeypatch.setitem(split_sql.ENGINES, "bigquery", split_engine(client, runs))
        monkeypatch.setenv("COSTAUDIT_SPLIT", "bigquery")
        split_doc = audit_document(folder)
    finally:
        client.close()
    assert runs == [18]  # the GPU machines' parts (GPU, cores, RAM), each a run of identical hours
    assert split_doc == local_doc
    assert compare(split_doc, truth)["ok"]
