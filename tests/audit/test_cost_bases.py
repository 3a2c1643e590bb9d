"""The list and contracted cost bases through the whole audit (METHOD §1): conservation to the cent,
the total equal to the bridge's total of the basis, the CUR cost-column mapping in sources[], and a
basis whose column the data lacks refused with one error naming the file and the column."""
from __future__ import annotations

import shutil
import subprocess
import sys
from decimal import Decimal

import pytest

from audit.audit_json import to_dict
from audit.case import load_case
from audit.pipeline import run_audit
from connectors.errors import InputErrors
from tests.builders import billing_case
from tests.paths import DATA, DEMO, ROOT

LABS = DATA / "billing" / "aws_wa_labs"
FOCUS_SAMPLE = DATA / "billing" / "focus_sample_data" / "focus_sample_1000.csv"


def conserved(doc: dict, basis: str) -> None:
    buckets = sum(Decimal(b["amount"]) for b in doc["buckets"].values())
    assert buckets == Decimal(doc["total"])  # unattributed is one of the buckets
    assert doc["cost_basis"] == basis and doc["bridge"][basis] == doc["total"]


@pytest.mark.slow
@pytest.mark.parametrize("basis", ["list", "contracted"])
def test_demo_on_the_pre_commitment_bases_keeps_conservation(tmp_path, basis):
    case = tmp_path / "demo"
    shutil.copytree(DEMO, case)
    toml = case / "case.toml"
    text = toml.read_text()
    toml.write_text(text.replace('cost_basis = "effective"', f'cost_basis = "{basis}"'))
    assert f'cost_basis = "{basis}"' in toml.read_text()
    doc = to_dict(run_audit(load_case(case)))
    conserved(doc, basis)
    # the commitment purchases are no part of these bases: no class carries them
    assert doc["bridge"]["commitment_purchases"] != "0.00"


@pytest.mark.skipif(not LABS.exists(), reason="shared billing data not present")
@pytest.mark.parametrize("basis", ["list", "contracted", "billed", "effective"])
def test_savings_plan_cur_on_every_basis(tmp_path, basis):
    path = LABS / "workload_efficiency_step5_cur_2019-11-29_savingsplans.csv.gz"
    billing_case(tmp_path, "sp-day", ("2019-11-29", "2019-12-01"), basis, format="cur", path=path)
    doc = to_dict(run_audit(load_case(tmp_path)))
    conserved(doc, basis)
    source = next(s for s in doc["sources"] if s["format"] == "cur")
    columns = source["cost_columns"]
    assert columns["ListCost"]["*"] == "pricing_public_on_demand_cost"
    assert columns["ContractedCost"]["DiscountedUsage"] == "pricing_public_on_demand_cost"
    assert columns["BilledCost"]["SavingsPlanCoveredUsage"] == "0"
    assert columns["EffectiveCost"]["SavingsPlanCoveredUsage"] == "savings_plan_savings_plan_effective_cost"


@pytest.mark.skipif(not FOCUS_SAMPLE.exists(), reason="shared billing data not present")
def test_a_basis_whose_column_is_missing_is_one_clear_error(tmp_path):
    billing_case(tmp_path, "sample", ("2024-09-01", "2024-10-01"), "contracted", format="focus", path=FOCUS_SAMPLE)
    with pytest.raises(InputErrors) as caught:
        run_audit(load_case(tmp_path))
    (error,) = caught.value.errors
    assert error.column == "ContractedCost" and error.path.endswith("focus_sample_1000.csv")
    assert "missing on 7 line(s)" in error.message
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "audit", "run", str(tmp_path), "--out", str(out)],
                          capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 1 and "ContractedCost" in done.stderr + done.stdout
    assert not out.exists()  # nothing written
    checked = subprocess.run([sys.executable, "-m", "audit", "validate", str(tmp_path)],
                             capture_output=True, text=True, cwd=ROOT)
    assert checked.returncode == 1 and "needs ContractedCost" in checked.stderr  # validate says it too


@pytest.mark.skipif(not FOCUS_SAMPLE.exists(), reason="shared billing data not present")
def test_the_bridge_says_what_it_cannot_measure(tmp_path):
    billing_case(tmp_path, "sample", ("2024-09-01", "2024-10-01"), "billed", format="focus", path=FOCUS_SAMPLE)
    bridge = to_dict(run_audit(load_case(tmp_path)))["bridge"]
    assert bridge["contracted"] is None and bridge["list"] is not None
    assert "contracted" in bridge["not_measured"] and "ContractedCost is missing on 7" in bridge["not_measured"]
    # the file by its path relative to the case folder (here outside it: its name), never the absolute path
    assert bridge["not_measured"].endswith(": ContractedCost is missing on 7 in-scope line(s) of focus_sample_1000.csv")
    assert bridge["other_billed_to_effective_lines"].split(" ")[0].isdigit()
