"""Billing sources that bill the same charges over the same hours, and telemetry sources that report
the same GPUs in the same intervals, are refused, by name (audit/overlap.py).

Before: the demo's bill beside a copy of its first third audited to 120,035.97 USD against 89,258.43,
with "does not reconcile" as the only sign. Exports that split a bill by period or by account are
read together as before, to the cent.
"""
from __future__ import annotations

import csv
import gzip
import io
import shutil
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest

from audit.overlap import counter_overlap_errors, overlap_errors, telemetry_overlap_errors
from tests.audit.cli.test_cli import costaudit
from tests.paths import FIXTURES

BILL = "billing/focus_2026-09.csv.gz"


def split_case(tmp_path: Path, keep_first, keep_second) -> Path:
    """The demo with its bill written as two sources: the rows ``keep_first`` and ``keep_second`` take."""
    case = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo", case)
    rows = list(csv.reader(io.StringIO(gzip.decompress((case / BILL).read_bytes()).decode("utf-8"))))
    header = rows[0]
    for name, keep in (("first.csv", keep_first), ("second.csv", keep_second)):
        out = io.StringIO()
        csv.writer(out, lineterminator="\n").writerows([header] + [r for r in rows[1:] if keep(dict(zip(header, r)))])
        (case / "billing" / name).write_text(out.getvalue(), encoding="utf-8")
    (case / BILL).unlink()
    toml = case / "case.toml"
    text = toml.read_text(encoding="utf-8").replace(f'path = "{BILL}"', 'path = "billing/first.csv"')
    toml.write_text(text + '\n[[billing]]\nname = "second"\nformat = "focus"\npath = "billing/second.csv"\n',
                    encoding="utf-8")
    return case


def early(row: dict) -> bool:
    return row["ChargePeriodStart"] < "2026-09-16"


def test_a_bill_split_by_period_is_read_whole(tmp_path):
    case = split_case(tmp_path, early, lambda row: not early(row))
    done = costaudit("run", case, "--out", tmp_path / "out", "--format", "json", "--quiet")
    assert done.returncode in (0, 2), done.stderr  # 2: the demo's own reconciliation verdict
    assert "total in scope (effective): 89258.43 USD" in done.stdout


def test_a_bill_split_by_account_is_read_whole(tmp_path):
    audited = lambda row: row["SubAccountId"] == "111111111111"  # noqa: E731
    case = split_case(tmp_path, audited, lambda row: not audited(row))
    done = costaudit("validate", case)
    assert done.returncode == 0 and "bill the same charges" not in done.stderr, done.stderr


def test_an_export_of_part_of_the_month_beside_the_month_is_refused(tmp_path):
    case = split_case(tmp_path, lambda row: True, early)
    done = costaudit("validate", case)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (error,) = [line for line in done.stderr.splitlines() if line.startswith("costaudit: error:")]
    assert "billing/second.csv: billing sources 'aws-focus' and 'second' bill the same charges over the same hours: " in error
    assert "fall in periods 'aws-focus' bills for the same account, resource and charge (the first: second.csv:" in error
    assert "an overlapping export would count them twice and overstate the invoice" in error
    assert not (tmp_path / "out").exists()


def lines(ids, starts, ends, billed, effective=None, resource="i-1") -> pd.DataFrame:
    effective = billed if effective is None else effective
    return pd.DataFrame({"line_id": ids, "start": pd.to_datetime(starts, utc=True), "end": pd.to_datetime(ends, utc=True),
                         "billed_cost": [Decimal(v) for v in billed], "effective_cost": [Decimal(v) for v in effective],
                         "provider": "AWS", "billing_account_id": "1", "sub_account_id": "2",
                         "charge_category": "Usage", "charge_description": "p5", "sku_id": "s", "resource_id": resource,
                         "region": "us-east-1"})


@pytest.mark.parametrize("second, shared", [
    (lines(["b:1"], ["2026-09-01T05"], ["2026-09-01T06"], ["3"]), "1 line(s) of 'b' (3.00 USD effective"),
    (lines(["b:1"], ["2026-09-02T00"], ["2026-09-03T00"], ["3"]), None),                      # after the span
    (lines(["b:1"], ["2026-09-01T05"], ["2026-09-01T06"], ["3"], resource="i-2"), None),       # another resource
    (lines(["b:1"], ["2026-09-01T05"], ["2026-09-01T06"], ["0"]), None),                       # costs nothing
    (lines([], [], [], []), None),                # no line in the window (it raised TypeError comparing dates)
])
def test_the_rule_on_lines(second, shared):
    first = lines(["a:1", "a:2"], ["2026-09-01T00", "2026-09-01T12"], ["2026-09-01T12", "2026-09-02T00"], ["5", "5"])
    found = overlap_errors([("a", "a.csv", first), ("b", "b.csv", second)], "USD")
    if shared is None:
        assert found == []
    else:
        (error,) = found
        assert shared in str(error) and "(the first: b:1, beside a:1)" in str(error)


def test_the_lines_billed_twice_are_counted_as_invoice_lines():
    """A row the reader summed from identical lines counts as all of them (it counted 1 row for 4 lines)."""
    first = lines(["a:1"], ["2026-09-01T00"], ["2026-09-02T00"], ["5"])
    second = lines(["b:1"], ["2026-09-01T05"], ["2026-09-01T06"], ["3"]).assign(line_count=4)
    (error,) = overlap_errors([("a", "a.csv", first), ("b", "b.csv", second)], "USD")
    assert "4 line(s) of 'b' (3.00 USD effective" in str(error)


def test_a_source_with_no_line_in_the_window_first_overlaps_nothing():
    second = lines(["b:1"], ["2026-09-01T05"], ["2026-09-01T06"], ["3"])
    assert overlap_errors([("a", "a.csv", lines([], [], [], [])), ("b", "b.csv", second)], "USD") == []


def test_a_source_naming_no_resource_is_compared_without_the_resource():
    first = lines(["a:1"], ["2026-09-01T00"], ["2026-09-02T00"], ["5"])
    second = lines(["b:1"], ["2026-09-01T05"], ["2026-09-01T06"], ["3"], resource="")
    (error,) = overlap_errors([("a", "a.csv", first), ("b", "b.csv", second)], "USD")
    assert "for the same account and charge ('b' names no resource) (the first: b:1, beside a:1)" in str(error)
    both_named = lines(["b:1"], ["2026-09-01T05"], ["2026-09-01T06"], ["3"], resource="i-2")
    assert overlap_errors([("a", "a.csv", first), ("b", "b.csv", both_named)], "USD") == []


def gcp_lines(rows: list[dict], path: Path, *, detailed: bool) -> pd.DataFrame:
    """The lines the gcp_billing reader gives for ``rows`` written as a Parquet export."""
    from connectors.base import ReadContext, SourceSpec
    from connectors.registry import resolve
    from tests.servers.gcp_export import JUNE, MAY, write_parquet

    write_parquet(rows, path, detailed=detailed)
    spec = SourceSpec(name=path.stem, kind="billing", format="gcp_billing", path=path, options={})
    return resolve("gcp_billing")(spec, ReadContext(start=MAY, end=JUNE, currency="USD")).read().tables["lines"]


def test_a_gcp_standard_export_beside_the_detailed_export_of_its_bill_is_refused(tmp_path):
    """The standard export names no resource: compared without it, its lines fall in the detailed
    export's (before: read together, the bill counted twice)."""
    from tests.servers.gcp_export import export_rows

    rows = export_rows()
    detailed = gcp_lines(rows, tmp_path / "detailed.parquet", detailed=True)
    standard = gcp_lines([dict(r, resource=None) for r in rows], tmp_path / "standard.parquet", detailed=False)
    (error,) = overlap_errors([("detailed", "detailed.parquet", detailed), ("standard", "standard.parquet", standard)],
                              "USD")
    assert "billing sources 'detailed' and 'standard' bill the same charges over the same hours" in str(error)
    assert "for the same account and charge ('standard' names no resource)" in str(error)


def test_gcp_exports_split_by_service_are_read_together(tmp_path):
    from tests.servers.gcp_export import export_rows

    rows = export_rows()
    compute = [r for r in rows if r["service"]["description"] == "Compute Engine"]
    others = [dict(r, resource=None) for r in rows if r["service"]["description"] != "Compute Engine"]
    assert compute and others
    detailed = gcp_lines(compute, tmp_path / "compute.parquet", detailed=True)
    standard = gcp_lines(others, tmp_path / "others.parquet", detailed=False)
    assert overlap_errors([("compute", "c", detailed), ("others", "o", standard)], "USD") == []


# ---- telemetry ------------------------------------------------------------------------------------

def test_the_same_telemetry_given_twice_is_refused(tmp_path):
    """The demo's OpenMetrics export beside the same export as plain text (another sha256, so not
    caught as the same file). Before: audited to the same total, with a note that each of the 24
    GPUs was time-sliced between its pod and itself, and the request counts cross-checked against a
    copy of themselves (gap 0.000000, as if two witnesses agreed)."""
    case = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo", case)
    (case / "telemetry" / "copy.om").write_bytes(gzip.decompress((case / "telemetry" / "metrics.om.gz").read_bytes()))
    toml = case / "case.toml"
    toml.write_text(toml.read_text(encoding="utf-8")
                    + '\n[[telemetry]]\nname = "second-export"\nformat = "openmetrics"\npath = "telemetry/copy.om"\n',
                    encoding="utf-8")
    done = costaudit("validate", case)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    (error,) = [line for line in done.stderr.splitlines() if line.startswith("costaudit: error:")]
    assert ("telemetry/copy.om: telemetry sources 'prometheus-export' and 'second-export' both report the activity of "
            "the same GPUs in the same intervals: ") in error
    assert "(the first: GPU 0 of node ip-10-0-1-11.ec2.internal at 2026-09-01 00:00 UTC)" in error


def activity(nodes, hours, gpu="0") -> pd.DataFrame:
    ts = [pd.Timestamp(f"2026-09-01T{h:02d}:00", tz="UTC") for h in hours]
    return pd.DataFrame([{"node": n, "gpu": gpu, "uuid": f"GPU-{n}", "ts": t, "busy_fraction": 0.5}
                         for n in nodes for t in ts])


@pytest.mark.parametrize("second, shared", [
    (activity(["a"], [5, 6]), 1),          # hour 5 of node a in both
    (activity(["b"], [0, 1]), 0),          # another node: a source per node pool
    (activity(["a"], [7, 8]), 0),          # later hours: a source per period
    (activity(["a"], [5], gpu="1"), 0),    # another GPU of the node
])
def test_the_telemetry_rule_on_gpu_intervals(second, shared):
    first = activity(["a"], range(6))
    found = telemetry_overlap_errors([("a", "a.om", first), ("b", "b.om", second), ("empty", "e.om", activity([], []))])
    assert len(found) == (1 if shared else 0)
    if shared:
        assert f"{shared:,} GPU-interval(s)" in str(found[0])


def counters(pods, hours, family="vllm") -> pd.DataFrame:
    ts = [pd.Timestamp(f"2026-09-01T{h:02d}:00", tz="UTC") for h in hours]
    return pd.DataFrame([{"ts": t, "model_name": "m" if family else "", "namespace": "llm" if family else "", "pod": p,
                          "requests": 10.0, "prompt_tokens": 0.0, "generated_tokens": 0.0, "family": family}
                         for p in pods for t in ts])


@pytest.mark.parametrize("second, shared", [
    (counters(["chat-0"], [3, 9]), 1),         # the same pod's counter in hour 3
    (counters(["chat-1"], [0, 1]), 0),         # another pod: a source per cluster
    (counters(["chat-0"], [8, 9]), 0),         # later hours: a source per period
    (counters(["chat"], [0, 1], family=""), 0),  # a request log: no pod, never compared
])
def test_the_counter_rule_on_pod_intervals(second, shared):
    first = counters(["chat-0"], range(6))
    found = counter_overlap_errors([("a", "a.om", first), ("b", "b.om", second)])
    assert len(found) == shared
    if shared:
        assert "both count the requests of the same pods in the same intervals: 1 pod-interval(s) of vllm" in str(found[0])


def test_the_demo_counters_given_again_are_refused(tmp_path):
    """The demo's vLLM series alone, as a second source: before this stop a second source of one
    counter was a second witness, now the sources of one counter are added, so a repeat is refused."""
    case = tmp_path / "demo"
    shutil.copytree(FIXTURES / "demo", case)
    text = gzip.decompress((case / "telemetry" / "metrics.om.gz").read_bytes()).decode()
    vllm = [line for line in text.splitlines() if line.startswith(("vllm:", "# TYPE vllm:", "# HELP vllm:"))]
    (case / "telemetry" / "vllm.om").write_text("\n".join(vllm + ["# EOF"]) + "\n")
    toml = case / "case.toml"
    toml.write_text(toml.read_text(encoding="utf-8")
                    + '\n[[telemetry]]\nname = "vllm-again"\nformat = "openmetrics"\npath = "telemetry/vllm.om"\n',
                    encoding="utf-8")
    done = costaudit("validate", case)
    assert done.returncode == 1
    assert ("telemetry sources 'prometheus-export' and 'vllm-again' both count the requests of the same pods in the "
            "same intervals: 15,120 pod-interval(s) of vllm counters") in done.stderr


def test_one_bill_as_focus_and_as_the_providers_own_export_is_refused(tmp_path):
    """An AKS month as Microsoft's FOCUS export and as the EA cost details export: the charges are
    spelled apart (the subscription as ARM path or GUID, other descriptions and SKU ids), so the
    charge test found nothing and the bill was counted twice. Per resource and day both give the
    same cost to the cent."""
    from benchmarks.cloudgen.generate import generate

    generate("aks", 700, tmp_path / "focus", billing="focus")
    generate("aks", 700, tmp_path / "native", billing="native")
    case = tmp_path / "focus"
    shutil.copy(tmp_path / "native" / "billing" / "ea_amortized_2026-09.csv", case / "billing")
    toml = case / "case.toml"
    toml.write_text(toml.read_text(encoding="utf-8") + '\n[[billing]]\nname = "azure"\nformat = "azure"\n'
                    'path = "billing/ea_amortized_2026-09.csv"\nview = "amortized"\n', encoding="utf-8")
    done = costaudit("validate", case)
    assert done.returncode == 1, done.stderr
    assert "billing sources 'focus' and 'azure' bill the same resources for the same cost on the same days: " in done.stderr
    assert "the same bill in two exports (a FOCUS export beside the provider's own) would be counted twice" in done.stderr
