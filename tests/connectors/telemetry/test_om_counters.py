"""The counter families reduced into interval cells while the file is read (``om_counters``):
the connector's tables equal, bit for bit, those built from every sample after the read
(``tables.counter_increases``), whatever the order of the samples, the blocks, the values (resets,
excluded samples, fractional counts); and a file the cells cannot reproduce exactly is read again
without reducing its counters."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.base import ReadContext, SourceSpec
from connectors.telemetry import om_counters, om_stream
from connectors.telemetry.openmetrics import OpenMetricsConnector
from tests.connectors.telemetry import vllm_phases
from tests.connectors.telemetry.test_om_stream import T0
from tests.paths import FIXTURES

LABELS = ['model_name="m",namespace="n",pod="p{}",engine="0"', 'model_name="m",namespace="n",pod="p{}"']
NAMES = ["vllm:request_success_total", "vllm:prompt_tokens_total",
         "vllm:request_queue_time_seconds_sum", "nv_inference_queue_duration_us",
         'vllm:request_prompt_tokens_bucket{{le="10"}}']


def tables(path: Path, step: int, streamed: bool, monkeypatch, start: int | None = None
           ) -> dict[str, pd.DataFrame]:
    """The connector's tables, its counters reduced while reading or not."""
    if not streamed:
        monkeypatch.setattr(OpenMetricsConnector, "_case_grid", lambda self: None)
    if start is None:
        roles, _ = om_stream.read_families(path)
        first = int(np.nanmin(np.concatenate([np.asarray(f.t) for f in roles.values() if len(f.t)])))
        start = first - first % 3600
    begin = datetime.fromtimestamp(start, timezone.utc)
    ctx = ReadContext(begin, begin + timedelta(hours=3), "USD", step)
    out = dict(OpenMetricsConnector(SourceSpec("t", "telemetry", "openmetrics", path),
                                    ctx).fetch()[0])
    monkeypatch.undo()
    return out


def assert_same_tables(path: Path, step: int, monkeypatch, start: int | None = None) -> None:
    """Streamed and read-whole tables are equal, exactly."""
    streamed = tables(path, step, True, monkeypatch, start)
    whole = tables(path, step, False, monkeypatch, start)
    assert streamed.keys() == whole.keys()
    for name, table in whole.items():
        pd.testing.assert_frame_equal(streamed[name], table, check_exact=True,
                                      obj=f"{path.name} {step} {name}")


@pytest.mark.parametrize("block", [64, 1 << 20])
def test_fixtures_stream_alike(tmp_path, monkeypatch, block):
    phases = tmp_path / "phases.om"
    vllm_phases.write(phases, T0)
    for path in [FIXTURES / "telemetry_serving" / "serving.om", phases,
                 FIXTURES / "telemetry_small" / "cluster.om"]:
        for step in (60, 900):
            monkeypatch.setattr(om_stream, "BLOCK", block)
            assert_same_tables(path, step, monkeypatch)


def test_streamed_counters_hold_no_samples(tmp_path):
    phases = tmp_path / "phases.om"
    vllm_phases.write(phases, T0)
    from connectors.telemetry.grid import NS, Grid
    roles, scan, cells = om_stream.read_reduced(phases, Grid(T0 * NS, (T0 + 7200) * NS, 300))
    assert scan.rows > 1000 and len(roles["counters"].sid) == len(roles["server_counters"].sid) == 0
    assert cells["counters"].total > 0 and not cells["counters"].pairs  # all whole: summed


@pytest.mark.parametrize("lines, reads", [
    (["vllm:request_success_total{pod=\"a\"} 1.5 %d" % (T0 + 90)], [True, False]),  # a fractional count
    # back in time: the stream reader reads it again line by line itself (om_repeats.Repeated)
    (["vllm:request_success_total{pod=\"a\"} 3 %d" % (T0 + 45)], [True]),
])  # a repeated time with another value is an error, the same value dropped (test_openmetrics)
def test_what_the_cells_cannot_reproduce_is_read_whole(tmp_path, monkeypatch, lines, reads):
    path = tmp_path / "c.om"
    body = [f'vllm:request_success_total{{pod="a"}} {v} {T0 + 30 * i}' for i, v in enumerate([1, 2, 5])]
    path.write_text("\n".join(body + lines) + "\n# EOF\n")
    calls = []
    real = om_stream.read_reduced
    monkeypatch.setattr("connectors.telemetry.openmetrics.read_reduced",
                        lambda p, grid: calls.append(grid is not None) or real(p, grid))
    streamed = tables(path, 60, True, monkeypatch, T0 - T0 % 3600)
    assert calls == reads  # reduced, refused, read again whole
    whole = tables(path, 60, False, monkeypatch, T0 - T0 % 3600)
    for name, table in whole.items():
        pd.testing.assert_frame_equal(streamed[name], table, check_exact=True, obj=name)
    assert len(whole["traffic"])


SERIES = st.tuples(st.integers(0, 2), st.integers(0, len(NAMES) - 1), st.integers(0, 1),
                   st.lists(st.tuples(st.integers(1, 40), st.sampled_from(
                       ["{}"] * 12 + ["{}.5", "NaN", "-1", "+Inf", "0"]),
                       st.integers(0, 6)), min_size=1, max_size=25))


def series_lines(pod: int, name: int, labels: int, points: list) -> list[str]:
    """One series' samples: times rising by each point's gap (in 30 s scrapes), values mostly
    rising counts (some fractional, excluded, or a reset to a small count)."""
    head = NAMES[name].replace("{{", "{").replace("}}", "}")
    labels_text = LABELS[labels].format(pod)
    head = head[:-1] + "," + labels_text + "}" if head.endswith("}") else head + "{" + labels_text + "}"
    out, minute, count = [], -3, 0
    for gap, value, step in points:
        minute += gap
        count = step if step == 0 else count + step  # 0: a restart
        out.append(f"{head} {value.format(count)} {T0 + 30 * minute}")
    return out


@settings(max_examples=80, deadline=None)
@given(series=st.lists(SERIES, min_size=1, max_size=6), order=st.randoms(use_true_random=False),
       interleave=st.booleans(), step=st.sampled_from([60, 600]), block=st.sampled_from([64, 1 << 20]))
def test_any_counters_stream_alike(tmp_path_factory, series, order, interleave, step, block):
    series = list({one[:3]: one for one in series}.values())  # a series twice: repeats (test_openmetrics)
    lines = [line for one in series for line in series_lines(*one)]
    if interleave:  # as scraped: series mixed, each in time
        order.shuffle(lines)
        lines.sort(key=lambda line: int(line.rsplit(" ", 1)[1]))
    path = tmp_path_factory.mktemp("counters") / "c.om"
    path.write_text("\n".join(lines) + "\n# EOF\n")
    old = om_stream.BLOCK
    om_stream.BLOCK = block
    try:
        with pytest.MonkeyPatch.context() as monkeypatch:
            assert_same_tables(path, step, monkeypatch, T0 - T0 % 3600)
    finally:
        om_stream.BLOCK = old


def test_is_whole():
    assert om_counters.is_whole("requests") and om_counters.is_whole("bucket:prompt_tokens@10")
    assert not om_counters.is_whole("queue_seconds")
