"""Azure reservations on the billed basis, end to end (cloudgen aks seed 7102, EA cost details, and
seed 7105, Microsoft's FOCUS export; both with an H100 and an A100 reservation, the A100 partly unused).

* The ActualCost export (covered usage costs 0, the two reservation orders' purchases carry the
  price, 1415.808 + 211.5648): the purchases move onto their reservations' usage, so that usage is
  priced at the spread amount ÷ quantity (before: at its contracted price, gap −26.7 %,
  does_not_reconcile), and the purchase lines are no unclassed charge (before: a ``lines_unmatched``
  warning, "2 charge line(s) in scope, 1627.37 USD (40.3% of the charges)").
* The AmortizedCost export and the FOCUS export on the billed basis have no purchase: the reserved
  VMs cost 0 there. Before, the audit said does_not_reconcile (gap −1.267) with no word why; now a
  note, a fit warning and the reconciliation's reason name what the billed total lacks.
* The ActualCost export without one commitment's purchase (bought upfront in an earlier month, or in
  another subscription): its covered usage costs 0 on both bases. Before, nothing named it; now the
  same warning, note and reason name it at its contracted price, and the price driver names the line.
"""
from __future__ import annotations

import csv
import shutil
from decimal import Decimal
from pathlib import Path

import pytest

from benchmarks.cloudgen.generate import generate
from benchmarks.cloudgen_check import audit_document
from tests.builders import generated

AMORTIZED = "ea_amortized_2026-09.csv"
A100_ORDER = "/providers/Microsoft.Capacity/reservationOrders/6e7c1675-8238-b424-c36c-4428fabfbbd5"
H100_ORDER = "/providers/Microsoft.Capacity/reservationOrders/c8961329-a840-1867-bd54-ad4f83b7167e"
A100 = f"{A100_ORDER}/reservations/1a70cbf3-f292-f0d0-b084-da274672d961"
H100 = f"{H100_ORDER}/reservations/44babc7e-5012-9c8d-a485-26293d5bf00c"
#: the purchase fields a reservation order's Purchase row copies from its covered usage row
PURCHASE_KEEPS = ("BillingAccountId", "BillingAccountName", "BillingPeriodStartDate", "BillingPeriodEndDate",
                  "BillingProfileId", "BillingProfileName", "SubscriptionId", "SubscriptionName", "Date",
                  "MeterCategory", "MeterSubCategory", "MeterName", "BillingCurrency", "UnitOfMeasure")


@pytest.fixture(scope="module")
def aks(tmp_path_factory) -> Path:
    """cloudgen's AKS day with reservations, its EA AmortizedCost export."""
    return generated(tmp_path_factory, "aks7102", "aks", 7102, billing="native", commitments=True)


def variant(base: Path, target: Path, rows: list[dict] | None, file: str, view: str) -> Path:
    """A copy of the case on the billed basis, its export replaced by ``rows`` (None: kept)."""
    shutil.copytree(base, target)
    case = (target / "case.toml").read_text(encoding="utf-8")
    case = case.replace('cost_basis = "effective"', 'cost_basis = "billed"')
    if rows is not None:
        (target / "billing" / AMORTIZED).unlink()
        with open(target / "billing" / file, "w", encoding="utf-8", newline="") as handle:
            writer = csv.DictWriter(handle, list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)
        case = case.replace(f"billing/{AMORTIZED}", f"billing/{file}").replace('view = "amortized"', f'view = "{view}"')
    (target / "case.toml").write_text(case, encoding="utf-8")
    return target


def actual_rows(aks: Path) -> list[dict]:
    """The ActualCost export of the same day: covered usage at 0, no UnusedReservation row, and each
    reservation order's purchase (its covered usage and unused share) as EA writes it."""
    with open(aks / "billing" / AMORTIZED, encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    out, bought, template = [], {}, {}
    for row in rows:
        order = row["benefitId"].rsplit("/reservations/", 1)[0]
        if row["ChargeType"] == "UnusedReservation":
            bought[order] += Decimal(row["Cost"])
            continue
        if row["PricingModel"] == "Reservation":
            bought[order] = bought.get(order, Decimal(0)) + Decimal(row["Cost"])
            template[order] = row
            row = {**row, "Cost": "0", "EffectivePrice": "0"}
        out.append(row)
    for order, amount in bought.items():
        purchase = {k: template[order][k] if k in PURCHASE_KEEPS else "" for k in template[order]}
        purchase.update(Quantity="1", Cost=str(amount), EffectivePrice=str(amount), UnitPrice=str(amount),
                        ChargeType="Purchase", Frequency="Recurring", PricingModel="Reservation", PayGPrice="0",
                        ConsumedService="Microsoft.Capacity", ResourceId=f"{order}/reservations/",
                        ReservationId=order.rsplit("/", 1)[1], benefitId=f"{order}/reservations/")
        out.append(purchase)
    return out


def reconciliation(document: dict) -> tuple[str, str, str, str, str]:
    """The reconciliation's verdict, gap, top-down and bottom-up totals, and reason."""
    recon = document["reconciliation"]
    return recon["verdict"], recon["gap"], recon["top_down"], recon["bottom_up"], recon["reason"]


def lacks_at_contracted(basis: str, usage: str, commitments: str) -> str:
    """What the ``basis`` total lacks: the purchases behind covered ``usage`` (its contracted price)
    that no in-scope line carries, of ``commitments``."""
    return (f"the {basis} total lacks the purchases behind commitment-covered usage of {usage} at its contracted "
            f"price, whose amortised cost no line shows (commitment(s) {commitments})")


def lacking_reason(gap: str, lacks: str, basis: str) -> str:
    """The reason a reconciliation gives for its ``gap`` where the ``basis`` total ``lacks`` purchases."""
    return (f"|gap| {gap} > tolerance 0.02; {lacks}: their usage costs 0 on the {basis} basis while the bottom-up "
            "prices it (fit commitment_purchases_missing)")


def price_detail(document: dict, subject: str) -> str:
    return next(d["detail"] for d in document["reconciliation"]["drivers"]
                if d["name"] == "price" and d["subject"] == subject)


@pytest.fixture(scope="module")
def actual(aks, tmp_path_factory) -> dict:
    """audit.json of the ActualCost export on the billed basis."""
    rows = actual_rows(aks)
    assert [r["Cost"] for r in rows if r["ChargeType"] == "Purchase"] == ["1415.808", "211.5648"]
    return audit_document(variant(aks, tmp_path_factory.mktemp("actual") / "case", rows, "ea_actual.csv", "actual"))


def test_the_actualcost_export_reconciles_with_its_purchases_on_their_reservations(actual):
    recon = actual["reconciliation"]
    assert (recon["verdict"], recon["top_down"], recon["bottom_up"], recon["gap"]) == (
        "reconciles", "3739.57", "3739.56", "0.000003")
    assert price_detail(actual, "gpu_compute") == (
        "cost 3987.05 vs quantity × unit price 3987.05; 4 commitment-covered line(s) priced at their commitment rate "
        "(the commitment purchase spread onto them ÷ quantity: the contracted price excludes the commitment discount)")


def test_purchases_moved_onto_their_reservations_are_no_unmatched_charge(actual):
    """gpu_compute nets 3987.05 = 2359.68 on demand + 1415.808 + 211.5648 purchased; before, the fit
    also warned that the two purchases, 1627.37 USD (40.3% of the charges), were unattributed."""
    assert next(c["net"] for c in actual["classes"] if c["class"] == "gpu_compute") == "3987.05"
    assert actual["fit"] == []
    assert not any(p["name"] == "unmatched" for p in actual["buckets"]["unattributed"]["parts"])


@pytest.mark.parametrize("export", ["amortized", "focus"])
def test_a_billed_basis_without_the_purchases_names_what_it_lacks(aks, tmp_path, export):
    if export == "focus":
        base = tmp_path / "focus"
        generate("aks", 7105, base, billing="focus", commitments=True)
        case = variant(base, tmp_path / "billed", None, "", "")
        gap = "-1.255419"
    else:
        case = variant(aks, tmp_path / "billed", None, "", "")
        gap = "-1.267404"
    document = audit_document(case)
    lacks = ("the billed total lacks the purchases behind 1574.48 of commitment-covered usage and 52.89 of unused "
             f"commitment (commitment(s) {A100}, {H100})")
    recon = document["reconciliation"]
    assert (recon["verdict"], recon["gap"]) == ("does_not_reconcile", gap)
    assert recon["reason"] == lacking_reason(f"{abs(Decimal(gap)):.4f}", lacks, "billed")
    why = (f"{lacks}: 5 commitment-covered or unused line(s) are billed 0 (invoiced through their commitment's "
           "purchase) and no in-scope purchase line of their commitment carries a price, so on the billed basis that "
           "usage costs 0. An export of the amortised view (Azure's AmortizedCost export, Microsoft's FOCUS export) "
           "shows a commitment's amortisation but not its purchase, and a purchase paid upfront was billed in the "
           "month it was bought. Read the billed view with its purchases (Azure: the ActualCost export, whose "
           "purchase lines carry the price), or audit on the effective basis")
    assert [(f["kind"], f["subject"], f["message"], f["nearest"]) for f in document["fit"]] == [
        ("commitment_purchases_missing", "[case] cost_basis billed", f"[case] cost_basis billed: {why}", ["effective"])]
    assert f"Commitment purchases missing from the billed basis: {why}." in document["notes"]
    assert document["bridge"]["commitment_purchases"] == "0.00"  # what the lines say; the note says what it lacks


#: a savings plan under its order, as Azure names one (benefitId)
SAVINGS_PLAN = ("/providers/Microsoft.BillingBenefits/savingsPlanOrders/aaaa1111-0000-0000-0000-000000000001/"
                "savingsPlans/bbbb2222-0000-0000-0000-000000000002")


def without_h100_purchase(rows: list[dict], savings_plan: bool) -> list[dict]:
    """The ActualCost rows without the H100 reservation order's purchase; with ``savings_plan`` its
    covered usage made a savings plan's (PricingModel SavingsPlan, the plan's benefitId)."""
    out = []
    for row in rows:
        if row["benefitId"].startswith(H100_ORDER):
            if row["ChargeType"] == "Purchase":
                continue
            if savings_plan:
                row = {**row, "PricingModel": "SavingsPlan", "ReservationId": "", "ReservationName": "",
                       "benefitId": SAVINGS_PLAN}
        out.append(row)
    return out


@pytest.mark.parametrize("savings_plan", [False, True])
def test_an_actualcost_export_without_a_purchase_names_what_it_lacks(aks, tmp_path, savings_plan):
    """The ActualCost export with the H100 commitment's purchase left out (bought upfront in an
    earlier month, or in another subscription): its covered usage costs 0 on both bases and its
    amortised cost (1415.81) is in no line. Before, the fit was empty, the price driver named only the
    3 lines the A100 purchase reached and the reason said only '|gap| 1.0154 > tolerance 0.02' (a
    verifier's find on cloudgen aks 7703, the H100 reservation made a savings plan: gap −1.010305).
    Now the covered line is named at its contracted price, 2359.68 (24 h × 98.32), with its commitment,
    in the fit, a note, the reconciliation's reason and the price driver."""
    commitment = SAVINGS_PLAN if savings_plan else H100
    rows = without_h100_purchase(actual_rows(aks), savings_plan)
    document = audit_document(variant(aks, tmp_path / "case", rows, "ea_actual.csv", "actual"))
    lacks = lacks_at_contracted("billed", "2359.68", commitment)
    assert reconciliation(document) == (
        "does_not_reconcile", "-1.015449", "2323.76", "4683.43", lacking_reason("1.0154", lacks, "billed"))
    why = (f"{lacks}: 1 commitment-covered line(s) cost 0 on both the billed and the effective basis and no in-scope "
           "line of their commitment carries a price or an amortisation (no purchase, no unused commitment), so that "
           "usage costs 0 and what it cost is in no line. An export of the billed view (Azure's ActualCost export) "
           "bills covered usage 0 and its commitment through the purchase, and a purchase paid upfront in an "
           "earlier month or bought in another subscription is not in it. Read the purchase with this export (the "
           "month's or the subscription's export that holds it), or the amortised view (Azure: the AmortizedCost "
           "export) on the effective basis")
    assert [(f["kind"], f["subject"], f["message"], f["nearest"]) for f in document["fit"]] == [
        ("commitment_purchases_missing", "[case] cost_basis billed", f"[case] cost_basis billed: {why}", [commitment])]
    assert f"Commitment purchases missing from the billed basis: {why}." in document["notes"]
    assert price_detail(document, "gpu_compute") == (
        "cost 2571.24 vs quantity × unit price 4930.92; 3 commitment-covered line(s) priced at their commitment rate "
        "(the commitment purchase spread onto them ÷ quantity: the contracted price excludes the commitment "
        "discount); 1 commitment-covered line(s) cost 0 for want of their commitment's purchase in scope, priced at "
        "their contracted price (fit commitment_purchases_missing)")


def test_the_effective_basis_names_covered_usage_no_purchase_or_amortisation_prices(aks, tmp_path):
    """The same ActualCost export without the H100 purchase, on the effective basis: the covered line
    costs 0 on both bases, so the effective total lacks it too. Before, the fit was empty, no note named
    it and the reconciliation said "reconciles" (gap 0.000001: both sides priced the 24 H100 hours at
    their effective rate, 0); now the warning, the note, the reason and the price driver name it at its
    contracted price, 2359.68, and the bottom-up prices it there."""
    variant(aks, tmp_path / "case", without_h100_purchase(actual_rows(aks), False), "ea_actual.csv", "actual")
    case = (tmp_path / "case" / "case.toml").read_text(encoding="utf-8")
    (tmp_path / "case" / "case.toml").write_text(case.replace('cost_basis = "billed"', 'cost_basis = "effective"'),
                                                 encoding="utf-8")
    document = audit_document(tmp_path / "case")
    lacks = lacks_at_contracted("effective", "2359.68", H100)
    assert reconciliation(document) == (
        "does_not_reconcile", "-1.117160", "2112.20", "4471.86", lacking_reason("1.1172", lacks, "effective"))
    assert [(f["kind"], f["subject"], f["nearest"]) for f in document["fit"]] == [
        ("commitment_purchases_missing", "[case] cost_basis effective", [H100])]
    assert document["fit"][0]["message"].startswith(f"[case] cost_basis effective: {lacks}: 1 commitment-covered")
    assert any(n.startswith(f"Commitment purchases missing from the effective basis: {lacks}: ")
               for n in document["notes"])
    assert price_detail(document, "gpu_compute").endswith(
        "; 1 commitment-covered line(s) cost 0 for want of their commitment's purchase in scope, priced at their "
        "contracted price (fit commitment_purchases_missing)")


def test_purchases_the_scope_leaves_out_are_named_as_the_nearest(aks, tmp_path):
    """The ActualCost export with both purchase rows' SubscriptionId empty (a verifier's find on aks
    8501): they fall outside [scope].accounts, and the warning said the export lacked the purchases
    it holds. Now it names those rows, their amounts and the scope rule that leaves them out."""
    rows = [{**r, "SubscriptionId": "", "SubscriptionName": ""} if r["ChargeType"] == "Purchase" else r
            for r in actual_rows(aks)]
    document = audit_document(variant(aks, tmp_path / "case", rows, "ea_actual.csv", "actual"))
    [found] = document["fit"]
    assert (found["kind"], found["nearest"]) == ("commitment_purchases_missing", ["ea_actual.csv:16", "ea_actual.csv:17"])
    lacks = lacks_at_contracted("billed", "2624.14", f"{A100}, {H100}")
    assert found["message"].startswith(
        f"[case] cost_basis billed: {lacks}: 4 commitment-covered line(s) cost 0 on both the billed and the effective "
        "basis")
    assert found["message"].endswith(
        "on the effective basis. The data does hold 2 purchase line(s) of these commitment(s) outside the scope: "
        "ea_actual.csv:16 (1415.81 USD billed), ea_actual.csv:17 (211.56 USD billed), left out by [scope].accounts = "
        "['/subscriptions/28d9fa8e-4961-7e0d-8314-fa811f10c638'] (their account(s): 8611537 (SubAccountId empty))")


def test_purchases_outside_the_window_are_named_as_the_nearest(aks, tmp_path):
    """The ActualCost export with both purchase rows dated 09/15, in the file but outside the one-day
    window (a verifier's find on aks 9213): the reader dropped them with the other rows outside the
    window, and the warning said the export had no purchase. Now the reader keeps them per commitment
    (table purchases_outside) and the warning names those rows, their dates and amounts."""
    rows = actual_rows(aks)
    assert {r["Date"] for r in rows if r["ChargeType"] == "Purchase"} == {"09/01/2026"}
    rows = [{**r, "Date": "09/15/2026"} if r["ChargeType"] == "Purchase" else r for r in rows]
    document = audit_document(variant(aks, tmp_path / "case", rows, "ea_actual.csv", "actual"))
    [found] = document["fit"]
    assert (found["kind"], found["nearest"]) == ("commitment_purchases_missing", ["ea_actual.csv:16", "ea_actual.csv:17"])
    assert found["message"].endswith(
        "on the effective basis. The data does hold 2 purchase row(s) of these commitment(s) outside the window: "
        "ea_actual.csv:16 (2026-09-15, 1415.81 USD billed), ea_actual.csv:17 (2026-09-15, 211.56 USD billed)")


def with_a100_refund(rows: list[dict]) -> list[dict]:
    """The rows and a refund of 100 naming the A100 reservation (returned or exchanged), as EA writes it."""
    template = next(r for r in rows if r["benefitId"] == A100 and r["ChargeType"] == "Usage")
    refund = {k: template[k] if k in PURCHASE_KEEPS else "" for k in template}
    refund.update(Quantity="1", Cost="-100", EffectivePrice="100", UnitPrice="100", ChargeType="Refund",
                  Frequency="OneTime", PricingModel="Reservation", PayGPrice="0", ConsumedService="Microsoft.Capacity",
                  ReservationId=A100.rsplit("/", 1)[1], benefitId=A100)
    return rows + [refund]


def test_a_commitment_refund_moves_onto_the_reservation_it_names(aks, tmp_path):
    """The ActualCost export with a refund of 100 naming the A100 reservation, on the billed basis: a
    negative purchase, it moves onto the A100 reservation's usage (embed's GPUs) as the A100 purchase
    does, and sits in the bridge's commitment purchases (1415.808 + 211.5648 − 100)."""
    document = audit_document(variant(aks, tmp_path / "case", with_a100_refund(actual_rows(aks)), "ea_actual.csv",
                                      "actual"))
    assert document["bridge"]["commitment_purchases"] == "1527.37"
    assert document["bridge"]["other_billed_to_effective"] == "0.00"
    assert next(c["net"] for c in document["classes"] if c["class"] == "gpu_compute") == "3887.05"  # 3987.05 − 100
    parts = {p["id"]: p["amount"] for b in document["buckets"].values() for p in b.get("parts", ())}
    # embed's A100s and the free A100 (unallocated), without the refund 77.69, 63.36 and 586.70: a third
    # of the −100 on each of the reservation's 3 lines; chat's H100s as without it
    assert [parts[k] for k in ("platform_overhead.idle_not_separated/embed", "unattributed.no_kernel_profile/embed",
                               "platform_overhead.unallocated/-")] == ["40.97", "33.41", "553.37"]
    assert document["services"]["chat"]["by_bucket"] == {
        "model_compute": "1368.78", "serving_path": "127.55", "platform_overhead": "1209.92"}
    assert document["fit"] == []


def test_a_commitment_refund_is_no_part_of_the_contracted_basis(aks, tmp_path):
    """The AmortizedCost export with the same refund, on the contracted basis: the total is the usage at
    UnitPrice × Quantity, as without the refund. Before: 4931.29, the refund inside the contracted total."""
    with open(aks / "billing" / AMORTIZED, encoding="utf-8-sig", newline="") as handle:
        rows = list(csv.DictReader(handle))
    variant(aks, tmp_path / "case", with_a100_refund(rows), "ea_amortized_refund.csv", "amortized")
    case = (tmp_path / "case" / "case.toml").read_text(encoding="utf-8")
    (tmp_path / "case" / "case.toml").write_text(case.replace('cost_basis = "billed"', 'cost_basis = "contracted"'),
                                                 encoding="utf-8")
    document = audit_document(tmp_path / "case")
    # 5031.295524625 = Σ UnitPrice × Quantity of the in-scope usage rows (the total rounded with the lines
    # outside the scope, by largest remainder); the refund is the amortised export's one commitment transaction
    assert (document["total"], document["bridge"]["contracted"], document["bridge"]["commitment_purchases"]) == (
        "5031.29", "5031.29", "-100.00")


def amortized_rows(aks: Path) -> list[dict]:
    with open(aks / "billing" / AMORTIZED, encoding="utf-8-sig", newline="") as handle:
        return list(csv.DictReader(handle))


def with_monthly_purchases(aks: Path) -> list[dict]:
    """The AmortizedCost rows and each reservation order's Purchase row for 30 days (Microsoft's FOCUS
    recipe: the amortised rows plus the actual data's purchases), 30 × 1415.808 and 30 × 211.5648."""
    purchases = [{**r, **{k: str(Decimal(r[k]) * 30) for k in ("Cost", "UnitPrice", "EffectivePrice")}}
                 for r in actual_rows(aks) if r["ChargeType"] == "Purchase"]
    return amortized_rows(aks) + purchases


def test_unused_commitment_on_the_billed_basis_is_priced_at_the_purchase_spread_onto_it(aks, tmp_path):
    """The AmortizedCost export with its 30-day purchases, on the billed basis: the A100 purchase spread
    onto the day's UnusedReservation line, 1586.736 (a quarter of 6346.944), is its billed cost. Before,
    it was priced at its quantity × unit price, 52.89: "commitment_unused: cost 1586.74 vs quantity × unit
    price 52.89, gap 0.966667", does_not_reconcile (gap 0.030158 on cloudgen aks 10504)."""
    rows = with_monthly_purchases(aks)
    document = audit_document(variant(aks, tmp_path / "case", rows, "ea_both.csv", "amortized"))
    assert price_detail(document, "commitment_unused") == (
        "cost 1586.74 vs quantity × unit price 1586.74; 1 unused commitment line(s) priced at the commitment "
        "purchase spread onto them (their quantity × unit price prices no purchase)")
    assert reconciliation(document)[:2] == ("reconciles", "0.000005")


def with_marketplace_row(rows: list[dict]) -> list[dict]:
    """The rows and a Marketplace row on the first on-demand H100 VM: NVIDIA AI Enterprise, 192 GPU-hours,
    UnitPrice, EffectivePrice and PayGPrice 0, cost 192.00 (AdditionalInfo kept: its VMName)."""
    h100 = next(r for r in rows if r["PricingModel"] == "OnDemand" and "H100" in r["MeterSubCategory"])
    return rows + [{**h100, "MeterCategory": "NVIDIA AI Enterprise", "MeterSubCategory": "",
                    "MeterName": "NVAIE per GPU hour", "PublisherType": "Marketplace", "PublisherName": "NVIDIA",
                    "Quantity": "192", "UnitPrice": "0", "EffectivePrice": "0", "PayGPrice": "0", "Cost": "192.00",
                    "ServiceFamily": "", "MeterId": ""}]


def test_a_marketplace_row_priced_0_is_taken_at_its_cost_bottom_up(aks, tmp_path):
    """A Marketplace row priced 0 with a cost of 192.00 on the effective basis: the money lands on the
    H100 VM, and the Azure reader's ContractedCost takes the row at its cost. Before, the bottom-up priced
    it at 192 × 0: "gpu_compute: cost 4126.16 vs quantity × unit price 3934.16, gap 0.046532",
    does_not_reconcile (0.043 on cloudgen aks 10504); now at its cost, named in the driver."""
    variant(aks, tmp_path / "case", with_marketplace_row(amortized_rows(aks)), "ea_mkt.csv", "amortized")
    case = (tmp_path / "case" / "case.toml").read_text(encoding="utf-8")
    (tmp_path / "case" / "case.toml").write_text(case.replace('cost_basis = "billed"', 'cost_basis = "effective"'),
                                                 encoding="utf-8")
    document = audit_document(tmp_path / "case")
    assert price_detail(document, "gpu_compute") == (
        "cost 4126.16 vs quantity × unit price 4126.16; 1 line(s) of unit price 0 with a cost taken at that cost, "
        "192.00 (a price of 0 is no measured unit price: an Azure Marketplace row's, whose ContractedCost is its "
        "cost too); 4 commitment-covered line(s) priced at their effective rate (EffectiveCost ÷ quantity: the "
        "contracted price excludes the commitment discount)")
    assert reconciliation(document)[:2] == ("reconciles", "0.000003")
