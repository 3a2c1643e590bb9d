"""FOCUS 1.3 Cost and Usage and Contract Commitment files through the FOCUS connector and the audit.

Two kinds of input: files focus-data-toolkit generates (seeded; AWS, GCP and Azure, FOCUS 1.2 and
1.3), and the project's own fixture ``tests/data/focus13`` (a GPU node's hours split by the provider
onto two workloads, a NAT gateway that only its FOCUS subcategory names, a Contract Commitment
dataset). What is checked: split rows counted once and matched by their AllocatedTags; the 1.3
provider columns, with 1.0–1.2 files unchanged; ContractApplied and the Contract Commitment terms;
METHOD §2's ServiceCategory / ServiceSubcategory fallback.
"""
from __future__ import annotations

import csv
import json
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from audit.adjust import in_scope
from audit.audit_json import to_dict
from audit.case import Rule, load_case
from audit.classify import classify
from audit.errors import ConfigError
from audit.lines import line_resources, line_tags
from audit.pipeline import run_audit
from connectors.base import ReadContext, SourceSpec
from connectors.billing.focus import FocusConnector
from connectors.errors import InputError, InputErrors
from tests.builders import billing_case, lines_frame
from tests.builders import line as billing_line
from tests.connectors.billing.focus_toolkit import generate
from tests.paths import TEST_DATA

FIXTURE = TEST_DATA / "focus13"
ALWAYS = (datetime(2000, 1, 1, tzinfo=timezone.utc), datetime(2100, 1, 1, tzinfo=timezone.utc))
PROVIDERS = ("aws", "gcp", "azure")


def read(path: Path, **options):
    """The source frame of one FOCUS file read over all time."""
    spec = SourceSpec(name="bill", kind="billing", format="focus", path=path, options=options)
    return FocusConnector(spec, ReadContext(start=ALWAYS[0], end=ALWAYS[1], currency="USD")).read()


def file_rows(path: Path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def effective_tags(row: dict) -> dict:
    """What a line's tags are, computed from the file independently of audit.lines."""
    tags = json.loads(row["Tags"]) if row.get("Tags") else {}
    tags.update(json.loads(row["AllocatedTags"]) if row.get("AllocatedTags") else {})
    return tags


@pytest.fixture(scope="module")
def generated(tmp_path_factory) -> dict[tuple[str, str], dict[str, Path]]:
    """The toolkit's FOCUS 1.2 and 1.3 files for each provider (300 rows, seed 1303)."""
    root = tmp_path_factory.mktemp("focus-toolkit")
    return {(p, v): generate(p, v, root / f"{p}-{v}") for p in PROVIDERS for v in ("1.2", "1.3")}


# --- generated FOCUS 1.3 files ----------------------------------------------------------------

@pytest.mark.parametrize("provider", PROVIDERS)
def test_generated_13_split_rows_are_counted_once_with_their_allocation(generated, provider):
    path = generated[(provider, "1.3")]["cost_and_usage"]
    rows, lines = file_rows(path), read(path).tables["lines"]
    split = [r for r in rows if r["AllocatedMethodId"]]
    assert split, "the generator writes split cost allocation rows"
    assert int(lines["line_count"].sum()) == len(rows)
    assert sum(lines["effective_cost"], Decimal(0)) == sum((Decimal(r["EffectiveCost"]) for r in rows), Decimal(0))
    allocated = lines[lines["allocated_method_id"] != ""]
    assert int(allocated["line_count"].sum()) == len(split)
    assert sum(allocated["billed_cost"], Decimal(0)) == sum((Decimal(r["BilledCost"]) for r in split), Decimal(0))
    assert set(allocated["allocated_resource_id"]) == {r["AllocatedResourceId"] for r in split}
    assert set(allocated["allocated_resource_name"]) == {r["AllocatedResourceName"] for r in split}
    assert {json.loads(t)["workload"] for t in allocated["allocated_tags"]} == \
        {json.loads(r["AllocatedTags"])["workload"] for r in split}
    assert set(lines.loc[lines["allocated_method_id"] == "", "allocated_tags"]) == {"{}"}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_generated_13_scope_tag_matches_split_rows_by_allocated_tags(generated, provider):
    path = generated[(provider, "1.3")]["cost_and_usage"]
    rows, lines = file_rows(path), read(path).tables["lines"]
    workload = sorted({json.loads(r["AllocatedTags"])["workload"] for r in rows if r["AllocatedTags"]})[0]
    mask, reasons = in_scope(lines, {"tags": {"workload": workload}})
    kept = lines[mask & ~lines["charge_category"].isin(["Tax", "Credit", "Refund", "Adjustment"])]
    wanted = [r for r in rows if str(effective_tags(r).get("workload", "")) == workload
              and r["ChargeCategory"] not in ("Tax", "Credit", "Refund", "Adjustment")]
    assert wanted and all(r["AllocatedMethodId"] for r in wanted)  # only split rows carry the workload tag
    assert int(kept["line_count"].sum()) == len(wanted)
    assert sum(kept["effective_cost"], Decimal(0)) == sum((Decimal(r["EffectiveCost"]) for r in wanted), Decimal(0))
    others = sorted({str(effective_tags(r).get("workload", "")) for r in rows} - {workload})
    named = sorted(f"workload={v}" if v else "no workload tag" for v in others)
    assert reasons == [f"{', '.join(named)} not in [scope].tags (workload={workload})"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_generated_13_provider_columns_and_contract_applied(generated, provider):
    path = generated[(provider, "1.3")]["cost_and_usage"]
    rows, lines = file_rows(path), read(path).tables["lines"]
    assert set(lines["provider"]) == {r["ServiceProviderName"] for r in rows}
    assert set(lines["host_provider"]) == {r["HostProviderName"] for r in rows}
    assert set(lines["service_subcategory"]) == {r["ServiceSubcategory"] for r in rows}
    applied = {e["ContractCommitmentId"] for r in rows if r["ContractApplied"]
               for e in json.loads(r["ContractApplied"])["Elements"]}
    assert {i for text in lines["contract_applied"] for i in json.loads(text)} == applied


@pytest.mark.parametrize("provider", PROVIDERS)
def test_generated_13_contract_commitment_dataset(generated, provider):
    files = generated[(provider, "1.3")]
    frame = read(files["cost_and_usage"], contract_commitment=str(files["contract_commitment"]))
    commitments, rows = frame.tables["commitments"], file_rows(files["contract_commitment"])
    assert list(commitments["commitment_id"]) == [r["ContractCommitmentId"] for r in rows]
    assert set(commitments["category"]) <= {"Spend", "Usage"}
    assert (commitments["end"] > commitments["start"]).all()
    assert list(commitments["cost"]) == [Decimal(r["ContractCommitmentCost"]) if r["ContractCommitmentCost"] else None
                                         for r in rows]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_generated_12_files_load_as_before(generated, provider):
    path = generated[(provider, "1.2")]["cost_and_usage"]
    rows, lines = file_rows(path), read(path).tables["lines"]
    assert "ServiceProviderName" not in rows[0]
    assert set(lines["provider"]) == {r["ProviderName"] for r in rows}
    assert set(lines["host_provider"]) == {""}
    assert set(lines["allocated_method_id"]) == {""} and set(lines["contract_applied"]) == {"[]"}
    assert int(lines["line_count"].sum()) == len(rows)


# --- the project's FOCUS 1.3 fixture ----------------------------------------------------------

def test_fixture_lines_tags_and_resources():
    lines = read(FIXTURE / "cost_and_usage.csv", grain="line").tables["lines"]
    split = lines[lines["allocated_method_id"] != ""]
    assert len(split) == 6 and set(split["allocated_resource_name"]) == {"ranker-7d9f", "search-7d9f"}
    first = split.iloc[0]
    assert line_tags(first["tags"], first["allocated_tags"]) == {"team": "ml", "application": "ranker",
                                                                 "eks:namespace": "search"}
    assert line_resources(first) == ("i-0gpu13", "arn:aws:eks:us-east-1:111122223333:pod/search/ranker-7d9f")
    assert set(split["contract_applied"]) == {'["CC-EDP-SPEND-2026"]'}


def test_allocated_tags_win_over_the_shared_resource_tags():
    assert line_tags('{"team":"ml","cost":"a"}', '{"cost":"b"}') == {"team": "ml", "cost": "b"}
    assert line_tags("{}", None) == {} and line_tags('{"a":"1"}') == {"a": "1"}


@pytest.fixture(scope="module")
def fixture_audit(tmp_path_factory) -> dict:
    """The fixture audited with the scope application = ranker, commitments given."""
    folder = billing_case(tmp_path_factory.mktemp("case13"), "focus13", ("2026-09-01", "2026-09-02"), "effective",
                          format="focus", path=FIXTURE / "cost_and_usage.csv",
                          contract_commitment=FIXTURE / "contract_commitment.csv")
    with open(folder / "case.toml", "a") as handle:
        handle.write('\n[scope]\ntags = { application = "ranker" }\n')
    return to_dict(run_audit(load_case(folder)))


def test_fixture_audit_scope_follows_allocated_tags_and_conserves(fixture_audit):
    rows = file_rows(FIXTURE / "cost_and_usage.csv")
    ranker = [r for r in rows if effective_tags(r).get("application") == "ranker"]
    assert len(ranker) == 4  # three split hours and the NAT gateway (its own Tags)
    total = sum((Decimal(r["EffectiveCost"]) for r in ranker), Decimal(0))
    assert Decimal(fixture_audit["total"]) == total.quantize(Decimal("0.01"))
    outside = sum((Decimal(r["EffectiveCost"]) for r in rows if r not in ranker), Decimal(0))
    assert Decimal(fixture_audit["outside_scope"]["amount"]) == outside.quantize(Decimal("0.01"))
    buckets = sum(Decimal(b["amount"]) for b in fixture_audit["buckets"].values())
    assert buckets == Decimal(fixture_audit["total"])


def test_fixture_audit_classifies_the_nat_gateway_by_its_subcategory(fixture_audit):
    classes = {c["class"]: c for c in fixture_audit["classes"]}
    assert Decimal(classes["serving_network"]["gross"]) == Decimal("1.08")
    reasons = [p.get("reason") or "" for b in fixture_audit["buckets"].values() for p in b.get("parts", [])]
    assert any("FOCUS ServiceCategory / ServiceSubcategory Networking / Network Connectivity" in r for r in reasons)


def test_fixture_audit_lists_the_commitments_with_their_ends(fixture_audit):
    found = {c["id"]: c for c in fixture_audit["commitments"]}
    assert list(found) == ["CC-EDP-SPEND-2026", "arn:aws:ec2:us-east-1:111122223333:reserved-instances/ri-13"]
    spend = found["CC-EDP-SPEND-2026"]
    assert (spend["type"], spend["category"], spend["end"]) == ("Minimum Spend", "Spend", "2027-01-01T00:00:00Z")
    assert spend["quantity"] is None and spend["cost"] == "1200000.00" and spend["unit"] is None
    assert spend["term_months"] == "11.99"  # 365 days of 30.4375
    assert Decimal(spend["months_after_window"]) == (Decimal(121 * 86400) / (Decimal("30.4375") * 86400)).quantize(
        Decimal("0.01"))
    ri = found["arn:aws:ec2:us-east-1:111122223333:reserved-instances/ri-13"]
    assert (ri["unit"], ri["quantity"], ri["cost"], ri["contract_end"]) == ("Hours", "26280", None, "2028-01-01T00:00:00Z")


# --- METHOD §2: the ServiceCategory / ServiceSubcategory fallback -------------------------------

def classified(rules=(), **columns) -> pd.Series:
    frame = lines_frame([billing_line(1, **columns)])
    return classify(frame, rules, set(), set()).iloc[0]


def test_category_fallback_names_a_line_no_rule_names():
    out = classified(service_name="Acme Egress Gateway", service_category="Networking",
                     service_subcategory="Network Connectivity", charge_description="gateway hours")
    assert out["resource_class"] == "serving_network"
    assert out["rule_reason"].startswith("no rule named the line; FOCUS ServiceCategory / ServiceSubcategory "
                                         "Networking / Network Connectivity: ")


def test_category_fallback_is_case_insensitive_and_covers_observability():
    out = classified(service_category="management and governance", service_subcategory="observability")
    assert out["resource_class"] == "observability"


def test_rules_come_before_the_category_fallback():
    shipped = classified(service_name="Elastic Load Balancing", service_category="Networking",
                         service_subcategory="Network Connectivity")
    assert shipped["rule_reason"] == "shipped rule: load balancer on the request path"
    rule = Rule({"ServiceSubcategory": "Network Connectivity"}, "egress", "all our connectivity leaves the cloud")
    case = classified((rule,), service_category="Networking", service_subcategory="Network Connectivity")
    assert (case["resource_class"], case["rule_reason"]) == ("egress", "case rule: all our connectivity leaves the cloud")


@pytest.mark.parametrize("category, subcategory", [("Networking", "Content Delivery"), ("Compute", "Containers"),
                                                   ("Networking", ""), ("Storage", "Object Storage")])
def test_ambiguous_categories_stay_unmatched(category, subcategory):
    out = classified(service_category=category, service_subcategory=subcategory)
    assert (out["resource_class"], out["rule_reason"]) == ("unmatched", "no rule matched")


def test_rules_match_the_13_columns():
    rule = Rule({"AllocatedResourceName": "re:^ranker-", "HostProviderName": "AWS"}, "serving_compute", "ranker pods")
    out = classified((rule,), allocated_resource_name="ranker-7d9f", host_provider="AWS")
    assert out["resource_class"] == "serving_compute"


# --- bad 1.3 input: one clear error each ------------------------------------------------------

def write(path: Path, header: list[str], *rows: list[str]) -> Path:
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path


BASE = ["ChargePeriodStart", "ChargePeriodEnd", "ChargeCategory", "BilledCost", "EffectiveCost"]
ONE = ["2026-09-01T00:00:00Z", "2026-09-01T01:00:00Z", "Usage", "1", "1"]


@pytest.mark.parametrize("column, value", [("ContractApplied", '[{"ContractCommitmentId":"a"}]'),
                                           ("ContractApplied", "not json"),
                                           ("AllocatedMethodDetails", '{"AllocatedRatio":0.5}')])
def test_contract_applied_and_method_details_must_be_element_objects(tmp_path, column, value):
    path = write(tmp_path / "bad.csv", BASE + [column], ONE + [value])
    with pytest.raises(InputError) as caught:
        read(path)
    assert (caught.value.row, caught.value.column) == (1, column)
    assert "Elements" in caught.value.expected


def test_unparseable_allocated_tags_name_the_column(tmp_path):
    path = write(tmp_path / "bad.csv", BASE + ["AllocatedMethodId", "AllocatedTags"], ONE + ["m", "{oops"])
    with pytest.raises(InputError) as caught:
        read(path)
    assert (caught.value.row, caught.value.column) == (1, "AllocatedTags")


CC = ["ContractCommitmentId", "ContractCommitmentType", "ContractCommitmentCategory",
      "ContractCommitmentPeriodStart", "ContractCommitmentPeriodEnd", "ContractCommitmentCost"]


@pytest.mark.parametrize("row, column, words", [
    (["a", "Savings Plan", "Spending", "2026-01-01", "2027-01-01", "1"], "ContractCommitmentCategory", "Spend or Usage"),
    (["a", "Savings Plan", "Spend", "2026-13-01", "2027-01-01", "1"], "ContractCommitmentPeriodStart", "ISO 8601"),
    (["a", "Savings Plan", "Spend", "2026-01-01", "2027-01-01", "1.2.3"], "ContractCommitmentCost", "decimal"),
    (["", "Savings Plan", "Spend", "2026-01-01", "2027-01-01", "1"], "ContractCommitmentId", "a value"),
    (["a", "Savings Plan", "Spend", "2027-01-01", "2026-01-01", "1"], "ContractCommitmentPeriodEnd", "an end at"),
])
def test_bad_contract_commitment_cells_are_named(tmp_path, row, column, words):
    lines = write(tmp_path / "lines.csv", BASE, ONE)
    write(tmp_path / "cc.csv", CC, row)
    with pytest.raises((InputError, InputErrors)) as caught:
        read(lines, contract_commitment="cc.csv")
    errors = caught.value.errors if isinstance(caught.value, InputErrors) else [caught.value]
    assert any(e.column == column and e.row == 1 and words in e.expected and Path(e.path).name == "cc.csv"
               for e in errors)


def test_contract_commitment_missing_columns_and_file(tmp_path):
    lines = write(tmp_path / "lines.csv", BASE, ONE)
    write(tmp_path / "cc.csv", CC[:2], ["a", "Savings Plan"])
    with pytest.raises(InputError, match="missing Contract Commitment column.*ContractCommitmentCategory"):
        read(lines, contract_commitment="cc.csv")
    with pytest.raises(InputError, match="file not found"):
        read(lines, contract_commitment="absent.csv")


def test_contract_commitment_is_an_option_of_focus_sources_only(tmp_path):
    folder = billing_case(tmp_path / "case", "c", ("2026-09-01", "2026-09-02"), "effective", format="cur",
                          path=tmp_path / "cur.csv", contract_commitment="cc.csv")
    with pytest.raises(ConfigError, match="contract_commitment: read by a 'focus' source"):
        load_case(folder)
