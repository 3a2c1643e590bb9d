"""AzureExportConnector: the real EA exports (actual, amortised, CAD), a synthetic MCA amortised GPU
export, views, units, tags, GPU recognition, bad input; Microsoft's FocusCost through the focus connector."""
from __future__ import annotations

import csv
import json
from datetime import datetime, timezone
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from audit.classify import classify
from connectors.base import ReadContext, SourceSpec
from connectors.billing.azure import AzureExportConnector
from connectors.billing.focus import FocusConnector
from connectors.errors import InputError, InputErrors
from connectors.registry import resolve
from schemas.billing import line_total
from tests.paths import DATA, FIXTURES

BILLING = DATA / "billing"
TOOLKIT = BILLING / "msft_finops_toolkit"
ACTUAL = TOOLKIT / "EA_ActualCost_Small.csv"
AMORTISED = TOOLKIT / "EA_AmortizedCost_Small.csv"
CAD = BILLING / "focus_converters" / "azure_ea_anonymized_cad.csv"
MCA = FIXTURES / "azure_synthetic" / "mca_amortized_gpu.csv"
SIX = Decimal("0.000001")


def utc(*parts: int) -> datetime:
    """A tz-aware UTC datetime."""
    return datetime(*parts, tzinfo=timezone.utc)


def read(path: Path, currency: str = "USD", start=utc(2000, 1, 1), end=utc(2100, 1, 1), **options):
    """Read ``path`` through the base read() (validation included)."""
    spec = SourceSpec(name="azure", kind="billing", format="azure", path=Path(path), options=options)
    return AzureExportConnector(spec, ReadContext(start=start, end=end, currency=currency)).read()


def total(values) -> Decimal:
    """Exact Decimal sum."""
    return sum(values, Decimal(0))


def extra(line) -> dict:
    """The line's ``extra`` JSON."""
    return json.loads(line["extra"])


def rewrite(source: Path, target: Path, change) -> Path:
    """Copy a CSV export, passing each data record (a dict) through ``change`` (None drops it)."""
    with open(source, encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        header, records = reader.fieldnames, list(reader)
    with open(target, "w", encoding="utf-8-sig", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header)
        writer.writeheader()
        for i, record in enumerate(records, start=1):
            changed = change(i, dict(record))
            if changed is not None:
                writer.writerow(changed)
    return target


# --- the real EA exports: totals as in PROVENANCE.md ------------------------------------------

@pytest.mark.parametrize("path, currency, rows, billed, effective, view", [
    (ACTUAL, "USD", 11, "8.545008", "5.295008", "actual"),
    (AMORTISED, "USD", 28, "15.797780", "16.296932", "amortized"),
    (CAD, "CAD", 27, "1.261369", "1.261369", "actual"),
])
def test_real_exports_load_with_provenance_totals(path, currency, rows, billed, effective, view):
    frame = read(path, currency)
    lines = frame.tables["lines"]
    assert frame.rows == rows and line_total(lines) == rows
    assert total(lines["billed_cost"]).quantize(SIX) == Decimal(billed)
    assert total(lines["effective_cost"]).quantize(SIX) == Decimal(effective)
    assert set(lines["currency"]) == {currency} and set(lines["provider"]) == {"Microsoft"}
    assert {extra(line)["x_CostView"] for _, line in lines.iterrows()} == {view}


def test_cost_column_sums_match_provenance_in_each_view():
    """PROVENANCE's figure is the Cost column: billed in the actual file, effective in the amortised."""
    assert total(read(ACTUAL).tables["lines"]["billed_cost"]) == Decimal("8.5450077867419368")
    assert total(read(AMORTISED).tables["lines"]["effective_cost"]).quantize(SIX) == Decimal("16.296932")
    assert total(read(CAD, "CAD").tables["lines"]["billed_cost"]) == Decimal("1.26136926505726")


def test_actual_purchase_row_is_billed_and_not_effective():
    lines = read(ACTUAL).tables["lines"]
    purchase = lines[lines["charge_category"] == "Purchase"]
    assert len(purchase) == 1
    line = purchase.iloc[0]
    assert line["billed_cost"] == Decimal("3.25") and line["effective_cost"] == 0
    assert line["commitment_discount_type"] == "Reservation"
    assert line["commitment_discount_id"] == (
        "/providers/Microsoft.Capacity/reservationOrders/49ed0e4d-8e0c-4f1f-af2c-67c865056615")
    assert line["charge_frequency"] == "Recurring"
    assert extra(line)["x_CostViewSource"].startswith("detected: row 1 is a costed commitment purchase")


def test_amortised_commitment_usage_is_effective_not_billed():
    lines = read(AMORTISED).tables["lines"]
    used = lines[lines["commitment_discount_status"] == "Used"]
    assert list(used["commitment_discount_type"]) == ["Reservation", "Savings Plan"]
    assert list(used["effective_cost"]) == [Decimal("0.493152"), Decimal("0.006000000468")]
    assert list(used["billed_cost"]) == [0, 0]
    assert set(used["pricing_category"]) == {"Committed"}
    assert extra(used.iloc[0])["x_InstanceType"] == "Standard_DS2_v2"


def test_bom_and_first_column_are_read():
    for path in (ACTUAL, AMORTISED):
        assert path.read_bytes()[:3] == b"\xef\xbb\xbf"
        assert set(read(path).tables["lines"]["billing_account_id"]) == {"8611537"}


def test_cad_file_takes_cad_and_is_read_as_actual_with_a_note():
    lines = read(CAD, "CAD").tables["lines"]
    notes = {extra(line)["x_CostViewSource"] for _, line in lines.iterrows()}
    assert notes == {"not detectable (no commitment lines): read as actual"}
    assert set(lines["pricing_category"]) == {"Standard", "Dynamic"}  # OnDemand 24, Spot 3
    assert (lines["pricing_category"] == "Dynamic").sum() == 3
    # a currency differing from the case's is kept for the audit to report
    assert set(read(CAD, "USD").tables["lines"]["currency"]) == {"CAD"}


def test_tags_without_braces_become_json_objects():
    lines = read(CAD, "CAD").tables["lines"]
    assert set(lines["tags"]) == {'{"tagA":"valueA","tagB":"valueB","tagC":"valueC"}'}
    actual = read(ACTUAL).tables["lines"]
    assert json.loads(actual.iloc[1]["tags"])["application"] == "databricks"
    assert actual.iloc[0]["tags"] == "{}"


def test_units_in_blocks_become_distinct_units():
    """"10K" quantities are counted in blocks of 10 000: 0.0004 × 10K = 4 operations at 0.1 / 10K."""
    lines = read(ACTUAL).tables["lines"]
    ops = lines.iloc[1]
    assert ops["pricing_unit"] == "Units" and ops["pricing_quantity"] == Decimal(4)
    assert ops["contracted_unit_price"] == Decimal("0.00001")
    assert ops["pricing_quantity"] * ops["contracted_unit_price"] == ops["billed_cost"]
    assert extra(ops)["x_PricingUnitDescription"] == "10K" and extra(ops)["x_PricingBlockSize"] == "10000"
    vm = lines.iloc[3]
    assert (vm["pricing_unit"], vm["pricing_quantity"], vm["region"]) == ("Hours", Decimal(24), "southcentralus")


def test_window_drops_days_outside():
    frame = read(AMORTISED, start=utc(2023, 9, 10), end=utc(2023, 9, 11))
    assert frame.rows == 28 and list(frame.tables["lines"]["row"]) == [15, 17, 18]
    assert frame.covered == (utc(2023, 9, 10), utc(2023, 9, 11))


# --- the synthetic MCA amortised GPU export ---------------------------------------------------

@pytest.fixture(scope="module")
def mca():
    """The synthetic MCA export read over May 2024."""
    return read(MCA, start=utc(2024, 5, 1), end=utc(2024, 6, 1)).tables["lines"]


def test_mca_lower_case_headers_iso_dates_and_totals(mca):
    assert len(mca) == 6
    assert total(mca["effective_cost"]) == Decimal("2617.0155188")
    assert total(mca["billed_cost"]) == Decimal("697.0155188")  # covered usage and unused: billed via the purchase
    assert list(mca["start"].dt.day) == [1, 1, 1, 2, 2, 2]
    assert set(mca["billing_account_id"]) == {"acct-0001"}
    assert extra(mca.iloc[0])["x_CostViewSource"].startswith("detected: row 3 is an unused-commitment line")


def test_unused_reservation_is_usage_with_status_unused(mca):
    unused = mca.iloc[2]
    assert (unused["charge_category"], unused["commitment_discount_status"]) == ("Usage", "Unused")
    assert unused["effective_cost"] == Decimal(480) and unused["billed_cost"] == 0
    assert unused["commitment_discount_id"] == mca.iloc[0]["commitment_discount_id"]
    assert extra(unused)["x_ChargeType"] == "UnusedReservation"


def test_gpu_vm_on_a_scale_set_is_gpu_compute(mca):
    classified = classify(mca, (), set(), set())
    by_row = classified.set_index("row")
    assert list(by_row.loc[[1, 2], "resource_class"]) == ["gpu_compute", "gpu_compute"]
    assert set(by_row.loc[[1, 2], "instance_type"]) == {"nd96asr_v4"}
    assert set(by_row.loc[[1, 2], "gpus_per_instance"]) == {8}
    # a scale set's per-VM row (AdditionalInfo VMName aks-gpu-12345678-vmss_0) names its VM
    assert by_row.loc[1, "resource_id"].endswith("/virtualMachineScaleSets/aks-gpu-12345678-vmss/virtualMachines/0")
    assert by_row.loc[3, "resource_class"] == "commitment_unused"
    assert by_row.loc[5, "resource_class"] == "orchestration"
    assert by_row.loc[6, "resource_class"] == "egress"  # data transfer of a GPU node is not GPU compute


def test_hundred_hour_blocks_and_tags(mca):
    lts = mca.iloc[4]
    assert (lts["pricing_unit"], lts["pricing_quantity"], lts["contracted_unit_price"]) == (
        "Hours", Decimal(72), Decimal("0.6"))
    assert lts["pricing_quantity"] * lts["contracted_unit_price"] == lts["effective_cost"]
    assert json.loads(mca.iloc[0]["tags"]) == {"aks-managed-poolName": "gpu", "env": "prod", "team": "ml"}


def test_a_scale_set_row_naming_its_vm_gets_the_vm_s_arm_id(tmp_path):
    """Cost details bill a scale set one row per VM and day (Microsoft's EA sample does); the VM is
    in AdditionalInfo's VMName. Its ResourceId becomes the VM's ARM id, the one a Kubernetes
    ``azure://`` provider id names; a VMName of another set, or without a number, leaves the set's id."""
    names = {1: "aks-gpu-12345678-vmss_7", 2: "other-vmss_1", 6: "aks-gpu-12345678-vmss"}

    def vm(i, record):
        if i not in names or "vmss" not in record["ResourceId"]:
            return record
        info = json.loads(record["additionalInfo"] or "{}")
        info.pop("VMName", None)
        info["vmName" if i == 2 else "VMName"] = names[i]
        record["additionalInfo"] = json.dumps(info)
        return record
    lines = read(rewrite(MCA, tmp_path / "vms.csv", vm)).tables["lines"].set_index("row")
    scale_set = "/providers/Microsoft.Compute/virtualMachineScaleSets/aks-gpu-12345678-vmss"
    assert lines.loc[1, "resource_id"].endswith(scale_set + "/virtualMachines/7")
    assert [lines.loc[r, "resource_id"].endswith(scale_set) for r in (2, 6)] == [True] * 2
    real = read(AMORTISED).tables["lines"]["resource_id"]
    per_vm = real[real.str.contains("/virtualMachines/", regex=False)]
    assert len(per_vm) and per_vm.str.match(r"(?i)^/subscriptions/.+/virtualMachineScaleSets/[^/]+/virtualMachines/\d+$").all()


def test_meter_name_gives_the_vm_size_without_additional_info(tmp_path):
    def strip_info(i, record):
        record["additionalInfo"] = ""
        return record
    lines = read(rewrite(MCA, tmp_path / "no_info.csv", strip_info)).tables["lines"]
    assert extra(lines.iloc[0])["x_InstanceType"] == "ND96asr_v4"
    assert classify(lines, (), set(), set()).iloc[0]["resource_class"] == "gpu_compute"


def test_list_price_in_pricing_currency_is_converted(tmp_path):
    def euro(i, record):
        record.update(billingCurrency="EUR", exchangeRatePricingToBilling="0.9")
        return record
    lines = read(rewrite(MCA, tmp_path / "eur.csv", euro), "EUR").tables["lines"]
    assert lines.iloc[0]["list_unit_price"] == Decimal("24.4773")  # 27.197 USD × 0.9
    assert lines.iloc[3]["list_unit_price"] == Decimal("0.00000036")  # 0.004 × 0.9 per 10K
    assert set(lines["currency"]) == {"EUR"}


def test_parquet_export_matches_csv(tmp_path):
    target = tmp_path / "cad.parquet"
    with duckdb.connect() as con:
        con.execute(f"COPY (SELECT * REPLACE (CAST(strptime(Date, '%m/%d/%Y') AS DATE) AS Date, "
                    "CAST(CostInBillingCurrency AS DOUBLE) AS CostInBillingCurrency) "
                    f"FROM read_csv('{CAD}', all_varchar=true)) TO '{target}' (FORMAT parquet)")
    lines = read(target, "CAD").tables["lines"]
    assert total(lines["billed_cost"]) == Decimal("1.26136926505726") and line_total(lines) == 27


# --- views stated by the case -----------------------------------------------------------------

def test_stated_view_is_used_and_recorded():
    lines = read(AMORTISED, view="amortised").tables["lines"]
    assert {extra(line)["x_CostViewSource"] for _, line in lines.iterrows()} == {"case"}
    lines = read(CAD, "CAD", view="amortized").tables["lines"]
    assert total(lines["effective_cost"]) == total(lines["billed_cost"])  # no commitment lines


def test_stated_view_against_the_evidence_is_an_error():
    with pytest.raises(InputError) as err:
        read(AMORTISED, view="actual")
    assert err.value.column == "view" and err.value.row == 1
    with pytest.raises(InputError, match="unknown view"):
        read(ACTUAL, view="blended")


def test_amortised_rows_with_actual_purchases_read_as_amortised(tmp_path):
    """Microsoft's FOCUS recipe: amortised rows plus the commitment purchases of the actual data."""
    def add_unused(i, record):
        if i == 2:
            record.update(ChargeType="UnusedReservation", PricingModel="Reservation", Cost="0.5")
        return record
    lines = read(rewrite(ACTUAL, tmp_path / "combined.csv", add_unused)).tables["lines"]
    assert extra(lines.iloc[0])["x_CostViewSource"].startswith("detected: row 2 is an unused-commitment line")
    assert (lines.iloc[0]["billed_cost"], lines.iloc[0]["effective_cost"]) == (Decimal("3.25"), 0)
    assert (lines.iloc[1]["billed_cost"], lines.iloc[1]["effective_cost"]) == (0, Decimal("0.5"))
    assert lines.iloc[1]["commitment_discount_status"] == "Unused"


# --- bad input --------------------------------------------------------------------------------

def test_bad_cells_name_row_and_azure_column(tmp_path):
    def spoil(i, record):
        if i == 3:
            record["Date"] = "31/12/2023"
        if i == 5:
            record["Cost"] = "abc"
        if i == 7:
            record["ChargeType"] = "Mystery"
        return record
    with pytest.raises(InputErrors) as err:
        read(rewrite(ACTUAL, tmp_path / "bad.csv", spoil))
    found = {(e.row, e.column) for e in err.value.errors}
    assert found == {(3, "Date"), (5, "Cost"), (7, "ChargeType")}
    date = next(str(e) for e in err.value.errors if e.column == "Date")
    assert "unparseable date '31/12/2023'; it reads only day first (31 December 2023): the file's dates look DD/MM/YYYY" in date


def test_an_amount_out_of_range_is_one_error_naming_the_azure_column(tmp_path):
    """Cost = 1e400 was two errors naming BilledCost and EffectiveCost, columns the file lacks."""
    path = rewrite(ACTUAL, tmp_path / "big.csv", lambda i, record: {**record, "Cost": "1e400"} if i == 1 else record)
    with pytest.raises(InputError) as err:
        read(path)
    assert str(err.value) == (f"{path}: row 1, column Cost: number out of range '1e400' (expected a decimal number "
                              "less than 10^18 in magnitude (DECIMAL(38, 20)))")


def test_a_utf16_export_is_named_in_azure_words(tmp_path):
    """The message asked for "a header of FOCUS column names" of an Azure export."""
    path = tmp_path / "utf16.csv"
    path.write_bytes(ACTUAL.read_text(encoding="utf-8-sig").encode("utf-16"))
    with pytest.raises(InputError, match=r"\(expected a UTF-8 CSV file with a header of Azure cost details column "
                                         r"names\)$"):
        read(path)


@pytest.mark.parametrize("value, said", [("13/05/2024", "13 May 2024"), ("5/13/2024", None), ("31/31/2024", None),
                                         ("2024-13-01", None), ("13/5/2024", "13 May 2024")])
def test_a_day_first_date_is_named_so(value, said):
    from connectors.billing.azure import day_first

    if said is None:
        assert day_first(value) == ""
    else:
        assert day_first(value).startswith(f"; it reads only day first ({said}): ")


def test_missing_cost_column_is_named(tmp_path):
    target = tmp_path / "no_cost.csv"
    target.write_text("Date,MeterCategory\n09/01/2023,Storage\n", encoding="utf-8")
    with pytest.raises(InputError) as err:
        read(target)
    assert err.value.column == "CostInBillingCurrency" and "missing column" in str(err.value)


def test_tags_that_are_not_json_are_an_error(tmp_path):
    def spoil(i, record):
        if i == 2:
            record["Tags"] = '"k": v'
        return record
    with pytest.raises(InputError) as err:
        read(rewrite(ACTUAL, tmp_path / "tags.csv", spoil))
    assert (err.value.row, err.value.column) == (2, "Tags")


def test_registered_as_azure():
    assert resolve("azure") is AzureExportConnector


# --- Microsoft's FOCUS export (FocusCost) goes through the focus connector --------------------

SAMPLE_BY_TYPE = {"Decimal": "1.5", "DateTime": "2024-05-01T00:00:00Z", "JSON": "{}", "Boolean": "true",
                  "Number": "1"}
FOCUS_COST_VALUES = {
    "BilledCost": "0", "EffectiveCost": "1440", "ListCost": "1958.184", "ContractedCost": "1958.184",
    "ChargeCategory": "Usage", "ChargeClass": "", "ChargeFrequency": "Usage-Based",
    "ChargePeriodStart": "2024-05-01T00:00:00.0000000Z", "ChargePeriodEnd": "2024-05-02T00:00:00.0000000Z",
    "BillingCurrency": "USD", "ProviderName": "Microsoft", "ServiceName": "Virtual Machines",
    "CommitmentDiscountStatus": "Used", "CommitmentDiscountType": "Reservation",
    "PricingUnit": "Hours", "PricingQuantity": "72", "ConsumedUnit": "Hours", "ConsumedQuantity": "72",
    "Tags": '{"team":"ml"}', "SkuPriceDetails": '{"CoreCount":96}', "x_SkuMeterName": "ND96asr v4",
    "x_SkuDetails": '{"ServiceType":"Standard_ND96asr_v4"}', "x_PricingBlockSize": "1",
}


def focus_cost_csv(target: Path) -> list[str]:
    """One FocusCost 1.2-preview line with every column of Microsoft's metadata document."""
    meta = json.loads((TOOLKIT / "FocusCost_1.2-preview.metadata.json").read_text(encoding="utf-8-sig"))
    columns = [(c["ColumnName"], c["DataType"]) for c in meta["Columns"]]
    values = [FOCUS_COST_VALUES.get(name, SAMPLE_BY_TYPE.get(dtype, f"{name} text")) for name, dtype in columns]
    with open(target, "w", encoding="utf-8-sig", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow([name for name, _ in columns])
        writer.writerow(values)
    return [name for name, _ in columns]


def test_focus_cost_export_loads_through_the_focus_connector(tmp_path):
    names = focus_cost_csv(tmp_path / "FocusCost.csv")
    assert len(names) == 106 and sum(n.startswith("x_") for n in names) == 53
    spec = SourceSpec(name="fc", kind="billing", format="focus", path=tmp_path / "FocusCost.csv")
    frame = FocusConnector(spec, ReadContext(start=utc(2024, 5, 1), end=utc(2024, 6, 1), currency="USD")).read()
    line = frame.tables["lines"].iloc[0]
    assert (line["billed_cost"], line["effective_cost"]) == (Decimal(0), Decimal(1440))
    assert line["start"].isoformat() == "2024-05-01T00:00:00+00:00"
    extra = json.loads(line["extra"])  # every x_ column, SkuPriceDetails and the capacity reservation's two
    assert len(extra) == 56 and extra["CapacityReservationStatus"] == "CapacityReservationStatus text"
    classified = classify(frame.tables["lines"], (), set(), set()).iloc[0]
    assert (classified["resource_class"], classified["instance_type"]) == ("gpu_compute", "nd96asr_v4")


def test_other_charge_types_map_to_focus_categories(tmp_path):
    kinds = {2: "Refund", 3: "Tax", 4: "RoundingAdjustment"}

    def retype(i, record):
        record["ChargeType"] = kinds.get(i, record["ChargeType"])
        return record
    lines = read(rewrite(ACTUAL, tmp_path / "kinds.csv", retype), view="actual").tables["lines"]
    got = [(lines.iloc[i]["charge_category"], lines.iloc[i]["charge_class"]) for i in (1, 2, 3, 4)]
    assert got == [("Refund", "Correction"), ("Tax", ""), ("Adjustment", ""), ("Usage", "")]
    assert lines.iloc[1]["effective_cost"] == lines.iloc[1]["billed_cost"]  # not a commitment refund


def covered_by(record: dict, order: str, reservation: str, price: str, quantity: str) -> dict:
    """An ActualCost row made usage a reservation covers (cost 0): ``reservation`` under the
    reservation ``order``, at its pay-as-you-go ``price`` × ``quantity`` hours."""
    record.update(ChargeType="Usage", PricingModel="Reservation", Cost="0", EffectivePrice="0", PayGPrice=price,
                  Quantity=quantity, UnitOfMeasure="1 Hour", ReservationId=reservation,
                  benefitId=f"{order}/reservations/{reservation}")
    return record


def test_actual_reservation_purchase_spreads_over_its_reservations_by_payg_cost(tmp_path):
    """ActualCost: the purchase names the reservation order, covered usage (cost 0) its reservations."""
    from audit.adjust import spread

    order = "49ed0e4d-8e0c-4f1f-af2c-67c865056615"
    covered = {2: ("r-1", "0.10", "3"), 3: ("r-2", "0.10", "1")}  # row → reservation, PayGPrice, Quantity

    def change(i, record):
        if i in covered:
            covered_by(record, f"/providers/Microsoft.Capacity/reservationOrders/{order}", *covered[i])
        return record

    lines = read(rewrite(ACTUAL, tmp_path / "actual.csv", change)).tables["lines"]
    charges, leftovers = spread(lines, "billed")
    assert not leftovers
    assert "Purchase" not in set(charges["charge_category"])  # the purchase moved onto its usage
    moved = charges[charges["commitment"] != 0]
    assert list(moved["commitment"]) == [Decimal("2.4375"), Decimal("0.8125")]  # 3.25 × 0.3 / 0.4, × 0.1 / 0.4
    assert sum(charges["net"]) == sum(lines["billed_cost"])  # nothing lost, nothing added


def test_purchase_without_covered_usage_stays_a_charge():
    from audit.adjust import spread

    lines = read(ACTUAL).tables["lines"]
    charges, _ = spread(lines, "billed")
    assert list(charges[charges["charge_category"] == "Purchase"]["gross"]) == [Decimal("3.25")]


def test_a_day_first_file_whose_usage_days_are_all_up_to_the_12th_is_refused(tmp_path):
    """Every usage date of the file reads month first (09/05/2023 as 5 September), but its billing
    period's end (30/09/2023) reads only day first: the file was re-saved in a day-first locale.
    Before: read with day and month swapped, without a word."""
    def day_first_file(i, record):
        month, day, year = record["Date"].split("/")
        record["Date"] = f"{int(day) % 12 + 1:02d}/{month}/{year}"
        for column in ("BillingPeriodStartDate", "BillingPeriodEndDate"):
            m, d, y = record[column].split("/")
            record[column] = f"{d}/{m}/{y}"
        return record
    with pytest.raises(InputError) as err:
        read(rewrite(ACTUAL, tmp_path / "day_first.csv", day_first_file))
    error = err.value
    assert error.column == "BillingPeriodEndDate" and error.row == 1
    assert "billing period date '30/09/2023'; it reads only day first (30 September 2023): the file's dates look DD/MM/YYYY" \
        in str(error)
    assert len(read(ACTUAL).tables["lines"])  # the file as Azure wrote it reads as before


def test_an_actual_export_on_the_effective_basis_names_the_purchase_it_cannot_amortise():
    """Before, audit.json said total 5.30 against an invoice of 8.55, amortised_commitment 0.00 and
    commitments [], with no word that the 3.25 reservation purchase had left the effective basis; and
    its notes said the timestamps were read "as FOCUS defines" of an Azure export."""
    from dataclasses import replace

    from audit.audit_json import to_dict
    from audit.collected import Collected
    from audit.pipeline import audit_collected
    from tests.builders import make_case

    september = (utc(2023, 9, 1), utc(2023, 10, 1))
    case = replace(make_case(accounts=()), start=september[0], end=september[1], services={})
    doc = to_dict(audit_collected(case, Collected((read(ACTUAL, start=september[0], end=september[1]),))))
    assert (doc["total"], doc["invoice_total"], doc["bridge"]["purchases_amortised"]) == ("5.30", "8.55", "-3.25")
    assert doc["bridge"]["amortised_commitment"] is None
    named = ("1 commitment purchase line(s) (EA_ActualCost_Small.csv:1), billed 3.25, leave the effective basis "
             "(EffectiveCost 0) and no in-scope line carries their amortisation, so the effective total lacks "
             "these commitments")
    assert f"amortised_commitment: {named}" in doc["bridge"]["not_measured"]
    assert doc["notes"][0] == ("Azure cost details dates (a day, no time or offset) were read as UTC days, the days "
                               "Azure Cost Management bills by.")
    assert doc["notes"][1].startswith(f"Commitment amortisation not measured: {named}")
    assert "(Azure: the AmortizedCost export)" in doc["notes"][1]
    assert not any("FOCUS" in note for note in doc["notes"])


def test_a_commitment_refund_spreads_onto_the_reservation_it_names_not_onto_the_purchase(tmp_path):
    """ActualCost on the billed basis: a reservation purchase (order O, 3.25) and a refund of −1 naming
    reservation r-2 under O. The refund is the negative of a purchase: it moves onto r-2's usage alone,
    and the order's purchase moves onto r-1 and r-2, not onto the refund line (which lies under O).
    Before: the refund was a credit netted into other charges, r-2 carried 0.8125."""
    from audit.adjust import spread

    order = "/providers/Microsoft.Capacity/reservationOrders/49ed0e4d-8e0c-4f1f-af2c-67c865056615"
    covered = {2: ("r-1", "0.10", "3"), 3: ("r-2", "0.10", "1")}  # row → reservation, PayGPrice, Quantity

    def change(i, record):
        if i in covered:
            covered_by(record, order, *covered[i])
        if i == 4:
            record.update(ChargeType="Refund", PricingModel="Reservation", Cost="-1", UnitPrice="1", Quantity="1",
                          EffectivePrice="1", PayGPrice="0", ReservationId="r-2", benefitId=f"{order}/reservations/r-2")
        return record

    lines = read(rewrite(ACTUAL, tmp_path / "actual.csv", change)).tables["lines"]
    refund = lines[lines["row"] == 4].iloc[0]
    assert (refund["charge_category"], refund["charge_class"]) == ("Purchase", "Correction")
    assert (refund["billed_cost"], refund["effective_cost"]) == (Decimal("-1"), Decimal("0"))
    charges, leftovers = spread(lines, "billed")
    assert not leftovers
    assert "Purchase" not in set(charges["charge_category"])  # both moved onto their usage
    moved = charges[charges["commitment"] != 0]
    assert list(moved["commitment_discount_id"]) == [f"{order}/reservations/r-1", f"{order}/reservations/r-2"]
    assert list(moved["commitment"]) == [Decimal("2.4375"), Decimal("-0.1875")]  # r-2: 0.8125 − 1
    assert sum(charges["net"]) == sum(lines["billed_cost"])  # nothing lost, nothing added


SAVINGS_PLAN = ("/providers/Microsoft.BillingBenefits/savingsPlanOrders/5b1c0d3e-1111-2222-3333-444455556666/"
                "savingsPlans/9f8e7d6c-aaaa-bbbb-cccc-ddddeeeeffff")


def test_commitment_purchases_no_line_used_are_unused_commitment_not_unmatched(tmp_path):
    """ActualCost on the billed basis: the reservation purchase (3.25) and a savings plan bought (1000)
    and partly refunded (−400, PricingModel blank, only its benefitId naming the plan), none of whose
    usage is in the export. Before: the three lines were class unmatched (unmatched 608.54, 11 lines;
    cloudgen aks 10105 with such a plan: 600.00 unattributed); now they are paid
    commitment that nothing audited used, commitment_unused (platform overhead), by a shipped rule."""
    from dataclasses import replace

    from audit.audit_json import to_dict
    from audit.collected import Collected
    from audit.pipeline import audit_collected
    from tests.builders import make_case

    plan = {2: ("Purchase", "SavingsPlan", "1000"), 3: ("Refund", "", "-400")}

    def change(i, record):
        if i in plan:
            kind, model, cost = plan[i]
            record.update(ChargeType=kind, PricingModel=model, Cost=cost, UnitPrice=cost.lstrip("-"), Quantity="1",
                          EffectivePrice=cost.lstrip("-"), PayGPrice="0", MeterCategory="Savings Plan",
                          benefitId=SAVINGS_PLAN, ResourceId="", ReservationId="")
        return record

    september = (utc(2023, 9, 1), utc(2023, 10, 1))
    case = replace(make_case(accounts=(), basis="billed"), start=september[0], end=september[1], services={})
    source = read(rewrite(ACTUAL, tmp_path / "actual.csv", change), start=september[0], end=september[1])
    doc = to_dict(audit_collected(case, Collected((source,))))
    classes = {c["class"]: (c["net"], c["lines"]) for c in doc["classes"]}
    # the case names no service: the export's eight other lines stay unmatched, as before
    assert classes == {"commitment_unused": ("603.25", 3), "unmatched": ("5.29", 8)}
    assert doc["bridge"]["commitment_purchases"] == "603.25"
