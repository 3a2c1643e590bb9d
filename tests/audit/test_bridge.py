"""The four-basis bridge (METHOD §1, audit/bridge.py) against sums taken straight from the files.

Each expected figure is computed here with DuckDB from the raw file (the FOCUS columns as written,
or a CUR's own columns through this test's own reading of the CUR line item types), never through
the connectors or the bridge; the bridge is computed from the lines the connectors read. Every step
and total must equal its exact sum, and round to within a cent of it while the rounded rows foot.
"""
from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.bridge import PLAN, Unpurchased, bridge, unpurchased
from audit.lines import basis_amount
from connectors.base import ReadContext, SourceSpec
from connectors.billing.azure import AzureExportConnector
from connectors.billing.focus import FocusConnector
from connectors.errors import InputErrors
from tests.builders import ALWAYS, line, lines_frame, read_cur_once
from tests.paths import DATA

BILLING = DATA / "billing"
LABS = BILLING / "aws_wa_labs"
SPEC = BILLING / "focus_spec_examples"
FOCUS_SAMPLE = BILLING / "focus_sample_data" / "focus_sample_1000.csv"
TOOLKIT = BILLING / "msft_finops_toolkit"
CUR_FILES = ["workload_efficiency_step5_cur_2019-11-29_savingsplans.csv.gz", "Oct2018-WorkshopCUR-00001.snappy.parquet",
             "Nov2018-WorkshopCUR-00001.snappy.parquet", "Dec2018-WorkshopCUR-00001.snappy.parquet",
             "workload_efficiency_step1_cur_2019-11-26.csv.gz"]
DEC = "DECIMAL(38,20)"
CENT = Decimal("0.01")
ADJUSTMENTS = "('Tax', 'Credit', 'Refund', 'Adjustment')"

pytestmark = pytest.mark.skipif(not BILLING.exists(), reason="shared billing data not present")


# --- the expected figures, from the files ----------------------------------------------------------

GROUP_SQL = f"""
WITH g AS (SELECT *,
    ChargeCategory = 'Purchase' AND coalesce(CommitmentDiscountId, '') <> '' AS is_p,
    lower(coalesce(CommitmentDiscountStatus, '')) AS st FROM lines_sql),
h AS (SELECT *, CASE WHEN is_p THEN 'purchases' WHEN st = 'used' THEN 'covered' WHEN st = 'unused' THEN 'unused'
                     WHEN ChargeCategory IN ('Credit', 'Refund', 'Adjustment') AND L = 0 AND C <> 0 THEN 'negotiated'
                     WHEN ChargeCategory IN {ADJUSTMENTS} THEN 'adjustments' ELSE 'other' END AS grp FROM g)
SELECT grp, sum(L), sum(C), sum(B), sum(E), count(*) FILTER (WHERE L IS NULL), count(*) FILTER (WHERE C IS NULL)
FROM h GROUP BY grp
"""


def expected(con, lines_sql: str) -> dict[str, Decimal | None]:
    """Every bridge row from ``lines_sql`` (a query with ChargeCategory, CommitmentDiscountId,
    CommitmentDiscountStatus and the four costs as L, C, B, E), as METHOD §1 defines it."""
    rows = con.execute(GROUP_SQL.replace("lines_sql", f"({lines_sql})")).fetchall()
    sums = {r[0]: dict(zip("LCBE", (r[1] or Decimal(0), r[2] or Decimal(0), r[3] or Decimal(0), r[4] or Decimal(0))))
            for r in rows}
    nulls = {c: sum(r[5 + i] for r in rows if r[0] != "purchases") for i, c in enumerate("LC")}
    out: dict[str, Decimal | None] = {}
    for _kind, key, _label, groups, to, frm in PLAN:
        if (to in nulls and nulls[to]) or (frm in nulls and nulls[frm]):
            out[key] = None
            continue
        out[key] = sum((sums.get(g, {}).get(to, Decimal(0)) - (sums.get(g, {}).get(frm, Decimal(0)) if frm else 0)
                        for g in groups), Decimal(0))
    return out


def focus_sql(con, path: Path) -> str:
    """The FOCUS file as the bridge's columns (a column the file lacks is null)."""
    header = [r[0] for r in con.execute(f"DESCRIBE SELECT * FROM read_csv('{path}', all_varchar=true)").fetchall()]
    def money(name: str) -> str:
        return f"TRY_CAST({name} AS {DEC})" if name in header else f"NULL::{DEC}"
    def text(name: str) -> str:
        return name if name in header else "NULL::VARCHAR"
    return (f"SELECT ChargeCategory, {text('CommitmentDiscountId')} AS CommitmentDiscountId, "
            f"{text('CommitmentDiscountStatus')} AS CommitmentDiscountStatus, {money('ListCost')} AS L, "
            f"{money('ContractedCost')} AS C, {money('BilledCost')} AS B, {money('EffectiveCost')} AS E "
            f"FROM read_csv('{path}', all_varchar=true, nullstr=['', 'NULL', 'null'])")


def cur_sql(con, path: Path) -> str:
    """A CUR file as the bridge's columns, read here from the CUR's own line item types: covered usage
    and its negation bill 0, and the negation lists and contracts 0 (its public on-demand cost repeats
    the covered usage's); reservation-covered usage is contracted at its public on-demand cost; a
    Savings Plan / RI fee adds one row for its unused part (billed, list, contracted 0)."""
    if path.suffix == ".parquet":
        source = f"read_parquet('{path}')"
    else:
        source = f"read_csv('{path}', all_varchar=true, header=true, nullstr=['', '\\N'])"
    names = {r[0] for r in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    def num(name: str) -> str:
        return f"TRY_CAST(CAST({name} AS VARCHAR) AS {DEC})" if name in names else f"NULL::{DEC}"  # a double as its shortest text
    def zero(name: str) -> str:
        return f"coalesce({num(name)}, 0)"
    ri = next((n for n in ("reservation_reservation_a_r_n", "reservation_reservation_arn") if n in names), None)
    ri_arn = ri or "NULL::VARCHAR"
    sp = next((n for n in ("savings_plan_savings_plan_a_r_n", "savings_plan_savings_plan_arn") if n in names), None)
    sp_arn = sp or "NULL::VARCHAR"
    t, u, od = "line_item_line_item_type", num("line_item_unblended_cost"), num("pricing_public_on_demand_cost")
    base = f"""SELECT
      CASE WHEN {t} IN ('Usage', 'DiscountedUsage', 'SavingsPlanCoveredUsage', 'SavingsPlanNegation') THEN 'Usage'
           WHEN {t} IN ('SavingsPlanRecurringFee', 'SavingsPlanUpfrontFee', 'RIFee', 'Fee') THEN 'Purchase'
           WHEN {t} LIKE '%Discount' THEN 'Credit' ELSE {t} END AS ChargeCategory,
      CASE WHEN {t} IN ('DiscountedUsage', 'RIFee') OR ({t} = 'Fee' AND {ri_arn} IS NOT NULL) THEN {ri_arn}
           WHEN {t} LIKE 'SavingsPlan%' THEN {sp_arn} END AS CommitmentDiscountId,
      CASE WHEN {t} IN ('DiscountedUsage', 'SavingsPlanCoveredUsage', 'SavingsPlanNegation') THEN 'Used' END
        AS CommitmentDiscountStatus,
      CASE WHEN {t} = 'SavingsPlanNegation' THEN 0 ELSE {od} END AS L,  -- it repeats the covered usage's
      CASE WHEN {t} = 'DiscountedUsage' THEN {od} WHEN {t} = 'SavingsPlanNegation' THEN 0 ELSE {u} END AS C,
      CASE WHEN {t} IN ('SavingsPlanCoveredUsage', 'SavingsPlanNegation') THEN 0 ELSE {u} END AS B,
      CASE WHEN {t} = 'DiscountedUsage' THEN {num('reservation_effective_cost')}
           WHEN {t} = 'SavingsPlanCoveredUsage' THEN {num('savings_plan_savings_plan_effective_cost')}
           WHEN {t} IN ('SavingsPlanNegation', 'SavingsPlanUpfrontFee', 'SavingsPlanRecurringFee', 'RIFee') THEN 0
           WHEN {t} = 'Fee' AND {ri_arn} IS NOT NULL THEN 0 ELSE {u} END AS E
      FROM {source}"""
    sp_unused = f"{zero('savings_plan_total_commitment_to_date')} - {zero('savings_plan_used_commitment')}"
    ri_unused = (f"{zero('reservation_unused_amortized_upfront_fee_for_billing_period')} + "
                 f"{zero('reservation_unused_recurring_fee')}")
    unused = " UNION ALL ".join(
        f"SELECT 'Usage', {arn}, 'Unused', 0, 0, 0, {amount} FROM {source} WHERE {t} = '{fee}' AND ({amount}) > 0"
        for fee, amount, arn in (("SavingsPlanRecurringFee", sp_unused, sp_arn), ("RIFee", ri_unused, ri_arn)))
    return f"{base} UNION ALL {unused}"


def focus_lines(path: Path):
    spec = SourceSpec(name="f", kind="billing", format="focus", path=path)
    return FocusConnector(spec, ReadContext(start=ALWAYS[0], end=ALWAYS[1], currency="USD")).read().tables["lines"]


def azure_lines(path: Path):
    spec = SourceSpec(name="az", kind="billing", format="azure", path=path)
    return AzureExportConnector(spec, ReadContext(start=ALWAYS[0], end=ALWAYS[1], currency="USD")).read().tables["lines"]


def assert_matches(found, want: dict[str, Decimal | None]) -> None:
    """Every row exact, every rounded row within a cent, the rounded steps footing between totals."""
    exact = {s.key: s.amount for s in found.steps}
    assert exact == want
    rounded = found.rounded()
    for key, value in want.items():
        assert (rounded[key] is None) == (value is None), key
        if value is not None:
            assert abs(rounded[key] - value) <= CENT, key
    _assert_foots(found, rounded)


def _assert_foots(found, rounded) -> None:
    level = None
    moved = Decimal(0)
    for step in found.steps:
        if step.kind == "step":
            moved += rounded[step.key] if rounded[step.key] is not None else Decimal("NaN")
            continue
        if level is not None and rounded[step.key] is not None and not moved.is_nan():
            assert level + moved == rounded[step.key], step.key
        level, moved = rounded[step.key], Decimal(0)


# --- real samples ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", CUR_FILES)
def test_cur_bridge_matches_the_file(name):
    path = LABS / name
    lines = read_cur_once(path, *ALWAYS).tables["lines"]
    with duckdb.connect() as con:
        want = expected(con, cur_sql(con, path))
    found = bridge(lines)
    assert_matches(found, want)
    # the four totals are the four cost columns summed over the lines (list / contracted: but the
    # commitment purchases, which a CUR prices at 0 on the public on-demand side anyway)
    for basis in ("list", "contracted", "billed", "effective"):
        assert want[basis] == sum(basis_amount(lines, basis), Decimal(0)), basis
    assert want["covered_usage"] <= 0 and want["commitment_purchases"] >= 0


def test_savings_plan_day_bridges_to_the_cent():
    found = bridge(read_cur_once(LABS / CUR_FILES[0], *ALWAYS).tables["lines"]).rounded()
    # fully used No Upfront plan: the 12.696 fee replaces 19.519065 of covered usage on the invoice,
    # and the amortised view moves the fee back onto the covered lines
    assert found["commitment_purchases"] == Decimal("12.70")
    assert found["purchases_amortised"] == Decimal("-12.70") and found["amortised_commitment"] == Decimal("12.70")
    assert found["billed"] == found["effective"] == Decimal("70.27")
    assert found["other_contracted_to_billed"] == found["other_billed_to_effective"] == 0
    # the negations repeat the covered usage's public on-demand cost (+19.519065): listed 0, else the
    # covered usage would be listed twice; what remains between list and contracted is tiered pricing
    assert found["list"] == Decimal("77.15") and found["negotiated_discounts"] == Decimal("-0.06")


OCT_SPOT = ("1,313 usage line(s) carry no list price (ListCost 0 and no ListUnitPrice, as AWS writes Spot usage; "
            "ContractedCost 31.51; lines Oct2018-WorkshopCUR-00001.snappy.parquet:1321, "
            "Oct2018-WorkshopCUR-00001.snappy.parquet:1322, Oct2018-WorkshopCUR-00001.snappy.parquet:1323, …): the list "
            "total counts them 0, so it is understated by 31.51, and negotiated_discounts includes that +31.51 (on the "
            "other lines: -16.46)")


def test_spot_usage_without_a_list_price_is_named_on_the_list_total_and_negotiated_discounts():
    """The Oct 2018 workshop CUR on the effective basis (a verifier's find): the bridge read list 4237.68 →
    negotiated_discounts +15.05 → contracted 4252.73 with no word; 1,313 SpotUsage lines list at 0 against
    31.505516 contracted, the other lines' discount being -16.458892. The step stays a sum of lines (METHOD §1),
    and both rows now say what it holds."""
    found = bridge(read_cur_once(LABS / "Oct2018-WorkshopCUR-00001.snappy.parquet", *ALWAYS).tables["lines"])
    steps = {s.key: s for s in found.steps}
    assert (steps["list"].amount, steps["negotiated_discounts"].amount) == (Decimal("4237.6817354175"),
                                                                           Decimal("15.0466235700"))
    assert steps["list"].lacks == steps["negotiated_discounts"].lacks == OCT_SPOT
    assert all(s.lacks is None for s in found.steps if s.key not in ("list", "negotiated_discounts"))


def test_a_cur_whose_usage_all_has_a_list_price_has_no_list_note():
    found = bridge(read_cur_once(LABS / CUR_FILES[0], *ALWAYS).tables["lines"])
    assert all(s.lacks is None for s in found.steps)


@pytest.mark.parametrize("path", sorted(SPEC.glob("*.csv")), ids=lambda p: p.stem)
def test_focus_spec_examples(path):
    with duckdb.connect() as con:
        want = expected(con, focus_sql(con, path))
    if path.stem.startswith("commitment_discount_purchase"):  # purchases alone: no line carries their amortisation
        want["amortised_commitment"] = None
    assert_matches(bridge(focus_lines(path)), want)


def test_a_purchase_whose_amortisation_no_line_carries_is_not_measured_and_named():
    """An Azure ActualCost export shows a reservation purchase (billed 3.25, EffectiveCost 0) and no
    amortisation of it. Before, the bridge said amortised_commitment 0.00 and the 3.25 left the
    effective total without a word."""
    found = {s.key: s for s in bridge(azure_lines(TOOLKIT / "EA_ActualCost_Small.csv")).steps}
    step = found["amortised_commitment"]
    assert step.amount is None
    assert step.reason.startswith("1 commitment purchase line(s) (EA_ActualCost_Small.csv:1), billed 3.25, leave "
                                  "the effective basis (EffectiveCost 0) and no in-scope line carries their "
                                  "amortisation")
    assert "Read the amortised view as well (Azure: the AmortizedCost export)" in step.reason
    assert found["purchases_amortised"].amount == Decimal("-3.25")
    amortized = {s.key: s for s in bridge(azure_lines(TOOLKIT / "EA_AmortizedCost_Small.csv")).steps}
    assert amortized["amortised_commitment"].reason is None



def test_costaudit_billing_says_what_the_effective_total_of_an_actual_cost_export_lacks():
    """`costaudit billing` on the same export: effective 5.30 against billed 8.55, and before, no word
    that the 3.25 purchase is in no line of the effective total (a verifier's find); the amortised
    export needs no note."""
    from audit.billing_summary import summarise
    from audit.cli.billing import render_text

    actual = summarise([str(TOOLKIT / "EA_ActualCost_Small.csv")], None, None)
    assert [r["effective"] for r in actual["by_currency"]] == ["5.30"]
    [note] = actual["notes"]
    assert note.startswith("EA_ActualCost_Small.csv: effective total: 1 commitment purchase line(s) "
                           "(EA_ActualCost_Small.csv:1), billed 3.25, leave the effective basis")
    assert f"Notes:\n  {note}" in render_text(actual)
    assert summarise([str(TOOLKIT / "EA_AmortizedCost_Small.csv")], None, None)["notes"] == []

SAVINGS_PLAN_ORDER = "/providers/Microsoft.BillingBenefits/savingsPlanOrders/aaaa"
SAVINGS_PLAN = f"{SAVINGS_PLAN_ORDER}/savingsPlans/bbbb"


def committed(row: int, status: str, billed: str, effective: str, **over) -> dict:
    """A line of the savings plan: covered usage (Used), its unused share (Unused) or its purchase."""
    return line(row, commitment_discount_id=SAVINGS_PLAN, commitment_discount_status=status,
                billed_cost=Decimal(billed), effective_cost=Decimal(effective), contracted_cost=Decimal("2359.68"),
                **over)


def test_covered_usage_costing_0_on_both_bases_without_its_purchase_is_unpurchased():
    """An Azure ActualCost export without the savings plan's purchase: its covered usage costs 0 on
    both bases. Before, only lines billed differently from their effective cost were looked at, so
    nothing was found; now the line is named at its contracted price, its amortisation unshown."""
    covered = committed(1, "Used", "0", "0")
    assert unpurchased(lines_frame([covered])) == Unpurchased(Decimal(0), Decimal(0), (SAVINGS_PLAN,), 0,
                                                             Decimal("2359.68"), 1)
    purchase = line(2, charge_category="Purchase", commitment_discount_id=SAVINGS_PLAN_ORDER,
                    billed_cost=Decimal("1415.81"), effective_cost=Decimal(0))
    assert unpurchased(lines_frame([covered, purchase])) is None


def test_a_commitment_whose_unused_share_shows_its_amortisation_is_named_by_that_amount():
    """Where a line of the commitment carries its amortisation (an unused share, billed 0, effective
    52.89), the covered line costing 0 on both is not counted at its contracted price as well."""
    found = unpurchased(lines_frame([committed(1, "Used", "0", "0"), committed(2, "Unused", "0", "52.89")]))
    assert found == Unpurchased(Decimal(0), Decimal("52.89"), (SAVINGS_PLAN,), 1, Decimal(0), 0)
    assert found.lacks() == ("the billed total lacks the purchases behind 0.00 of commitment-covered usage and "
                             f"52.89 of unused commitment (commitment(s) {SAVINGS_PLAN})")


def test_focus_sample_with_contracted_cost_missing_on_some_lines():
    lines = focus_lines(FOCUS_SAMPLE)
    with duckdb.connect() as con:
        want = expected(con, focus_sql(con, FOCUS_SAMPLE))
    found = bridge(lines)
    assert_matches(found, want)
    # ContractedCost is null on 5 usage and 2 adjustment rows: the contracted steps are not measured
    reasons = {s.key: s.reason for s in found.steps if s.reason}
    assert set(reasons) == {"negotiated_discounts", "adjustments_list_to_contracted", "contracted", "covered_usage",
                            "unused_commitment_billed", "other_contracted_to_billed"}
    assert all("ContractedCost is missing on 7 in-scope line(s)" in r for r in reasons.values())
    assert want["list"] is not None and want["billed"] is not None
    # the anonymiser's rounded EffectiveCost is a real difference, carried by named lines
    other = next(s for s in found.steps if s.key == "other_billed_to_effective")
    assert other.amount == want["other_billed_to_effective"] != 0 and other.lines > 0 and other.examples
    with pytest.raises(InputErrors, match="ContractedCost"):
        basis_amount(lines, "contracted")


@pytest.mark.parametrize("name, listed, reason", [
    ("EA_ActualCost_Small.csv", Decimal("5.295007719"), None),
    ("EA_AmortizedCost_Small.csv", None, "ListCost is missing on 1 in-scope line(s)")])
def test_azure_ea_exports_list_paygprice_times_quantity_or_name_what_lacks_it(name, listed, reason):
    """An EA export has no PaygCostInBillingCurrency: ListCost is PayGPrice × Quantity (before, the list
    basis was never measured on one). The amortised sample's reservation-covered line has PayGPrice 0
    under UnitPrice 0.146: no list price, so the list basis is not measured, and says on how many lines."""
    lines = azure_lines(TOOLKIT / name)
    found = {s.key: s for s in bridge(lines).steps}
    assert (found["list"].amount, found["list"].reason) == (listed, reason)
    # ContractedCost is UnitPrice × Quantity (tests/connectors/billing/test_azure_contracted.py)
    assert found["contracted"].amount == sum(basis_amount(lines, "contracted"), Decimal(0))
    with duckdb.connect() as con:
        texts = con.execute(f"SELECT Cost FROM read_csv('{TOOLKIT / name}', all_varchar=true)").fetchall()
    cost = sum((Decimal(t) for (t,) in texts), Decimal(0))  # exact: more digits than DECIMAL(38,20) keeps
    column = "billed" if "Actual" in name else "effective"
    assert found[column].amount == cost
    assert found["billed"].amount + sum(found[k].amount or 0 for k in ("amortised_commitment", "unused_commitment",
                                                                       "purchases_amortised",
                                                                       "other_billed_to_effective")) \
        == found["effective"].amount


# --- property: the bridge foots for any lines --------------------------------------------------------

AMOUNTS = st.decimals(min_value=-1000, max_value=1000, places=4, allow_nan=False, allow_infinity=False)
KINDS = st.sampled_from([("Usage", "", ""), ("Usage", "c1", "Used"), ("Usage", "c1", "Unused"),
                         ("Purchase", "c1", ""), ("Purchase", "", ""), ("Tax", "", ""), ("Credit", "", "")])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(KINDS, AMOUNTS, AMOUNTS, AMOUNTS, AMOUNTS), min_size=1, max_size=30))
def test_rows_foot_exactly_and_at_the_cent(rows):
    built = lines_frame([line(i + 1, charge_category=k[0], commitment_discount_id=k[1], commitment_discount_status=k[2],
                              list_cost=lc, contracted_cost=cc, billed_cost=bc, effective_cost=ec)
                         for i, (k, lc, cc, bc, ec) in enumerate(rows)])
    found = bridge(built)
    exact = {s.key: s.amount for s in found.steps}
    level, moved = None, Decimal(0)
    for step in found.steps:  # exact: each total is the previous plus its steps
        if step.kind == "step":
            moved += step.amount if step.amount is not None else 0  # a purchase no line amortises: named, 0
            continue
        if level is not None:
            assert level + moved == step.amount
        level, moved = step.amount, Decimal(0)
    purchase = [r for r in rows if r[0][0] == "Purchase" and r[0][1]]
    assert exact["list"] == sum((r[1] for r in rows if r not in purchase), Decimal(0))
    assert exact["billed"] == sum((r[3] for r in rows), Decimal(0))
    rounded = found.rounded()
    _assert_foots(found, rounded)
    assert all(abs(rounded[k] - v) <= CENT for k, v in exact.items())


def test_a_total_of_the_audit_s_exact_amount_takes_the_audit_s_cent():
    """The audit's total in scope is rounded with the total outside it (METHOD §1, §5): 1.005 may be
    1.01 there though it rounds to 1.00 alone. Every basis of that exact amount shows the audit's
    figure and the steps between them stay 0.00 (before: 1.00 beside a headline of 1.01)."""
    amounts = {c: Decimal("0.5025") for c in ("billed_cost", "effective_cost", "list_cost", "contracted_cost")}
    found = bridge(lines_frame([line(1, **amounts), line(2, **amounts)]))
    assert found.rounded()["effective"] == Decimal("1.00")
    rounded = found.rounded({Decimal("1.005"): Decimal("1.01")})
    assert [rounded[k] for k in ("list", "contracted", "billed", "effective")] == [Decimal("1.01")] * 4
    assert {rounded[s.key] for s in found.steps if s.kind == "step"} == {Decimal("0.00")}
    _assert_foots(found, rounded)


def test_a_step_not_measured_names_the_case_relative_file_and_the_exports_own_columns():
    """Before: 'ContractedCost is missing on 2 in-scope line(s) of /tmp/…/billing/export.jsonl', the
    absolute path of the input, and only the FOCUS column name for a GCP export that has no such price."""
    rows = [line(1, list_cost=Decimal("2")), line(2, list_cost=Decimal("3")),
            line(3, list_cost=Decimal("1"), contracted_cost=Decimal("1"))]
    lines = lines_frame(rows).assign(source=["gcp", "gcp", "focus"],
                                     source_path=["/tmp/s8/in/billing/export.jsonl"] * 2 + ["/tmp/s8/in/f.csv"])
    found = bridge(lines, {"gcp": ("billing/export.jsonl", "gcp_billing"), "focus": ("billing/f.csv", "focus")})
    reasons = {s.key: s.reason for s in found.steps if s.reason}
    assert reasons["contracted"] == (
        "the GCP billing export carries no contracted price (its cost columns are cost and cost_at_list, the list "
        "price) (ContractedCost is missing on 2 in-scope line(s) of billing/export.jsonl)")
    focus_only = bridge(lines.assign(source="focus"), {"focus": ("billing/f.csv", "focus")})
    assert {s.reason for s in focus_only.steps if s.reason} == {
        "ContractedCost is missing on 2 in-scope line(s) of billing/f.csv"}


def twin_lines(folder: Path):
    """The billing lines of a cloudgen case folder, read by the connector its case names."""
    from connectors.billing.cur import CurConnector
    source = next((folder / "billing").iterdir())
    cur = source.is_dir()
    spec = SourceSpec(name="cur" if cur else "focus", kind="billing", format="cur" if cur else "focus",
                      path=source)
    connector = (CurConnector if cur else FocusConnector)(spec, ReadContext(*ALWAYS, currency="USD"))
    return connector.read().tables["lines"]


def test_a_cur_and_its_focus_twin_give_one_bridge_with_credits_and_tax(tmp_path):
    """cloudgen eks 9402 with credits and tax, as a CUR 2.0 and as its FOCUS twin. FOCUS lists and
    contracts a credit at its BilledCost and a tax on the list and contracted cost of what it taxes
    (ListCost, ContractedCost where the unit price is null). Before: the CUR contracted its credits
    and tax at their unblended cost (−467.19 net, in adjustments_list_to_contracted) and listed them
    at 0, the FOCUS twin listed and contracted them at 0 (the −467.19 in other_contracted_to_billed):
    contracted totals 2487.40 against 2954.59 on the account in scope. Now both list and contract
    them at their billed amount, and every total and step is the same."""
    from benchmarks.cloudgen.generate import generate
    bridges = {}
    for billing in ("native", "focus"):
        generate("eks", 9402, tmp_path / billing, billing=billing, adjustments=True)
        lines = twin_lines(tmp_path / billing)
        sums = {column: [sum(lines.loc[lines.charge_category == category, column], Decimal(0))
                         for category in ("Credit", "Tax")] for column in ("list_cost", "contracted_cost", "billed_cost")}
        assert sums == dict.fromkeys(sums, [Decimal("-728.9316"), Decimal("260.96053304616")]), billing
        bridges[billing] = bridge(lines).rounded()
    assert bridges["native"] == bridges["focus"]
    # the whole invoice (both accounts): no step between the bases, every total the same
    assert {k: str(v) for k, v in bridges["focus"].items() if v} == dict.fromkeys(
        ("list", "contracted", "billed", "effective"), "2491.46")


def test_a_gcp_export_and_its_focus_twin_give_one_list_total_with_credits(tmp_path):
    """cloudgen gke 9611 with credits (sustained use discounts) and tax, as the native billing export
    and as its FOCUS twin. FOCUS lists a credit at its BilledCost. Before: the export reader listed
    every credit at 0, so its list total was above the twin's by the credits, −444.28 (4762.63 against
    4318.35 on the whole invoice; the audit in scope 4752.72 against 4309.38); now both list 4318.35,
    and every step the export measures (it has no contracted price) is the twin's."""
    from benchmarks.cloudgen.generate import generate
    from connectors.billing.gcp_billing import GcpBillingConnector
    bridges = {}
    for billing in ("native", "focus"):
        generate("gke", 9611, tmp_path / billing, billing=billing, adjustments=True)
        if billing == "native":
            spec = SourceSpec(name="gcp", kind="billing", format="gcp_billing",
                              path=next((tmp_path / billing / "billing").iterdir()))
            lines = GcpBillingConnector(spec, ReadContext(*ALWAYS, currency="USD")).read().tables["lines"]
        else:
            lines = twin_lines(tmp_path / billing)
        credits = lines[lines.charge_category == "Credit"]
        assert sum(credits.list_cost, Decimal(0)) == sum(credits.billed_cost, Decimal(0)) != 0, billing
        bridges[billing] = bridge(lines).rounded()
    measured = {k: v for k, v in bridges["native"].items() if v is not None}
    assert measured == {k: bridges["focus"][k] for k in measured}
    assert [measured[k] for k in ("list", "billed", "effective")] == [Decimal("4318.35")] * 3
    assert round(sum(credits.list_cost, Decimal(0)), 2) == Decimal("-444.28")


def negotiated_cur_rows() -> list[dict]:
    """tests/builders' CUR 2.0 hours with an EDP discount of 3 % on each on-demand p5 and g6e hour, a
    private rate discount on the p5 hours and a bundled discount, as AWS writes them: lines of their
    own (EdpDiscount, PrivateRateDiscount, BundledDiscount), public on-demand cost 0."""
    from tests.builders import cur2_rows, instance_hour
    rows = [r for r in cur2_rows() if r["line_item_line_item_type"] != "EdpDiscount"]
    hours = [r for r in rows if r["line_item_line_item_type"] == "Usage" and r["line_item_unblended_cost"]]
    for r in hours:
        hour, cost = r["line_item_usage_start_date"].hour, Decimal(repr(r["line_item_unblended_cost"]))
        kinds = [("EdpDiscount", -(cost * Decimal("0.03")).quantize(Decimal("0.000001")))]
        kinds += [("PrivateRateDiscount", Decimal("-4.5"))] * (r["line_item_resource_id"] == "i-0p5b")
        for kind, amount in kinds:
            rows.append(instance_hour(hour, kind, "", str(amount), r["line_item_resource_id"], pricing_public_on_demand_cost=0.0,
                                      pricing_public_on_demand_rate=None, line_item_usage_amount=None))
    rows.append(instance_hour(0, "BundledDiscount", "", "-0.75", None, pricing_public_on_demand_cost=0.0))
    return rows


def test_negotiated_discount_lines_of_a_cur_are_the_negotiated_discounts_step(tmp_path):
    """METHOD §1: negotiated discounts lie between the list and the contracted total. A CUR bills them
    as lines of their own, read as credits (their class nets and buckets as they were) that list at 0
    and are contracted at their cost. Before: the bridge put them with the credits and tax,
    adjustments_list_to_contracted −26.61 beside negotiated_discounts 0.00; now negotiated_discounts
    −26.61 (EDP −7.86, private rate −18.00, bundled −0.75) and adjustments_list_to_contracted 0.00 (a
    credit and a tax list and contract at their cost); the totals as they were. The expected figures
    are summed here from the raw CUR rows with pandas and Decimal."""
    from tests.builders import write_cur2
    rows = negotiated_cur_rows()
    lines = read_cur_once(write_cur2(tmp_path / "edp.parquet", rows), *ALWAYS).tables["lines"]
    raw = pd.DataFrame(rows)
    t = raw["line_item_line_item_type"]
    unblended = raw["line_item_unblended_cost"].map(lambda v: Decimal(repr(v)))
    public = raw["pricing_public_on_demand_cost"].map(lambda v: Decimal(0) if v is None or pd.isna(v) else Decimal(repr(v)))
    purchase = t.isin(["SavingsPlanRecurringFee", "RIFee", "Fee"])
    listed = public.where(~t.isin(["Tax", "Credit", "Refund"]), unblended).where(t != "SavingsPlanNegation", Decimal(0))
    contracted = unblended.where(t != "DiscountedUsage", public).where(t != "SavingsPlanNegation", Decimal(0))
    discount = t.str.endswith("Discount")
    adjusting = t.isin(["Tax", "Credit", "Refund"])
    want = {"list": sum(listed[~purchase], Decimal(0)), "contracted": sum(contracted[~purchase], Decimal(0)),
            "negotiated_discounts": sum((contracted - listed)[~purchase & ~adjusting], Decimal(0)),
            "adjustments_list_to_contracted": sum((contracted - listed)[adjusting], Decimal(0))}
    assert sum(unblended[discount], Decimal(0)) == Decimal("-26.613916")
    assert want["negotiated_discounts"] == Decimal("-26.613916") and want["adjustments_list_to_contracted"] == 0
    found = {s.key: s.amount for s in bridge(lines).steps}
    assert {k: found[k] for k in want} == want
    assert bridge(lines).rounded()["negotiated_discounts"] == Decimal("-26.61")
    assert set(lines.loc[lines.extra.str.contains("Discount\""), "charge_category"]) == {"Credit"}  # netted as before


def fee_lines(native: bool) -> list[dict]:
    """A commitment fee of 100, 80 of it used by one covered line (listed 120): as FOCUS writes it
    (the purchase of all of it, the unused 20 billed 0), or as the GCP billing export is read
    (connectors/billing/gcp_commitments.py: the purchase of the part used, the unused rest billed as a
    line of its own)."""
    def d(text):
        return Decimal(text)
    pool = "gcp-cud/acct/us-central1/nvidia h100 80gb gpu in americas"
    used, billed = (d("80"), d("20")) if native else (d("100"), d("0"))
    return [line(1, charge_category="Purchase", commitment_discount_id=pool, billed_cost=used, effective_cost=d("0")),
            line(2, commitment_discount_id=pool, commitment_discount_status="Used", billed_cost=d("0"),
                 effective_cost=d("80"), list_cost=d("120")),
            line(3, commitment_discount_id=pool.replace("gcp-cud/", "gcp-cud-unused/"),
                 commitment_discount_status="Unused", billed_cost=billed, effective_cost=d("20"), list_cost=d("0"))]


def test_an_unused_commitment_billed_as_its_own_line_bridges_as_its_focus_twin():
    """Before (cloudgen gke 10102 with commitments, native export): commitment_purchases 1047.94,
    purchases_amortised −1047.94 and unused_commitment 0.00, against 1309.91, −1309.91 and 261.97 in
    the FOCUS twin of the same fees. Here: 80 / −80 / 0 before, 100 / −100 / 20 now, as FOCUS's."""
    native, focus = (dict((s.key, s.amount) for s in bridge(lines_frame(fee_lines(n))).steps) for n in (True, False))
    assert native == focus
    assert [native[k] for k in ("list", "commitment_purchases", "billed", "amortised_commitment", "unused_commitment",
                                "purchases_amortised", "effective")] == [Decimal(v) for v in (120, 100, 100, 80, 20,
                                                                                             -100, 100)]


def test_a_purchase_without_amortisation_leaves_the_others_measured_and_is_named():
    """A reservation's covered usage carries 1574.48 of amortisation; a savings plan bought (1000) and
    partly refunded (−400) has no line of its own in scope. Before (cloudgen aks 10105 with that plan):
    amortised_commitment null. Now 1574.48, measured, and ``lacks`` names the plan's two lines."""
    reservation = "/providers/Microsoft.Capacity/reservationOrders/o/reservations/r"
    rows = [line(1, commitment_discount_id=reservation, commitment_discount_status="Used", billed_cost=Decimal(0),
                 effective_cost=Decimal("1574.48")),
            line(2, charge_category="Purchase", commitment_discount_id=SAVINGS_PLAN, billed_cost=Decimal(1000),
                 effective_cost=Decimal(0)),
            line(3, charge_category="Purchase", commitment_discount_id=SAVINGS_PLAN, billed_cost=Decimal(-400),
                 effective_cost=Decimal(0))]
    found = {s.key: s for s in bridge(lines_frame(rows)).steps}
    step = found["amortised_commitment"]
    assert (step.amount, step.reason) == (Decimal("1574.48"), None)
    assert step.lacks.startswith("2 commitment purchase line(s) (inline.csv:2, inline.csv:3), billed 600.00, leave "
                                 "the effective basis (EffectiveCost 0) and no in-scope line carries their amortisation")
    assert (found["commitment_purchases"].amount, found["purchases_amortised"].amount) == (Decimal(600), Decimal(-600))
    assert found["effective"].amount == Decimal("1574.48")
