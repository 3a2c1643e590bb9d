"""A ``services`` or ``tags`` scope keeps tax and credits with the charges they apply to (METHOD §1–§2),
on the real exports in shared/data; what it cannot place it keeps by account, and says so.

Figures recomputed from the raw files (pandas, Decimal): the anonymised CUR's S3 usage is
1.37056536 with its own tax 0.07, and the KMS tax 0.01 taxes KMS; the FOCUS sample's EC2 usage is
18.65539305 with the EC2 credit −2.6137, and two Oracle COMPUTE adjustments (0.192 + 0.080) name
Oracle instances. Before, every tax and adjustment line was kept by its account alone: S3 came to
1.45 (both taxes) and EC2 to 16.31 (the Oracle adjustments in it)."""
from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from audit.audit_json import to_dict
from audit.case import load_case
from audit.pipeline import run_audit
from tests.builders import billing_case
from tests.paths import DATA

CUR = DATA / "billing" / "focus_converters" / "aws_cur1_anonymized_2023-11.csv"
FOCUS = DATA / "billing" / "focus_sample_data" / "focus_sample_1000.csv"


def audit(folder: Path, scope: str, **source) -> dict:
    billing_case(folder, "scoped", source.pop("window"), "billed", **source)
    case = folder / "case.toml"
    case.write_text(case.read_text().replace("[[billing]]", f"[scope]\n{scope}\n\n[[billing]]", 1))
    return to_dict(run_audit(load_case(folder)))


def test_a_services_scope_leaves_out_the_tax_of_another_service(tmp_path):
    doc = audit(tmp_path, 'services = ["Amazon Simple Storage Service"]', format="cur", path=CUR,
                window=("2023-11-01", "2023-12-01"))
    assert (doc["total"], doc["outside_scope"]["amount"]) == ("1.44", "0.24")  # 1.37056536 + 0.07
    assert Decimal(doc["total"]) + Decimal(doc["outside_scope"]["amount"]) == Decimal(doc["invoice_total"])
    assert not [f for f in doc["fit"] if f["kind"] == "scope_adjustment_whole"]


def test_a_services_scope_leaves_out_another_provider_s_adjustments(tmp_path):
    doc = audit(tmp_path, 'services = ["Amazon Elastic Compute Cloud"]', format="focus", path=FOCUS,
                window=("2024-09-01", "2024-10-01"))
    assert (doc["total"], doc["outside_scope"]["amount"]) == ("16.04", "4.48")  # 18.65539305 − 2.6137
    assert "unapplied_adjustment" not in {p["name"] for p in doc["buckets"]["unattributed"]["parts"]}


def test_a_tags_scope_names_the_account_credit_it_keeps_whole(tmp_path):
    """The sample's credit names no resource and carries no tags: it applies to its whole account,
    41 of whose charge lines are not tagged dev. The scope keeps it whole, and says so by name."""
    doc = audit(tmp_path, 'tags = { environment = "dev" }', format="focus", path=FOCUS,
                window=("2024-09-01", "2024-10-01"))
    (whole,) = [f for f in doc["fit"] if f["kind"] == "scope_adjustment_whole"]
    assert "1 tax, credit or adjustment line(s) that name no resource or tags (lines focus_sample_1000.csv:457)" \
        in whole["message"]
    assert "account(s) 11353890204, whose 41 charge line(s) outside the scope" in whole["message"]
    assert Decimal(doc["total"]) + Decimal(doc["outside_scope"]["amount"]) == Decimal(doc["invoice_total"])
