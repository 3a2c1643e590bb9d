"""Prometheus ``query_range`` JSON dumps -> the same tables as the OpenMetrics connector.

A dump is the body the HTTP API returns for ``/api/v1/query_range``::

    {"status": "success", "data": {"resultType": "matrix",
     "result": [{"metric": {"__name__": "...", ...}, "values": [[1756720800, "0.5"], ...]}]}}

The path is one such file or a folder of them (every ``*.json`` below it, in name order). Each
series is handed, sample by sample, to the OpenMetrics connector's metric families, so binning onto
the window grid, averaging of gauges and differencing of counters (resets included) are exactly
those of ``openmetrics``. Series whose metric the audit does not use are skipped. Timestamps are
Unix seconds, as the API returns them. In error messages ``row`` is the series' position in
``data.result`` (from 1) and ``column`` the JSON field at fault.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import ClassVar

import pandas as pd

from connectors.bounds import EITHER, nested_too_deep, shown
from connectors.errors import InputError
from connectors.telemetry.families import new_families
from connectors.telemetry.om_repeats import drop_repeats
from connectors.telemetry.omtext import MS_THRESHOLD, Scan
from connectors.telemetry.openmetrics import OpenMetricsConnector, near_series, with_repeats

DUMP_FORM = ('{"status": "success", "data": {"resultType": "matrix", '
             '"result": [{"metric": {...}, "values": [[ts, "v"], ...]}]}}')


def dump_files(path: Path) -> list[Path]:
    """The dump files to read: the file itself, or every ``*.json`` under a folder by name."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*.json") if p.is_file())
        if not files:
            raise InputError(path, "no .json files in the folder", expected=DUMP_FORM)
        return files
    return [path]


def load_matrix(path: Path) -> list:
    """The ``data.result`` list of one dump; anything but a successful matrix is an InputError."""
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(path, f"not valid JSON ({shown(str(exc))})", expected=DUMP_FORM) from None
    except RecursionError:
        raise InputError(path, nested_too_deep(), expected=DUMP_FORM) from None
    if isinstance(body, dict) and body.get("status", "success") != "success":
        raise InputError(path, f"query failed: {shown(body.get('error', body.get('status')))}",
                         column="status", expected='"success"')
    if not isinstance(body, dict) or not isinstance(body.get("data"), dict):
        raise InputError(path, "no 'data' object", column="data", expected=DUMP_FORM)
    data = body["data"]
    if data.get("resultType") != "matrix":
        raise InputError(path, f"resultType is {shown(data.get('resultType'))}",
                         column="resultType", expected='"matrix" (a query_range result)')
    result = data.get("result")
    if not isinstance(result, list):
        raise InputError(path, "data.result is not a list", column="result", expected=DUMP_FORM)
    return result


def raw_labels(metric: dict[str, str]) -> str:
    """The label set (``__name__`` aside) written as OpenMetrics ``{a="x",...}`` text."""
    def escape(value: str) -> str:
        return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
    pairs = (f'{k}="{escape(v)}"' for k, v in sorted(metric.items()) if k != "__name__")
    return "{" + ",".join(pairs) + "}"


def sample(pair, path: Path, row: int) -> tuple[float, float]:
    """(seconds, value) of one ``[ts, "value"]`` pair."""
    try:
        if not isinstance(pair, list) or len(pair) != 2 or any(isinstance(p, (bool, list, dict)) for p in pair):
            raise TypeError(pair)
        t, v = float(pair[0]), float(pair[1])
    except (TypeError, ValueError, OverflowError):
        raise InputError(path, f"bad sample {shown(pair)}", row=row, column="values",
                         expected='[unix seconds, "value"]') from None
    if not math.isfinite(t) or abs(t) > MS_THRESHOLD:
        raise InputError(path, f"timestamp {shown(pair[0])} is not Unix seconds", row=row,
                         column="values", expected="a Unix timestamp in seconds")
    return t, v


def scan_matrix(result: list, path: Path, by_name: dict, scan: Scan) -> None:
    """Hand every sample of the wanted series to its OpenMetrics family."""
    for row, series in enumerate(result, 1):
        if not isinstance(series, dict) or not isinstance(series.get("metric"), dict):
            raise InputError(path, "series has no 'metric' object", row=row, column="metric",
                             expected=DUMP_FORM)
        metric = series["metric"]
        name = metric.get("__name__")
        if not name or not isinstance(name, str):
            raise InputError(path, "series has no __name__ label", row=row, column="metric",
                             expected="query_range results that keep the metric name")
        wrong = next((k for k, v in metric.items() if not isinstance(v, str)), None)
        if wrong is not None:
            raise InputError(path, f"label {shown(wrong)} is {shown(metric[wrong])}, not a string", row=row,
                             column="metric", expected="label values as strings")
        values = series.get("values")
        if not isinstance(values, list):
            raise InputError(path, "series has no 'values' list", row=row, column="values",
                             expected=DUMP_FORM)
        family = by_name.get(name)
        raw = raw_labels(series["metric"]) if family is not None else None
        if family is None:
            scan.unread.add(name)
        for pair in values:
            t, v = sample(pair, path, row)
            scan.rows += 1
            scan.see_one(t)
            if family is not None:
                family.add(name, raw, v, t, path, row)


class PromDumpConnector(OpenMetricsConnector):
    """Reads Prometheus ``query_range`` JSON dumps (a file or a folder of them)."""

    format_name: ClassVar[str] = "prom_dump"
    accepts: ClassVar[str] = EITHER

    def fetch(self) -> tuple[dict[str, pd.DataFrame], int, tuple]:
        """Load every dump into the OpenMetrics families, then build the tables on one grid."""
        roles, by_name = new_families()
        scan = Scan()
        for path in dump_files(self.path):
            scan_matrix(load_matrix(path), path, by_name, scan)
        if scan.rows == 0:
            raise InputError(self.path, "no samples in the dump", expected=DUMP_FORM)
        scan.repeats = drop_repeats(list({id(f): f for f in roles.values()}.values()))
        tables, covered_span = self._tables(roles)
        tables.update(near_series(scan))
        tables["excluded_samples"] = with_repeats(tables["excluded_samples"], scan)
        self.untimestamped = 0
        self.extent = scan.extent()
        return tables, scan.rows, covered_span
