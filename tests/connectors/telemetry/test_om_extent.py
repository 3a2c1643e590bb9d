"""The span an OpenMetrics file or a Prometheus dump covers, inside the window or not (SourceFrame.extent).

A telemetry export of last quarter beside this month's bill read as "telemetry names no pod" of each
service, and nothing said why; the audit now names the source and the span its samples cover
(audit/fit_window.py ``telemetry_window_fit``). The span is kept by every reading path: the vector
path of plain blocks, the line-by-line path, a dump's JSON, and the whole-file path a case without
a step takes.
"""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.telemetry.prom_dump import PromDumpConnector
from tests.connectors.telemetry.test_offline_telemetry import T0 as DUMP_T0
from tests.connectors.telemetry.test_offline_telemetry import dump, series
from tests.connectors.telemetry.test_offline_telemetry import read as read_with
from tests.connectors.telemetry.test_openmetrics import GR, START, T0, gpu, line, read


def moment(seconds: float) -> datetime:
    """``seconds`` after the window start, as a UTC datetime."""
    return datetime.fromtimestamp(T0 + seconds, timezone.utc)


@pytest.mark.parametrize("step", [60, None])
@pytest.mark.parametrize("slow", [False, True])
def test_a_file_outside_the_window_knows_where_its_samples_lie(tmp_path, step, slow):
    labels = gpu(0, **({"note": "é"} if slow else {}))  # a non-ASCII label: the line-by-line reader
    times = [-86_400 * 3, -86_400 * 2 - 30, -86_400 * 2]
    frame = read(tmp_path, [line(GR, labels, 0.5, t) for t in times], step=step)
    assert frame.covered == (None, None) and frame.rows == 3
    assert frame.extent == (moment(times[0]), moment(times[-1]))


def test_a_file_inside_the_window_has_its_extent_beyond_the_window_too(tmp_path):
    frame = read(tmp_path, [line(GR, gpu(0), 0.5, t) for t in (-7200, 60, 120, 7200 * 3)])
    assert frame.covered == (moment(60), moment(120))
    assert frame.extent == (moment(-7200), moment(7200 * 3))


def test_a_scrape_without_timestamps_has_no_extent(tmp_path):
    frame = read(tmp_path, [line(GR, gpu(0), 0.5), line(GR, gpu(1), 0.25)])
    assert frame.extent == (None, None)


def test_a_dump_knows_where_its_samples_lie(tmp_path):
    frame = read_with(PromDumpConnector, dump(tmp_path / "q.json", [series(GR, gpu(0), [(-9000, 0.5), (-5400, 0.2)])]))
    assert frame.covered == (None, None)
    assert frame.extent == tuple(datetime.fromtimestamp(DUMP_T0 + t, timezone.utc) for t in (-9000, -5400))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-10 ** 7, 10 ** 7), min_size=1, max_size=30, unique=True), st.booleans())
def test_the_extent_is_the_first_and_last_timestamp(tmp_path_factory, offsets, slow):
    tmp = tmp_path_factory.mktemp("extent")
    labels = gpu(0, **({"note": "é"} if slow else {}))
    frame = read(tmp, [line(GR, labels, 0.5, t) for t in sorted(offsets)])
    assert frame.extent == (moment(min(offsets)), moment(max(offsets)))
    assert START - timedelta(seconds=10 ** 7) <= frame.extent[0] <= frame.extent[1]
