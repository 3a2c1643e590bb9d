"""A local GCP billing export whose nested field holds another JSON type: labels written as their
``json.dumps`` string, sku as a string, credits as one object rather than a list.

Before: exit 1 with "unreadable export: … JSON transform error … in line 100: Expected ARRAY, but got
VARCHAR" for labels on line 200 ("line 3" for line 5), naming no field. Now the file, its own line,
the field and what it should hold (connectors/billing/gcp_files.py ``nested_errors``).
"""
from __future__ import annotations

import json

import pytest

from connectors.bounds import shown
from tests.hostile.harness import assert_named_error, costaudit
from tests.servers.gcp_export import export_rows, write_ndjson, write_parquet

LABELS = '[{"key": "team", "value": "ml"}, {"key": "goog-k8s-cluster-name", "value": "inference"}]'
MACHINE = ('[{"key": "compute.googleapis.com/machine_spec", "value": "a2-highgpu-8g"}, '
           '{"key": "compute.googleapis.com/cores", "value": "96"}]')
CREDIT = ('{"name":"Committed use discount","amount":-0.95,"full_name":"Committed use discount",'
          '"id":"id-Committed use discount","type":"COMMITTED_USAGE_DISCOUNT"}')


@pytest.mark.parametrize(("line", "field", "edit", "said", "expected"), [
    (200, "labels", lambda r: json.dumps(r["labels"]), f"a JSON string, not an array: {shown(LABELS)}",
     "a JSON array of {key, value} objects"),
    (5, "system_labels", lambda r: json.dumps(r["system_labels"]), f"a JSON string, not an array: {shown(MACHINE)}",
     "a JSON array of {key, value} objects"),
    (5, "sku", lambda r: r["sku"]["description"], "a JSON string, not an object: 'A2 Instance Core running in Americas'",
     "a JSON object {id, description}"),
    (5, "credits", lambda r: r["credits"][0], f"a JSON object, not an array: {shown(CREDIT)}",
     "a JSON array of {name, amount, full_name, id, type} objects"),
    (5, "labels", lambda r: ["team=ml"], """an array holding a JSON string, not objects: '["team=ml"]'""",
     "a JSON array of {key, value} objects"),
])
def test_a_nested_field_of_another_json_type_names_its_line_and_field(tmp_path, line, field, edit, said, expected):
    path = write_ndjson(export_rows(), tmp_path / "gcp_billing_export_resource_v1.jsonl")
    lines = path.read_text().splitlines()
    record = json.loads(lines[line - 1])
    record[field] = edit(record)
    lines[line - 1] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    outcome = costaudit("billing", "--format", "gcp_billing", path, cwd=tmp_path)
    assert_named_error(outcome, path)
    assert outcome.stderr.strip().splitlines()[-1] == (
        f"costaudit: error: {path}: row {line}, column {field}: {said} (expected {expected})")
    assert outcome.stdout == ""


@pytest.mark.parametrize(("field", "amount", "shown_as"), [
    ("credits.amount", float("nan"), "'NaN'"),
    ("credits.amount", float("inf"), "'Infinity'"),
    ("credits.amount", "lots", "'lots'"),
    ("usage.amount", float("nan"), "'NaN'"),
    ("usage.amount_in_pricing_units", "-Infinity", "'-Infinity'"),
])
def test_an_unreadable_nested_amount_names_its_line_and_field(tmp_path, field, amount, shown_as):
    """A NaN in ``credits[].amount`` had no row nor field: "unreadable export: Conversion Error: Could
    not convert string "NaN" to DECIMAL(38,9)". Now as for ``cost``: the line and the nested field."""
    path = write_ndjson(export_rows(), tmp_path / "gcp_billing_export_resource_v1.jsonl")
    lines = path.read_text().splitlines()
    record = json.loads(lines[4])
    parent, key = field.split(".")
    if parent == "credits":
        record["credits"] = [{"name": "x", "amount": amount, "type": "PROMOTION"}]
    else:
        record[parent][key] = amount
    lines[4] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    outcome = costaudit("billing", "--format", "gcp_billing", path, cwd=tmp_path)
    assert_named_error(outcome, path)
    assert outcome.stderr.strip().splitlines()[-1] == (
        f"costaudit: error: {path}: row 5, column {field}: unparseable number {shown_as} (expected a decimal number)")


@pytest.mark.parametrize(("field", "value", "shown_as"), [
    ("credits.amount", float("nan"), "'nan'"),
    ("usage.amount", float("inf"), "'inf'"),
])
def test_a_nan_amount_in_a_parquet_export_names_its_row_and_field(tmp_path, field, value, shown_as):
    """The same in a Parquet export, whose amounts are FLOAT64 (rows counted from 1)."""
    rows = export_rows()
    record = rows[4]
    parent, key = field.split(".")
    if parent == "credits":
        record["credits"] = [{"name": "x", "amount": value, "full_name": "x", "id": "x", "type": "PROMOTION"}]
    else:
        record[parent][key] = value
    path = write_parquet(rows, tmp_path / "gcp_billing_export_resource_v1.parquet")
    outcome = costaudit("billing", "--format", "gcp_billing", path, cwd=tmp_path)
    assert_named_error(outcome, path)
    assert outcome.stderr.strip().splitlines()[-1] == (
        f"costaudit: error: {path}: row 5, column {field}: unparseable number {shown_as} (expected a decimal number)")
