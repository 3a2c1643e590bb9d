"""Property test of the committed-use-discount mapping (connectors.billing.gcp_commitments) on random
aggregated export rows: resource- and spend-based fee rows and covered usage in several pools and
days, spend-based fees with the offset credit of the 2025 data model, credits that meet no fee,
money with nine decimal places of either size. Whatever the rows, the FOCUS rows keep every cent
of the invoice on both bases (and the usage's list cost on the list basis), each pool's fees are exactly its Purchase and Unused rows, the covered
rows' amortised shares add up exactly to the Purchase, and nothing is negative that cannot be."""
from __future__ import annotations

from collections import defaultdict
from datetime import datetime, timedelta, timezone
from decimal import Decimal

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.billing.gcp_billing import CREDIT_COLUMNS, focus_table
from connectors.billing.gcp_sql import CONVERSION_RATE, GCP_KEYS, GCP_SUMS, LIST_COST

DAY = datetime(2026, 9, 1, tzinfo=timezone.utc)
NANO = Decimal("0.000000001")
FAMILIES = {  # fee SKU -> the usage SKU it covers
    "Commitment v1: Nvidia H100 80GB GPU running in Americas for 1 Year": "Nvidia H100 80GB GPU running in Americas",
    "Commitment v1: N2 Cpu in Americas for 3 Years": "N2 Instance Core running in Americas",
}
PROJECTS = st.sampled_from(["acme", "beta"])  # GCP attributes a shared commitment's fee to projects
SPEND_FEE = "Commitment - dollar based v1: GCE for 1 year"
SPEND_USAGE = "E2 Instance Core running in Americas"
money = st.integers(1, 10**17).map(lambda n: Decimal(n) * NANO)
fraction = st.integers(1, 1000).map(lambda n: Decimal(n) / 1000)


@st.composite
def export(draw) -> list[dict]:
    """Rows of ``agg_canonical``: per pool and hour some fees and covered rows, and plain rows."""
    rows = []
    for number, (fee_sku, usage_sku) in enumerate(FAMILIES.items()):
        for hour in draw(st.lists(st.integers(0, 47), max_size=4, unique=True)):
            for fee in range(draw(st.integers(0, 2))):
                rows.append(row(hour, fee_sku, f"fee-{fee}", draw(money), Decimal(3600 * draw(st.integers(1, 16))),
                                project=draw(PROJECTS)))
            for machine in range(draw(st.integers(0, 3))):
                cost = draw(money)
                covered = draw(st.sampled_from([Decimal(0), Decimal(1), draw(fraction)]))
                rows.append(row(hour, usage_sku, f"vm-{number}-{machine}", cost, Decimal(3600 * draw(st.integers(1, 8))),
                                credit=-(cost * covered).quantize(NANO)))
    for hour in draw(st.lists(st.integers(0, 47), max_size=4, unique=True)):
        for _ in range(draw(st.integers(0, 2))):
            committed = Decimal(draw(st.integers(0, 10**6)))  # hundredths of a dollar of on-demand spend
            offset = draw(st.sampled_from([Decimal(0), -draw(money)]))
            amount = draw(money)
            rows.append(row(hour, SPEND_FEE, "", amount + (-offset), Decimal(3600), committed=committed,
                            offset=offset, project=draw(PROJECTS)))
        for machine in range(draw(st.integers(0, 3))):
            cost = draw(money)
            covered = draw(st.sampled_from([Decimal(0), Decimal(1), draw(fraction)]))
            rows.append(row(hour, SPEND_USAGE, f"vm-e2-{machine}", cost, Decimal(3600),
                            spend=-(cost * covered).quantize(NANO)))
    rows.append(row(0, "Nvidia L4 GPU running in Americas", "vm-l4", Decimal("3.5"), Decimal(3600), credit=Decimal("-1")))
    return rows


def row(hour: int, sku: str, resource: str, cost: Decimal, amount: Decimal, credit: Decimal = Decimal(0),
        spend: Decimal = Decimal(0), committed: Decimal | None = None, offset: Decimal = Decimal(0),
        project: str = "acme") -> dict:
    start = DAY + timedelta(hours=hour)
    out = {key: "" for key in GCP_KEYS}
    out.update(bucket=start, billing_account_id="01A2B3-C4D5E6-F7A8B9", project_id=project, service_id="6F81",
               service_description="Compute Engine", sku_id=sku[:12], sku_description=sku, resource_name=resource,
               region="us-central1", cost_type="regular", currency="USD", invoice_month="202609",
               usage_unit="seconds", pricing_unit="hour", labels="{}", period_start=start,
               period_end=start + timedelta(hours=1), cost=cost, usage_amount=amount,
               pricing_quantity=amount / 3600 if committed is None else committed,
               credit_total=credit + spend + offset, export_rows=1)
    out.update({column: Decimal(0) for column in CREDIT_COLUMNS})
    out.update(credit_committed_usage_discount=credit, credit_committed_usage_discount_dollar_base=spend,
               credit_fee_utilization_offset=offset)
    out[CONVERSION_RATE] = Decimal(1)
    out[LIST_COST] = cost  # the export's cost_at_list: on-demand, before every credit
    return out


def mapped(rows: list[dict]) -> list[dict]:
    """The gcp_focus rows of ``rows`` (as ``agg_canonical``)."""
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    money_columns = [*GCP_SUMS, *CREDIT_COLUMNS, LIST_COST]
    columns = ([f"{k} TIMESTAMPTZ" if k == "bucket" else f"{k} VARCHAR" for k in GCP_KEYS]
               + ["period_start TIMESTAMPTZ", "period_end TIMESTAMPTZ"]
               + [f"{c} DECIMAL(38, 9)" for c in money_columns] + ["export_rows BIGINT", f"{CONVERSION_RATE} DECIMAL(38, 9)"])
    con.execute(f"CREATE TABLE agg_canonical ({', '.join(columns)})")
    names = [c.split()[0] for c in columns]
    con.executemany(f"INSERT INTO agg_canonical VALUES ({', '.join('?' for _ in names)})",
                    [[r[n] for n in names] for r in rows])
    focus_table(con)
    cursor = con.execute("SELECT * FROM gcp_focus")
    header = [d[0] for d in cursor.description]
    return [dict(zip(header, values)) for values in cursor.fetchall()]


@settings(max_examples=60, deadline=None)
@given(export())
def test_every_cent_kept_and_each_pool_s_fees_exactly_its_purchase_and_unused_rows(rows):
    out = mapped(rows)
    invoice = sum((r["cost"] + r["credit_total"] for r in rows), Decimal(0))
    assert sum((r["BilledCost"] for r in out), Decimal(0)) == invoice
    assert sum((r["EffectiveCost"] for r in out), Decimal(0)) == invoice
    # the list basis: the usage's own list costs; fees (Purchase, Unused) and credits list 0
    usage_list = sum((r[LIST_COST] for r in rows if r["sku_description"] not in (*FAMILIES, SPEND_FEE)), Decimal(0))
    assert sum((r["ListCost"] for r in out), Decimal(0)) == usage_list
    fees: dict[tuple, Decimal] = defaultdict(Decimal)
    project_fees: dict[tuple, Decimal] = defaultdict(Decimal)
    for r in rows:
        if r["sku_description"] in FAMILIES or r["sku_description"] == SPEND_FEE:  # an offset is the fee's own
            fees[(r["sku_description"], r["bucket"].date())] += r["cost"] + r["credit_fee_utilization_offset"]
            project_fees[(r["sku_description"], r["bucket"].date(), r["project_id"])] += (
                r["cost"] + r["credit_fee_utilization_offset"])
    booked: dict[tuple, Decimal] = defaultdict(Decimal)
    project_booked: dict[tuple, Decimal] = defaultdict(Decimal)
    purchases: dict[str, Decimal] = defaultdict(Decimal)
    shares: dict[str, Decimal] = defaultdict(Decimal)
    for r in out:
        if r["ChargeCategory"] == "Purchase" or r["CommitmentDiscountStatus"] == "Unused":
            sku = r["ChargeDescription"].removeprefix("Unused: ")
            booked[(sku, r["ChargePeriodStart"].date())] += r["BilledCost"]
            project_booked[(sku, r["ChargePeriodStart"].date(), r["SubAccountId"])] += r["BilledCost"]
            assert r["BilledCost"] >= 0
        if r["ChargeCategory"] == "Purchase":
            assert r["EffectiveCost"] == 0
            purchases[f"{r['CommitmentDiscountId']}|{r['ChargePeriodStart'].date()}"] += r["BilledCost"]
        if r["CommitmentDiscountStatus"] == "Used":
            assert r["EffectiveCost"] >= r["BilledCost"]
            shares[f"{r['CommitmentDiscountId']}|{r['ChargePeriodStart'].date()}"] += r["EffectiveCost"] - r["BilledCost"]
        if r["ChargeCategory"] == "Usage" and r["ChargeDescription"] in (*FAMILIES, SPEND_FEE):
            raise AssertionError(f"a fee row stayed usage: {r}")
        if r["x_CreditType"] == "FEE_UTILIZATION_OFFSET":
            raise AssertionError(f"an offset credit left its fee: {r}")
    assert dict(booked) == {k: v for k, v in fees.items() if v}
    # each project's part of a pool's Purchase and Unused rows: its share of the fees, to the two cut
    # bounds (used and unused), each rounded to 9 places from the exact ratio: within two billionths.
    # (In DOUBLE, 53 bits, it was within 2^-50 of the pool's fees: a few billionths at 10^8.)
    for key in set(project_fees) | set(project_booked):
        assert abs(project_fees[key] - project_booked[key]) <= 2 * NANO, key
    assert {k: v for k, v in purchases.items() if v} == {k: v for k, v in shares.items() if v}


def test_a_fully_used_commitment_leaves_no_unused_row_and_a_credit_without_a_fee_stays_as_it_was():
    """The day's fee covered more than committed: all of it is shares; the next day has no fee."""
    h100 = list(FAMILIES)[0]
    rows = [row(1, h100, "fee", Decimal("44.000000001"), Decimal(8 * 3600)),
            row(1, FAMILIES[h100], "vm-a", Decimal("10.5"), Decimal(4 * 3600), credit=Decimal("-10.5")),
            row(1, FAMILIES[h100], "vm-b", Decimal("10.5"), Decimal(4 * 3600), credit=Decimal("-10.5")),
            row(30, FAMILIES[h100], "vm-c", Decimal("10.5"), Decimal(4 * 3600), credit=Decimal("-10.5"))]
    out = mapped(rows)
    assert not [r for r in out if r["CommitmentDiscountStatus"] == "Unused"]
    used = [r for r in out if r["CommitmentDiscountStatus"] == "Used"]
    assert sorted(r["ResourceId"] for r in used) == ["vm-a", "vm-b"]
    assert sum((r["EffectiveCost"] - r["BilledCost"] for r in used), Decimal(0)) == Decimal("44.000000001")
    alone = next(r for r in out if r["ResourceId"] == "vm-c" and r["ChargeCategory"] == "Usage")
    assert alone["EffectiveCost"] == alone["BilledCost"] == Decimal("10.5") and alone["CommitmentDiscountId"] is None
