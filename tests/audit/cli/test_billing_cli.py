"""`costaudit billing`: the quick look at invoices."""
from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal

from audit.billing_summary import sniff_format
from tests.paths import DATA, DEMO, ROOT

SAMPLE = DATA / "billing" / "focus_sample_data" / "focus_sample_1000.csv"


def billing(*args):
    return subprocess.run([sys.executable, "-m", "audit", "billing", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, timeout=300)


def test_real_focus_sample_totals_and_gpu_hours():
    result = billing(SAMPLE, "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    currency = {row["name"]: row for row in summary["by_currency"]}
    assert currency["USD"]["billed"] == "20.52" and currency["USD"]["effective"] == "14.98"
    categories = {row["name"] for row in summary["by_charge_category"]}
    assert categories == {"Usage", "Adjustment", "Credit"}
    hours = {row["instance_type"] for row in summary["gpu_hours_by_instance_type"]}
    assert hours == {"g5.4xlarge", "g3.4xlarge"}


def test_an_unknown_format_names_the_option_and_the_nearest():
    """Before: "case.toml: column format: unknown format 'fcus'" (no case file involved) listing telemetry formats."""
    result = billing(SAMPLE, "--format", "fcus")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == ("costaudit: error: --format 'fcus': unknown billing format; did you mean 'focus'? "
                                     "(expected one of focus, cur, azure, gcp_billing)")


def test_window_limits_the_lines():
    result = billing(DEMO / "billing" / "focus_2026-09.csv.gz", "--window", "2026-09-01", "2026-09-02", "--json")
    summary = json.loads(result.stdout)
    hours = {row["instance_type"]: Decimal(row["gpu_hours"]) for row in summary["gpu_hours_by_instance_type"]}
    assert hours == {"p5.48xlarge": Decimal(2 * 8 * 24), "g6e.12xlarge": Decimal(2 * 4 * 24)}


def test_text_output_and_format_sniffing(tmp_path):
    assert sniff_format(SAMPLE) == "focus"
    result = billing(SAMPLE)
    assert result.returncode == 0 and "By charge category" in result.stdout
    unknown = tmp_path / "x.csv"
    unknown.write_text("a,b\n1,2\n")
    bad = billing(unknown)
    assert bad.returncode == 1 and "--format" in bad.stderr


def test_workshop_cur_parquets_through_the_cli():
    labs = DATA / "billing" / "aws_wa_labs"
    october = billing(labs / "Oct2018-WorkshopCUR-00001.snappy.parquet", "--json")
    assert october.returncode == 0, october.stderr
    summary = json.loads(october.stdout)
    assert summary["sources"][0]["format"] == "cur" and summary["sources"][0]["rows"] == 119307
    assert summary["by_currency"] == [{"name": "USD", "billed": "4064.48", "effective": "4195.96"}]
    assert {row["name"] for row in summary["by_charge_category"]} == {"Usage", "Purchase"}
    everything = billing(*sorted(labs.glob("*WorkshopCUR*.parquet")), "--json")
    assert everything.returncode == 0, everything.stderr
    usd = json.loads(everything.stdout)["by_currency"][0]
    assert (usd["billed"], usd["effective"]) == ("7978.19", "8368.37")  # Oct + Nov + Dec, exact sums rounded once


def test_missing_file_is_a_clear_error(tmp_path):
    missing = tmp_path / "nope.parquet"
    for args in ((missing, "--format", "cur"), (missing,)):
        result = billing(*args)
        assert result.returncode == 1 and str(missing) in result.stderr and "Traceback" not in result.stderr
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(b"PAR1 not parquet")
    result = billing(broken)
    assert result.returncode == 1 and str(broken) in result.stderr and "Traceback" not in result.stderr


def test_two_currencies_are_never_added():
    """A CAD Azure export and the USD FOCUS sample together: every money row names its currency,
    each currency's rows add up to its own total, and no row or total mixes the two."""
    cad = DATA / "billing" / "focus_converters" / "azure_ea_anonymized_cad.csv"
    alone = json.loads(billing(SAMPLE, "--json").stdout)
    result = billing(cad, SAMPLE, "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    totals = {row["name"]: row for row in summary["by_currency"]}
    assert set(totals) == {"CAD", "USD"}
    assert (totals["CAD"]["billed"], totals["CAD"]["effective"]) == ("1.26", "1.26")
    assert totals["USD"] == {"name": "USD", "billed": "20.52", "effective": "14.98"}
    for key in ("by_charge_category", "by_service"):
        rows = summary[key]
        assert all(row["currency"] in totals for row in rows)
        assert len({(row["currency"], row["name"]) for row in rows}) == len(rows)
        for money, total in totals.items():
            mine = [row for row in rows if row["currency"] == money]
            gap = sum(Decimal(r["billed"]) for r in mine) - Decimal(total["billed"])
            assert abs(gap) <= Decimal("0.005") * len(mine), (key, money)  # rows rounded one by one
    usd = [{k: v for k, v in row.items() if k != "currency"} for row in summary["by_charge_category"]
           if row["currency"] == "USD"]
    assert usd == alone["by_charge_category"]  # the USD rows are the USD file's, untouched by CAD
    assert "currency" not in alone["by_charge_category"][0]  # one currency: the rows as before
    text = billing(cad, SAMPLE).stdout
    assert "By charge category, CAD:" in text and "By charge category, USD:" in text
    assert "By service, CAD:" in text and "\nBy charge category:" not in text


def test_the_rows_of_each_table_add_up_to_the_currency_s_total():
    """Three services of 0.335 each: rounded alone 0.34 + 0.34 + 0.34 = 1.02 against a total of 1.00
    (a verifier's FOCUS case: 1,020.56 by service against 1,020.57). Rounded together by largest
    remainder they add up."""
    from collections import defaultdict
    from decimal import Decimal

    from audit.billing_summary import _finish
    third = Decimal("0.335")
    out = {"sources": [], "by_category": defaultdict(lambda: [Decimal(0), Decimal(0)]),
           "by_service": {("USD", name): [third, third] for name in ("a", "b", "c")},
           "by_currency": {"USD": [3 * third, 3 * third]}, "gpu_hours": {}, "notes": []}
    out["by_category"][("USD", "Usage")] = [3 * third, 3 * third]
    summary = _finish(out)
    assert [r["billed"] for r in summary["by_service"]] == ["0.34", "0.33", "0.33"]
    assert summary["by_currency"] == [{"name": "USD", "billed": "1.00", "effective": "1.00"}]


def test_a_case_folder_is_read_through_its_billing_sources():
    """Before: `costaudit billing CASE` sniffed the case folder's first file (PROVENANCE.md) and said
    "cannot tell the billing format from its columns" (exit 1). Now: the case's [[billing]] sources,
    in the formats it names, with a note that its window is not applied."""
    result = billing(DEMO, "--window", "2026-09-01", "2026-09-02", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    assert [(s["source"], s["format"]) for s in summary["sources"]] == [
        (str(DEMO / "billing" / "focus_2026-09.csv.gz"), "focus")]
    hours = {row["instance_type"]: Decimal(row["gpu_hours"]) for row in summary["gpu_hours_by_instance_type"]}
    assert hours == {"p5.48xlarge": Decimal(2 * 8 * 24), "g6e.12xlarge": Decimal(2 * 4 * 24)}
    assert summary["notes"] == [f"{DEMO}: the case's [[billing]] sources (aws-focus), each in the format it "
                                "names; the case's window is not applied (--window is)",
                                f"{DEMO / 'billing' / 'focus_2026-09.csv.gz'}: {FOCUS_NOT_CHECKED}"]


FOCUS_NOT_CHECKED = ("totalled in DuckDB where it lies: repeated lines are not looked for and lines straddling the "
                     "window (clipped pro rata) are not noted; `costaudit run` reads the source through its "
                     "connector, which checks and notes them")
CUR_NOT_CHECKED = ("totalled in DuckDB where it lies: split cost allocation rows (EKS pod / ECS task shares) are "
                   "left out of the totals but not counted here, and money on split rows, repeated line ids and "
                   "lines straddling the window (clipped pro rata) are not noted; `costaudit run` reads the "
                   "source through its connector, which notes them")


def test_a_connector_s_notes_are_carried():
    """Before: an Azure export clipped to a window from 06:00 gave its totals and no note (notes []),
    though its connector noted the 27 lines straddling the window's start. Now the connector's notes
    are the source's ``notes`` and lines of the summary's notes, as `costaudit run` shows them."""
    azure = DATA / "billing" / "focus_converters" / "azure_ea_anonymized_cad.csv"
    args = (azure, "--window", "2023-09-02T06:00", "2023-09-03")
    summary = json.loads(billing(*args, "--json").stdout)
    note = ("27 lines straddle the window's start (2023-09-02 06:00 UTC): 0.32 CAD of their 1.26 CAD billed is "
            "for time before the window and left out (clipped pro rata by time)")
    assert summary["sources"][0]["notes"] == [{"row": 1, "column": "ChargePeriodStart", "note": note}]
    assert summary["notes"] == [f"{azure}: row 1, ChargePeriodStart: {note}"]
    assert billing(*args).stdout.endswith(f"\nNotes:\n  {azure}: row 1, ChargePeriodStart: {note}\n")


def test_a_pushed_down_cur_says_what_it_did_not_check():
    """Before: a CUR totalled in DuckDB said nothing of its split cost allocation rows or repeated
    line ids, which its connector notes. Now the summary says which of those checks it did not run."""
    labs = DATA / "billing" / "aws_wa_labs"
    cur = sorted(labs.rglob("*.parquet"))[0]
    summary = json.loads(billing(cur, "--json").stdout)
    assert summary["notes"] == [f"{cur}: {CUR_NOT_CHECKED}"]


def test_a_folder_is_sniffed_by_its_data_files_not_its_notes(tmp_path):
    """A PROVENANCE.md beside the export is not a billing file: the folder is FOCUS by its CSV; a
    folder with no data file says so."""
    (tmp_path / "PROVENANCE.md").write_text("# Provenance of this case\n")
    (tmp_path / "focus.csv").write_bytes(SAMPLE.read_bytes())
    assert sniff_format(tmp_path) == "focus"
    (tmp_path / "focus.csv").unlink()
    result = billing(tmp_path)
    assert result.returncode == 1 and "no billing data file in the folder" in result.stderr
    assert "cannot tell the billing format" not in result.stderr


def _gcp_record(hour: int, sku: str, machine: str, node: str, amount: float, cost: float) -> dict:
    """One hour of a GCP detailed export row (Compute Engine, machine billed in parts)."""
    start = f"2026-09-01 {hour:02d}:00:00 UTC"
    return {"billing_account_id": "01A2B3-C4D5E6-F7A8B9", "service": {"id": "6F81-5844-456A", "description": "Compute Engine"},
            "sku": {"id": sku[:14], "description": sku}, "usage_start_time": start,
            "usage_end_time": f"2026-09-01 {hour + 1:02d}:00:00 UTC",
            "project": {"id": "acme", "number": "1", "name": "acme", "labels": [], "ancestry_numbers": "/1/"},
            "labels": [], "system_labels": [{"key": "compute.googleapis.com/machine_spec", "value": machine}],
            "location": {"location": "us-central1-b", "country": "US", "region": "us-central1", "zone": "us-central1-b"},
            "resource": {"name": node, "global_name": f"//compute.googleapis.com/projects/acme/zones/us-central1-b/instances/{node}"},
            "tags": [], "export_time": start, "cost": cost, "currency": "USD", "currency_conversion_rate": 1,
            "usage": {"amount": amount * 3600, "unit": "seconds", "amount_in_pricing_units": amount, "pricing_unit": "hour"},
            "credits": [], "invoice": {"month": "202609"}, "cost_type": "regular", "adjustment_info": None,
            "cost_at_list": cost, "transaction_type": "GOOGLE", "seller_name": "Google",
            "price": {"effective_price": 0.01, "tier_start_amount": 0, "unit": "hour", "pricing_unit_quantity": 1}}


def test_a_g2_whose_l4s_are_billed_in_its_core_line_counts_its_gpu_hours(tmp_path):
    """Two hours of a g2-standard-48 with no L4 meter line (48 vCPU-hours of cores an hour, then 24:
    half an hour) and an a3-highgpu-8g whose H100s have their meter: before, the g2's GPU-hours were
    not counted (H100 80GB 16 alone); now 1.5 instance-hours × 4 L4 = 6 under its machine type, as
    the audit counts them, and the a3's Core line adds none beside its meter."""
    from audit.billing_summary import summarise

    rows = [_gcp_record(0, "G2 Instance Core running in Americas", "g2-standard-48", "g2-node", 48, 1.2),
            _gcp_record(0, "G2 Instance Ram running in Americas", "g2-standard-48", "g2-node", 192, 0.6),
            _gcp_record(1, "G2 Instance Core running in Americas", "g2-standard-48", "g2-node", 24, 0.6)]
    rows += [_gcp_record(h, "A3 Instance Core running in Americas", "a3-highgpu-8g", "a3-node", 208, 5.0) for h in (0, 1)]
    rows += [_gcp_record(h, "Nvidia H100 80GB GPU running in Americas", "a3-highgpu-8g", "a3-node", 8, 80.0)
             for h in (0, 1)]
    path = tmp_path / "export.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    found = summarise([str(path)], "gcp_billing", None)
    assert found["gpu_hours_by_instance_type"] == [{"instance_type": "H100 80GB", "gpu_hours": "16.00"},
                                                   {"instance_type": "g2-standard-48", "gpu_hours": "6.00"}]


def test_a_pushed_down_focus_notes_an_hour_past_23_as_run_does():
    """FOCUS spec example commitment_discount_purchase_scenario_2 ends row 3 at 2023-02-01T30:00:00Z.
    Before: `billing` printed Purchase 0.06 (the line read as ending 2023-02-02T06:00) with no note,
    where `run` notes it. Now the source carries the connector's note, as `run` shows it."""
    path = DATA / "billing" / "focus_spec_examples" / "commitment_discount_purchase_scenario_2.csv"
    result = billing(path, "--window", "2023-01-01", "2023-01-02", "--json")
    assert result.returncode == 0, result.stderr
    summary = json.loads(result.stdout)
    note = "hour past 23 in '2023-02-01T30:00:00Z', read as 2023-02-02T06:00:00Z"
    assert summary["sources"][0]["notes"] == [{"row": 3, "column": "ChargePeriodEnd", "note": note}]
    lacks = unamortised_note(path.name, "3 commitment purchase line(s) (commitment_discount_purchase_scenario_2.csv:1, "
                             "commitment_discount_purchase_scenario_2.csv:2, commitment_discount_purchase_scenario_2.csv:3), "
                             "billed 0.06")
    assert summary["notes"] == [lacks, f"{path}: {FOCUS_NOT_CHECKED}", f"{path}: row 3, ChargePeriodEnd: {note}"]
    assert [(r["name"], r["billed"]) for r in summary["by_charge_category"]] == [("Purchase", "0.06")]


def unamortised_note(name: str, purchases: str) -> str:
    """The note `billing` gives a source whose commitment purchases are in no line of the effective
    total (audit.bridge.unamortised_reason, as `costaudit run` warns)."""
    return (f"{name}: effective total: {purchases}, leave the effective basis (EffectiveCost 0) and no in-scope "
            "line carries their amortisation, so the effective total lacks these commitments: an export of the "
            "billed view (Azure's ActualCost export, in which covered usage costs 0) shows a purchase but not its "
            "amortisation. Read the amortised view as well (Azure: the AmortizedCost export), or audit on the "
            "billed basis")


def test_a_pushed_down_focus_notes_a_purchase_missing_from_the_effective_total():
    """FOCUS spec example commitment_discount_purchase_scenario_1: a purchase billed 8760.00, effective
    0.00, and no usage carrying its amortisation. Before: no note (the DuckDB totals never asked), where
    the Azure path (EA_ActualCost_Small.csv) and `costaudit run` say the effective total lacks it."""
    spec = DATA / "billing" / "focus_spec_examples"
    path = spec / "commitment_discount_purchase_scenario_1.csv"
    summary = json.loads(billing(path, "--json").stdout)
    assert summary["notes"] == [
        unamortised_note(path.name, f"1 commitment purchase line(s) ({path.name}:1), billed 8760.00"),
        f"{path}: {FOCUS_NOT_CHECKED}"]
    assert [(r["name"], r["billed"], r["effective"]) for r in summary["by_charge_category"]] == [
        ("Purchase", "8760.00", "0.00")]
    for n, billed in ((2, "3.00"), (3, "4381.50")):
        notes = json.loads(billing(spec / f"commitment_discount_purchase_scenario_{n}.csv", "--json").stdout)["notes"]
        assert [note.split(", billed ")[1].split(",")[0] for note in notes if "lacks these commitments" in note] == [billed]


def test_a_focus_export_carrying_its_amortisation_has_no_such_note():
    """FOCUS spec examples whose purchases are amortised onto the usage they cover (and its unused share),
    and the FOCUS sample (no purchase): no purchase is missing from the effective total, so no note."""
    spec = DATA / "billing" / "focus_spec_examples"
    for path in [spec / f"{name}.csv" for name in (
            "one_hundred_percent_utilization_with_commitment_discount_flexibility_with_2_resources",
            "one_hundred_percent_utilization_without_commitment_discount_flexibility",
            "zero_percent_utilization_without_commitment_discount_flexibility")] + [SAMPLE]:
        notes = json.loads(billing(path, "--json").stdout)["notes"]
        assert [n for n in notes if "lacks these commitments" in n] == []


def test_text_output_keeps_long_service_names_and_says_no_gpu_lines_per_currency():
    """Before: "Amazon Elastic Container Service for Kubernete" (cut at 46 characters), and with two
    currencies and no GPU line the section's one row was padded blanks after its words. Now the name
    column is as wide as the longest name (the JSON has them whole too) and the section reads
    "(no GPU instance lines)" alone."""
    import re

    cad = DATA / "billing" / "focus_converters" / "azure_ea_anonymized_cad.csv"
    cur = DATA / "billing" / "focus_converters" / "aws_cur1_anonymized_2023-11.csv"
    text = billing(cad, cur).stdout
    assert "\nGPU-hours by instance type:\n  (no GPU instance lines)\n" in text
    text = billing(cad, SAMPLE).stdout
    assert re.search(r"\n  Amazon Elastic Container Service for Kubernetes +0\.10 +0\.00\n", text), text
    header, row = (line for line in text.splitlines() if line.startswith(("By currency:", "  USD")))
    assert len(header) == len(row)  # the columns stay aligned under the widened name column


def test_a_folder_of_focus_files_is_read_file_by_file(tmp_path):
    """A folder of FOCUS files, as sniffed, named --format focus, or with a trailing "/": each data file
    is totalled as a source of its own. Before: "…/focus: unknown file extension '(none)' (expected a
    .csv, .csv.gz or .parquet file)", exit 1."""
    folder = tmp_path / "focus"
    (folder / "2026-09").mkdir(parents=True)
    (folder / "a.csv").write_bytes(SAMPLE.read_bytes())
    (folder / "2026-09" / "b.csv").write_bytes(SAMPLE.read_bytes())
    (folder / "README.txt").write_text("not billing data\n")
    for args in ((folder,), (folder, "--format", "focus"), (f"{folder}/",)):
        result = billing(*args, "--json")
        assert result.returncode == 0, result.stderr
        summary = json.loads(result.stdout)
        assert [(s["source"], s["format"], s["rows"]) for s in summary["sources"]] == [
            (str(folder / "2026-09" / "b.csv"), "focus", 1000), (str(folder / "a.csv"), "focus", 1000)]
        assert summary["by_currency"] == [{"name": "USD", "billed": "41.04", "effective": "29.95"}]  # exact sums, rounded once


def test_a_focus_folder_with_no_data_file_is_named_with_what_it_holds(tmp_path):
    folder = tmp_path / "focus"
    folder.mkdir()
    (folder / "README.txt").write_text("x\n")
    (folder / "manifest.json").write_text("{}\n")
    result = billing(folder, "--format", "focus")
    assert result.returncode == 1 and "Traceback" not in result.stderr
    assert result.stderr.strip() == (
        f"costaudit: error: {folder}: no FOCUS data file in the folder; it holds 2 file(s): README.txt, "
        "manifest.json (expected FOCUS export files (.csv, .csv.gz, .parquet))")


def test_a_pushed_down_cur_notes_a_savings_plan_fee_missing_from_the_effective_total(tmp_path):
    """The workshop's Savings Plans CUR without its covered usage (SavingsPlanCoveredUsage, SavingsPlanNegation):
    the 48 recurring fees, billed 12.70, leave the effective basis and no line carries their amortisation.
    Before: no note, as for FOCUS; now the CUR's totals note it too."""
    import csv
    import gzip

    source = DATA / "billing" / "aws_wa_labs" / "workload_efficiency_step5_cur_2019-11-29_savingsplans.csv.gz"
    path = tmp_path / "fees_only.csv"
    with gzip.open(source, "rt", encoding="utf-8", newline="") as handle, open(path, "w", newline="") as out:
        rows = csv.reader(handle)
        header = next(rows)
        kind = header.index("line_item_line_item_type")
        csv.writer(out).writerows([header] + [r for r in rows
                                              if r[kind] not in ("SavingsPlanCoveredUsage", "SavingsPlanNegation")])
    notes = json.loads(billing(path, "--json").stdout)["notes"]
    assert notes == [unamortised_note(path.name, "48 commitment purchase line(s) (fees_only.csv:1, fees_only.csv:2, "
                                                 "fees_only.csv:7, …), billed 12.70"),
                     f"{path}: {CUR_NOT_CHECKED}"]


def test_the_header_counts_have_thousands_separators():
    """Before: "16113 rows, 16113 lines in the window" where init says "16,113 rows"."""
    bill = DEMO / "billing" / "focus_2026-09.csv.gz"
    result = billing(bill)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[0] == f"{bill}: focus, 16,113 rows, 16,113 lines in the window"
