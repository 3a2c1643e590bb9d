"""The gauge families reduced into interval cells while the file is read (``om_cells``): the
means are bit for bit pandas' ``groupby(keys).v.mean()`` over the per-sample frames, whichever of
its two sums pandas takes (one ``reduceat`` segment per group where the rows come in group order,
a compensated sum otherwise), whatever the blocks and batches; and the connector's tables with the
gauge families streamed equal those with the cells filled after the read."""
from __future__ import annotations

from array import array
from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.base import ReadContext, SourceSpec
from connectors.telemetry import om_cells, om_stream
from connectors.telemetry.distinct import plain_index
from connectors.telemetry.families import Family
from connectors.telemetry.grid import NS, Grid
from connectors.telemetry.om_cells import GaugeCells, kahan_add
from connectors.telemetry.openmetrics import OpenMetricsConnector
from tests.connectors.telemetry.test_om_stream import T0
from tests.paths import FIXTURES

GRID = Grid(1000 * NS, 2000 * NS, 60)
COLUMNS = ("metric", "node", "gpu", "uuid")
VALUES = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                   st.sampled_from([1e16, 1.0, -1e16, 0.1, 1e308, -1e308, 0.3]))


def reference(family: Family, keys: list[str]) -> pd.Series:
    """What ``tables`` computed from the family's samples before the cells."""
    frame = GRID.gauges(family.frame())
    return pd.Series([], dtype=float) if frame.empty else plain_index(
        frame.groupby(keys).v.mean())


def reduced_means(family: Family, keys: list[str], cuts: list[int]) -> pd.Series:
    """The cells' means, the family's samples handed over in blocks cut at ``cuts``."""
    cells = GaugeCells(family, GRID, keys)
    sid, t, v = (np.frombuffer(a, dtype=d) for a, d in
                 ((family.sid, np.int64), (family.t, float), (family.v, float)))
    bounds = [0, *sorted(c % (len(sid) + 1) for c in cuts), len(sid)]
    for a, b in zip(bounds, bounds[1:]):
        cells.add(sid[a:b], t[a:b], v[a:b])
    return cells.means()


def family_of(series: list[tuple], samples: list[tuple[int, float, float]]) -> Family:
    """A DCGM evidence family with these series and (series, t, v) samples, in order."""
    family = Family(COLUMNS, lambda name, labels: None)
    family.meta = series
    family.sid = array("q", [s for s, _, _ in samples])
    family.t, family.v = array("d", [t for _, t, _ in samples]), array("d", [v for _, _, v in samples])
    return family


SERIES = st.lists(st.tuples(st.sampled_from(["a", "b"]), st.sampled_from(["n0", "n1"]),
                            st.just("0"), st.sampled_from(["", "GPU-1"])), min_size=1, max_size=4)


TIMES = st.one_of(st.floats(990, 2010), st.just(float("nan")))


@settings(max_examples=200, deadline=None)
@given(series=SERIES, data=st.data(), in_order=st.booleans(),
       keys=st.sampled_from([[*COLUMNS, "k"], ["k", "node", "metric"], ["uuid", "k"]]),
       cuts=st.lists(st.integers(0, 10_000), max_size=4), batch=st.sampled_from([1, 5, 1 << 18]))
def test_means_are_pandas_means(series, data, in_order, keys, cuts, batch):
    samples = data.draw(st.lists(st.tuples(st.integers(0, len(series) - 1), TIMES, VALUES),
                                 max_size=80))
    if in_order:  # series by series, in time: pandas' reduceat path where the keys allow
        samples.sort(key=lambda s: (s[0], np.nan_to_num(s[1])))
    family = family_of(series, samples)
    old, om_cells.BATCH = om_cells.BATCH, batch
    try:
        with np.errstate(all="ignore"):
            expected = reference(family, keys)
            got = reduced_means(family, keys, cuts)
    finally:
        om_cells.BATCH = old
    pd.testing.assert_series_equal(got, expected, check_exact=True)


@pytest.mark.parametrize("interleaved", [False, True])
def test_the_sum_pandas_takes(interleaved):
    # values whose pairwise sum (7.401000000000001) is not their compensated sum (7.401)
    values = [0.001, 1.0, 1.0, 0.7, 0.7, 0.1, 0.1, 0.1, 0.7, 3.0]
    samples = [(0, 1000.0 + i, v) for i, v in enumerate(values)]
    samples += [(1, 1000.0 + i, v) for i, v in enumerate(values)]
    if interleaved:  # rows out of group order: pandas sums with compensation
        samples = [samples[i // 2 + (i % 2) * len(values)] for i in range(len(samples))]
    family = family_of([("a", "n0", "0", ""), ("b", "n0", "0", "")], samples)
    got = reduced_means(family, [*COLUMNS, "k"], [3, 11])
    pd.testing.assert_series_equal(got, reference(family, [*COLUMNS, "k"]), check_exact=True)
    assert got.iloc[0] == (7.401 if interleaved else 7.401000000000001) / 10


def test_kahan_add_carries_over_batches():
    cells = np.array([0, 1, 0, 0, 1, 2])
    values = np.array([1e16, 1.0, 1.0, 1.0, 2.0, 1e308])
    whole = [np.zeros(3), np.zeros(3), np.zeros(3, np.int64)]
    kahan_add(cells, values, *whole)
    parts = [np.zeros(3), np.zeros(3), np.zeros(3, np.int64)]
    for a, b in [(0, 1), (1, 4), (4, 6)]:
        kahan_add(cells[a:b], values[a:b], *parts)
    for x, y in zip(whole, parts):
        assert np.array_equal(x, y)
    assert whole[0][0] == 1e16 + 2 and list(whole[2]) == [3, 2, 1]


def _tables(path, step: int, streamed: bool, monkeypatch) -> dict[str, pd.DataFrame]:
    """The connector's tables, the gauge families streamed or reduced after the read."""
    if not streamed:
        monkeypatch.setattr(OpenMetricsConnector, "_case_grid", lambda self: None)
    roles, _ = om_stream.read_families(path)
    first = int(np.nanmin(np.concatenate([np.asarray(f.t) for f in roles.values() if len(f.t)])))
    start = datetime.fromtimestamp(first - first % 3600, timezone.utc)
    ctx = ReadContext(start, start + timedelta(days=2), "USD", step)
    tables = dict(OpenMetricsConnector(SourceSpec("t", "telemetry", "openmetrics", path),
                                       ctx).fetch()[0])
    monkeypatch.undo()
    return tables


@pytest.mark.parametrize("block", [64, 1 << 20])
def test_streamed_tables_are_the_tables(tmp_path, monkeypatch, block):
    crlf = tmp_path / "crlf.om"  # read whole by the line-by-line reader, then reduced
    crlf.write_bytes((FIXTURES / "telemetry_small" / "cluster.om").read_bytes()
                     .replace(b"\n", b"\r\n"))
    for path in [FIXTURES / "telemetry_small" / "cluster.om",
                 FIXTURES / "telemetry_serving" / "serving.om", crlf]:
        for step in (60, 300):
            monkeypatch.setattr(om_stream, "BLOCK", block)
            streamed = _tables(path, step, True, monkeypatch)
            monkeypatch.setattr(om_stream, "BLOCK", block)
            after = _tables(path, step, False, monkeypatch)
            assert streamed.keys() == after.keys()
            assert any(len(streamed[t]) for t in ("queue", "gpu_evidence", "replicas")), path
            for name, table in after.items():
                pd.testing.assert_frame_equal(streamed[name], table, check_exact=True,
                                              obj=f"{path.name} {step} {name}")


def test_streamed_gauge_families_hold_no_samples(tmp_path):
    path = tmp_path / "g.om"
    lines = [f'DCGM_FI_DEV_POWER_USAGE{{gpu="0",UUID="GPU-a",Hostname="n"}} {100 + i} {T0 + 30 * i}'
             for i in range(500)]
    path.write_text("\n".join(lines) + "\n# EOF\n")
    grid = Grid(T0 * NS, (T0 + 86400) * NS, 3600)
    roles, scan, cells = om_stream.read_reduced(path, grid)
    assert scan.rows == 500 and len(roles["dcgm_evidence"].sid) == 0
    means = cells["dcgm_evidence"].means()
    assert means.tolist() == [100 + 59.5, 100 + 179.5, 100 + 299.5, 100 + 419.5, 100 + 489.5]


def test_cells_grow_with_the_cells_that_have_samples(tmp_path):
    # a week at a 60 s step, 200 short-lived pods of two scrapes each: 400 cells of 2 million
    path = tmp_path / "churn.om"
    lines = []
    for pod in range(200):
        t = T0 + 3000 * pod
        for name, value in (("vllm:num_requests_running", 2), ("vllm:request_success_total", 1)):
            head = f'{name}{{model_name="m",namespace="n",pod="p{pod}"}}'
            lines += [f"{head} {value} {t}", f"{head} {value + 1} {t + 30}"]
    path.write_text("\n".join(lines) + "\n# EOF\n")
    grid = Grid(T0 * NS, (T0 + 7 * 86400) * NS, 60)
    _, _, cells = om_stream.read_reduced(path, grid)
    queue, counters = cells["queue"], cells["counters"]
    assert queue.means().tolist() == [2.5] * 200  # the batch summed
    assert len(queue.slots) == 200 and len(queue.sums) <= 512
    assert len(counters.slots) == 200 and len(counters.sums) <= 512
