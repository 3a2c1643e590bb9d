"""Stage 3's source text of a GPU part (METHOD: every figure names the source that measured it): the
telemetry sources named beside a kernel-activity metric are those whose activity rows carry it, not
every telemetry source of the case (a request log counts requests, it measures no GPU activity)."""
from __future__ import annotations

from datetime import UTC, datetime

import pandas as pd

from audit.attribute import describer
from audit.collected import Collected
from audit.ledger import Group
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
    describe = describer(_collected(), "gcp-export")
    group = Group("ocr", TS, sources={"DCGM_FI_PROF_GR_ENGINE_ACTIVE"})
    assert describe(group, "ocr") == ("DCGM_FI_PROF_GR_ENGINE_ACTIVE (prom) × GPU-interval cost of FOCUS "
                                      "lines (gcp-export)")
    both = Group("ocr", TS, sources={"DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"})
    assert describe(both, "ocr") == ("DCGM_FI_DEV_GPU_UTIL/DCGM_FI_PROF_GR_ENGINE_ACTIVE (node2, prom) × "
                                     "GPU-interval cost of FOCUS lines (gcp-export)")


def test_a_group_with_no_sample_names_the_sources_that_hold_activity_samples():
    describe = describer(_collected(), "gcp-export")
    assert describe(Group("no sample", TS), None) == (
        "no kernel-activity sample (prom, node2) × GPU-interval cost of FOCUS lines (gcp-export)")
