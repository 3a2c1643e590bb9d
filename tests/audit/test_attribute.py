"""Stage 3's source text of a GPU part (METHOD: every figure names the source that measured it): the
telemetry sources named beside a kernel-activity metric are those whose activity rows carry it, not
every telemetry source of the case (a request log counts requests, it measures no GPU activity)."""
from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pandas as pd

from audit.attribute import attribute_leftovers, attribute_lines, describer
from audit.billing_words import lines_of
from audit.collected import Collected
from audit.ledger import Group, Ledger, Leftover
from tests.builders import activity, frame

TS = datetime(2026, 9, 1, tzinfo=UTC)


def _collected() -> Collected:
    gr = activity([{"node": "n1", "ts": "2026-09-01T00:00:00Z", "busy_fraction": 0.5}])
    util = activity([{"node": "n2", "ts": "2026-09-01T00:00:00Z", "busy_fraction": 0.5,
                      "source": "DCGM_FI_DEV_GPU_UTIL"}])
    log = pd.DataFrame({"ts": [pd.Timestamp(TS)], "pod": ["web"], "requests": [120.0]})
    return Collected((frame("telemetry", "prometheus", {"gpu_activity": gr}, name="prom"),
                      frame("telemetry", "access_log", {"traffic": log}, name="web-log"),
                      frame("telemetry", "openmetrics", {"gpu_activity": util}, name="node2"),
                      frame("telemetry", "access_log", {"traffic": log}, name="ocr-log")))


def test_a_gpu_part_names_only_the_sources_whose_activity_rows_measured_it():
    describe = describer(_collected(), "GCP billing export lines (gcp-export)")
    group = Group("ocr", TS, sources={"DCGM_FI_PROF_GR_ENGINE_ACTIVE"})
    assert describe(group, "ocr") == ("DCGM_FI_PROF_GR_ENGINE_ACTIVE (prom) × GPU-interval cost of GCP "
                                      "billing export lines (gcp-export)")
    both = Group("ocr", TS, sources={"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"})
    assert describe(both, "ocr") == ("DCGM_FI_DEV_GPU_UTIL/DCGM_FI_PROF_GR_ENGINE_ACTIVE (node2, prom) × "
                                     "GPU-interval cost of GCP billing export lines (gcp-export)")


def test_a_group_with_no_sample_names_the_sources_that_hold_activity_samples():
    describe = describer(_collected(), "GCP billing export lines (gcp-export)")
    assert describe(Group("no sample", TS), None) == (
        "no kernel-activity sample (prom, node2) × GPU-interval cost of GCP billing export lines (gcp-export)")


SHIPPED_UNUSED = "commitment paid but not used (FOCUS CommitmentDiscountStatus = Unused)"


def _unused_part(formats: dict[str, str]) -> tuple[str, str]:
    charges = pd.DataFrame({"resource_class": ["commitment_unused"] * 2, "rule_reason": [SHIPPED_UNUSED] * 2,
                            "net": [Decimal("200.00"), Decimal("61.96")], "line_count": [1, 1],
                            "source": list(formats)[:1] * 2})
    ledger = Ledger()
    attribute_lines(ledger, charges, lines_of(formats.values(), ", ".join(formats)), formats)
    [part] = ledger.parts.values()
    return part.sources.pop(), part.reason


def test_a_gcp_export_part_names_its_own_format_and_fields():
    """Before: 'FOCUS lines (gcp_billing), class commitment_unused' and '(FOCUS CommitmentDiscountStatus
    = Unused)' for lines a GCP billing export gave."""
    assert _unused_part({"gcp_billing": "gcp_billing"}) == (
        "GCP billing export lines (gcp_billing), class commitment_unused",
        "commitment paid but not used (GCP commitment fee rows less the usage their COMMITTED_USAGE_DISCOUNT "
        "credits cover)")


def test_cur_azure_and_focus_parts_name_their_formats():
    assert _unused_part({"cur": "cur"}) == (
        "CUR lines (cur), class commitment_unused",
        "commitment paid but not used (CUR RIFee / SavingsPlanRecurringFee lines' unused part)")
    assert _unused_part({"azure": "azure"}) == (
        "Azure cost details lines (azure), class commitment_unused",
        "commitment paid but not used (Azure ChargeType UnusedReservation / UnusedSavingsPlan)")
    assert _unused_part({"focus": "focus"}) == ("FOCUS lines (focus), class commitment_unused", SHIPPED_UNUSED)


def test_the_shipped_unused_rule_says_the_focus_field_replaced_per_format():
    shipped = (Path(__file__).parents[2] / "audit" / "data" / "rules.toml").read_text()
    assert f'reason = "{SHIPPED_UNUSED}"' in shipped


def test_an_unapplied_adjustment_names_its_line_in_the_format_read():
    ledger = Ledger()
    attribute_leftovers(ledger, [Leftover("L7", Decimal("-1.50"), "credit line with no charge to apply to")],
                        "GCP billing export", "gcp_billing")
    [part] = ledger.parts.values()
    assert part.sources == {"GCP billing export line L7 (gcp_billing)"}
