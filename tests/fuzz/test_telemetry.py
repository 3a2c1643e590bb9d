"""Fuzz the telemetry readers: OpenMetrics text, Prometheus query_range dumps (JSON), sacct,
nvidia-smi and dcgmi logs, access logs."""
from __future__ import annotations

import gzip
import json
from datetime import datetime, timezone

from hypothesis import given
from hypothesis import strategies as st

from tests.builders import query_range_dump
from tests.connectors.telemetry.test_access_log import LOG
from tests.fuzz.harness import FUZZ, check, mutated, mutated_cells, read_csv_seed, read_source, scratch
from tests.fuzz.values import json_mutated
from tests.paths import FIXTURES

UTC = timezone.utc
OM_LINES = (FIXTURES / "telemetry_small" / "cluster.om").read_text().splitlines()
OM = "\n".join(OM_LINES[:12] + [ln for ln in OM_LINES if ln.startswith(("kube_", "vllm", "# TYPE kube"))][:30]
               + ["# EOF"]).encode() + b"\n"
OM_WINDOW = (datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 2, tzinfo=UTC))
OFFLINE = FIXTURES / "offline_telemetry"
OFFLINE_WINDOW = (datetime(2026, 9, 1, 8, tzinfo=UTC), datetime(2026, 9, 1, 12, tzinfo=UTC))
SACCT_HEADER, SACCT_ROWS = read_csv_seed(OFFLINE / "sacct.txt", sep="|")
SMI_HEADER, SMI_ROWS = read_csv_seed(OFFLINE / "nvidia_smi.csv")
DMON = {"start": "2026-09-01T08:00:10Z", "interval_ms": 30000, "node": "gpu-node-1"}
LOG_WINDOW = (datetime(2019, 11, 26, tzinfo=UTC), datetime(2019, 11, 27, tzinfo=UTC))


def _dump_seed() -> dict:
    with scratch() as folder:
        (folder / "m.om").write_bytes(b"\n".join(ln for ln in OM.splitlines() if not ln.startswith(b"#")) + b"\n")
        return json.loads(query_range_dump(folder / "m.om", folder / "dump.json").read_text())


DUMP = _dump_seed()


@FUZZ
@given(data=mutated(OM), gz=st.booleans())
def test_openmetrics(data, gz):
    with scratch() as folder:
        path = folder / ("metrics.om.gz" if gz else "metrics.om")
        path.write_bytes(gzip.compress(data) if gz else data)
        check(lambda: read_source("openmetrics", path, window=OM_WINDOW, step=None), path)


@FUZZ
@given(data=st.one_of(json_mutated(DUMP), mutated(json.dumps(DUMP).encode())), folder_of_them=st.booleans())
def test_prom_dump(data, folder_of_them):
    with scratch() as folder:
        path = folder / "dumps" if folder_of_them else folder / "dump.json"
        target = path / "a.json" if folder_of_them else path
        target.parent.mkdir(exist_ok=True)
        target.write_bytes(data)
        check(lambda: read_source("prom_dump", path, window=OM_WINDOW, step=300), path)


@FUZZ
@given(data=st.one_of(mutated_cells(SACCT_HEADER, SACCT_ROWS, sep="|"), mutated((OFFLINE / "sacct.txt").read_bytes())))
def test_sacct(data):
    with scratch() as folder:
        path = folder / "sacct.txt"
        path.write_bytes(data)
        check(lambda: read_source("sacct", path, window=OFFLINE_WINDOW, step=60, utc_offset="+02:00"), path)


@FUZZ
@given(data=st.one_of(mutated_cells(SMI_HEADER, SMI_ROWS), mutated((OFFLINE / "nvidia_smi.csv").read_bytes())))
def test_nvidia_smi(data):
    with scratch() as folder:
        path = folder / "smi.csv"
        path.write_bytes(data)
        check(lambda: read_source("nvidia_smi", path, window=OFFLINE_WINDOW, step=60, utc_offset="+02:00"), path)


@FUZZ
@given(data=mutated((OFFLINE / "dcgmi_dmon.txt").read_bytes()))
def test_dcgmi(data):
    with scratch() as folder:
        path = folder / "dmon.txt"
        path.write_bytes(data)
        check(lambda: read_source("dcgmi", path, window=OFFLINE_WINDOW, step=60, **DMON), path)


@FUZZ
@given(data=mutated(LOG.encode()), gz=st.booleans())
def test_access_log(data, gz):
    with scratch() as folder:
        path = folder / ("access.log.gz" if gz else "access.log")
        path.write_bytes(gzip.compress(data) if gz else data)
        check(lambda: read_source("access_log", path, window=LOG_WINDOW, step=3600, service="web"), path)


OPENCOST = json.loads((OFFLINE / "opencost_allocation.json").read_text())


@FUZZ
@given(data=st.one_of(json_mutated(OPENCOST), mutated((OFFLINE / "opencost_allocation.json").read_bytes())))
def test_opencost(data):
    with scratch() as folder:
        path = folder / "allocation.json"
        path.write_bytes(data)
        check(lambda: read_source("opencost", path, window=OFFLINE_WINDOW, step=3600), path)
