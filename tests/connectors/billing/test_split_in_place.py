"""The GPU split's sums run on the engine that holds the bill (issue 18: ``split_in_place = true``).

A held-out-style GKE case whose detailed export is a BigQuery table (the emulator), and an EKS case
whose CUR 2.0 export is an Athena table (moto), each audited with ``split_in_place = true``: the split's
tables are loaded beside the bill through the connector's own client (a Parquet load job into a scratch
dataset; Parquet objects in S3 and Glue tables), its two queries run there (moto runs no SQL: the proxy
answers each scratch query with what DuckDB gives for its Trino text over the very objects the audit
wrote), and the scratch is removed. audit.json equals the audit of the local export apart from
``sources``, which names the engine and its queries; the truth holds to the cent.
"""
from __future__ import annotations

import json
import shutil
import sys

import boto3
import pytest

from audit.case import load_case
from connectors.errors import FatalSourceError
from schemas.errors import CostauditError
from tests.connectors.billing.test_athena_audit import comparable_text as athena_text
from tests.connectors.billing.test_athena_audit import eks_day, seed_cloudgen_table  # noqa: F401 (fixture)
from tests.connectors.billing.test_gcp_billing_audit import (  # noqa: F401 (fixture)
    CLOUDGEN_TABLE,
    comparable_text,
    gke_day,
    through_bigquery,
)
from tests.paths import ROOT
from tests.servers.athena import DATABASE, OUTPUT, options
from tests.servers.bigquery import DATASET, PROJECT, client_for, load_table
from tests.servers.gcp_export import bq_schema

sys.path.insert(0, str(ROOT / "benchmarks"))
from cloudgen_check import audit_document, compare  # noqa: E402

sys.path.remove(str(ROOT / "benchmarks"))

pytestmark = pytest.mark.services

HEAD = '[case]\nname = "x"\nwindow = ["2026-09-01T00:00:00Z", "2026-09-02T00:00:00Z"]\ncurrency = "USD"\n'
SEPT = ("2026-09-01T00:00:00+00:00", "2026-09-02T00:00:00+00:00")


def with_split_in_place(case_dir, extra: str = "") -> None:
    """The case's billing source asks for the split in its engine."""
    toml = (case_dir / "case.toml").read_text()
    marker = "[[billing]]\n"
    assert toml.count(marker) == 1
    head, _, rest = toml.partition(marker)
    (case_dir / "case.toml").write_text(f"{head}{marker}split_in_place = true\n{extra}{rest}")


def billing_source(document: dict) -> dict:
    [source] = [s for s in document["sources"] if s["kind"] == "billing"]
    return source


# ---- BigQuery -----------------------------------------------------------------------------------

EXPORT = "billing/gcp_billing_export_resource_v1.jsonl"


def audited_in_bigquery(port: int, folder, target, extra: str, scratch: str) -> tuple[dict, list]:
    """The audit.json of the case with its export a table in the emulator and ``split_in_place`` (plus
    ``extra`` options), and the tables left in dataset ``scratch`` after it."""
    client = client_for(port)
    try:
        client.create_dataset(f"{PROJECT}.{DATASET}", exists_ok=True)
        load_table(client, CLOUDGEN_TABLE, [json.loads(line) for line in (folder / EXPORT).read_text().splitlines()],
                   bq_schema(full=True))
        remote = through_bigquery(folder, target, port)
        with_split_in_place(remote, extra)
        doc = audit_document(remote)
        return doc, list(client.list_tables(f"{PROJECT}.{scratch}"))
    finally:
        client.close()


def test_the_gke_case_split_in_bigquery_equals_its_local_audit(emulator, gke_day, tmp_path):  # noqa: F811
    folder, truth = gke_day
    remote_doc, left = audited_in_bigquery(emulator, folder, tmp_path / "bigquery", "", "costaudit_scratch")
    local_doc = audit_document(folder)
    assert comparable_text(remote_doc, CLOUDGEN_TABLE) == comparable_text(local_doc, str(folder / EXPORT), EXPORT)
    split = billing_source(remote_doc)["split_in_place"]
    assert split["engine"] == "BigQuery" and len(split["queries"]) == 2
    assert "ran in BigQuery beside" in split["note"] and CLOUDGEN_TABLE in split["note"]
    assert left == []  # the scratch tables are gone
    assert compare(remote_doc, truth)["ok"] and remote_doc["coverage"]["paid_gpu_hours"] == "480.00"


def test_a_named_scratch_dataset_is_used_and_emptied(emulator, gke_day, tmp_path):  # noqa: F811
    folder, _ = gke_day
    doc, left = audited_in_bigquery(emulator, folder, tmp_path / "bigquery", 'scratch_dataset = "audit_work"\n',
                                    "audit_work")  # list_tables fails on a dataset that is not there
    assert left == [] and len(billing_source(doc)["split_in_place"]["queries"]) == 2


# ---- Athena -------------------------------------------------------------------------------------

def athena_case(moto, folder, target, url: str):
    """A copy of the case whose CUR is the Glue table moto answers for, with ``split_in_place``."""
    from datetime import datetime

    seed_cloudgen_table(moto, next((folder / "billing").rglob("*.csv.gz")),
                        tuple(datetime.fromisoformat(t) for t in SEPT))
    shutil.copytree(folder, target)
    toml = (target / "case.toml").read_text()
    local = 'format = "cur"\npath = "billing/cur2/inference-prod/"'
    assert local in toml
    source = "\n".join(f"{k} = {json.dumps(v)}" for k, v in options(url, table=f"{DATABASE}.cloudgen_eks").items())
    (target / "case.toml").write_text(toml.replace(local, f'format = "athena"\n{source}'))
    shutil.rmtree(target / "billing")
    with_split_in_place(target)
    return target


def test_the_eks_case_split_in_athena_equals_its_local_audit(moto, glue, scratch_proxy, eks_day, tmp_path):  # noqa: F811
    folder, truth = eks_day
    remote = athena_case(moto, folder, tmp_path / "athena", scratch_proxy.url)
    local_doc, remote_doc = audit_document(folder), audit_document(remote)
    assert athena_text(remote_doc) == athena_text(local_doc)
    heard, tables = scratch_proxy.hear.heard, scratch_proxy.hear.tables
    assert len(heard) == 2 and {t for _, t in tables} and all(d == DATABASE for d, _ in tables)
    split = billing_source(remote_doc)["split_in_place"]
    assert split["engine"] == "Athena" and len(split["queries"]) == 2
    glue_client = boto3.client("glue", endpoint_url=moto.url, region_name="us-east-1")
    s3 = boto3.client("s3", endpoint_url=moto.url, region_name="us-east-1")
    try:
        names = {t["Name"] for t in glue_client.get_tables(DatabaseName=DATABASE)["TableList"]}
        bucket = OUTPUT[len("s3://"):].partition("/")[0]
        objects = s3.list_objects_v2(Bucket=bucket, Prefix="costaudit/costaudit-scratch/").get("Contents", [])
    finally:
        glue_client.close()
        s3.close()
    assert not {t for _, t in tables} & names  # the Glue tables are gone
    assert objects == []  # and their objects
    assert compare(remote_doc, truth)["ok"] and remote_doc["coverage"]["paid_gpu_hours"] == "480.00"


def test_a_refused_glue_table_names_what_the_scratch_needs(moto, glue, scratch_proxy, eks_day, tmp_path):  # noqa: F811
    remote = athena_case(moto, eks_day[0], tmp_path / "athena", scratch_proxy.url)
    scratch_proxy.fail("CreateTable", "denied")
    with pytest.raises(FatalSourceError) as caught:
        audit_document(remote)
    text = str(caught.value)
    assert "access denied" in text and "glue:CreateTable, glue:GetTable and glue:DeleteTable on the scratch database" in text
    assert "AKIA" not in text and "secret" not in text.lower()


# ---- the case file --------------------------------------------------------------------------------

@pytest.mark.parametrize("source, message", [
    ('format = "focus"\npath = "b.csv"\nsplit_in_place = true',
     'split_in_place: only a billing table read where it lives (format "athena", or "gcp_billing" with a table) '
     'runs the GPU split in its engine; this is a focus file'),
    ('format = "athena"\ntable = "db.t"\nsplit_in_place = "yes"', "split_in_place: expected true or false, got 'yes'"),
])
def test_split_in_place_where_it_cannot_run_is_named(tmp_path, source, message):
    (tmp_path / "b.csv").write_text("x\n")
    (tmp_path / "case.toml").write_text(f'{HEAD}[[billing]]\n{source}\n')
    with pytest.raises(CostauditError) as caught:
        load_case(tmp_path)
    assert message in str(caught.value)


def test_two_sources_asking_for_the_split_are_refused(tmp_path):
    table = '[[billing]]\nformat = "athena"\ntable = "db.{0}"\nname = "{0}"\nsplit_in_place = true\n'
    (tmp_path / "case.toml").write_text(HEAD + table.format("a") + table.format("b"))
    with pytest.raises(CostauditError) as caught:
        load_case(tmp_path)
    assert "split_in_place = true on 2 billing sources ('a', 'b'): the GPU split runs in one engine" in str(caught.value)
