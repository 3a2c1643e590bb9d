"""DCGM busy, pod info, GPU requests and node info reduced per series and interval while the file
is read (``om_series``, ``om_busy``): the connector's tables equal, exactly, those built from every
sample after the read, whatever the order of the samples, the blocks and the values (excluded
samples, GPU_UTIL on MIG units, GPUs with and without GR_ENGINE_ACTIVE, pods sharing a GPU,
fractional requests, samples without a timestamp); and what the cells cannot reproduce exactly is
read again with every sample kept."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connectors.telemetry import om_stream
from connectors.telemetry.grid import NS, Grid
from tests.connectors.telemetry.test_om_counters import assert_same_tables, tables
from tests.connectors.telemetry.test_om_stream import T0
from tests.paths import FIXTURES

START = T0 - T0 % 3600
GR, UTIL = "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_GPU_UTIL"


def dcgm(metric: str, node: str, gpu: str, uuid: str, pod: str, model: str = "H100") -> str:
    """A DCGM busy series' name and labels."""
    return (f'{metric}{{Hostname="{node}",gpu="{gpu}",UUID="{uuid}",modelName="{model}",'
            f'pod="{pod}",namespace="ns",container="c"}}')


def test_streamed_families_hold_no_samples(tmp_path, monkeypatch):
    path = tmp_path / "b.om"
    lines = []
    for gpu, pod in (("0", "p0"), ("1", "p1")):
        for metric, scale in ((GR, 0.01), (UTIL, 1)):
            lines += [f"{dcgm(metric, 'n0', gpu, 'GPU-' + gpu, pod)} {(i % 90) * scale} {T0 + 30 * i}"
                      for i in range(400)]
        lines += [f'kube_pod_info{{namespace="ns",pod="{pod}",node="n0"}} 1 {T0 + 30 * i}'
                  for i in range(400)]
        lines += [f'kube_pod_container_resource_requests{{namespace="ns",pod="{pod}",container="c",'
                  f'resource="nvidia.com/gpu",node=""}} 1 {T0 + 30 * i}' for i in range(400)]
    lines += [f'kube_node_info{{node="n0",provider_id="aws:///z/i-0"}} 1 {T0 + 30 * i}'
              for i in range(400)]
    path.write_text("\n".join(lines) + "\n# EOF\n")
    grid = Grid(START * NS, (START + 86400) * NS, 3600)
    roles, scan, cells = om_stream.read_reduced(path, grid)
    assert scan.rows == 400 * 9
    assert not any(len(roles[r].sid) for r in ("dcgm", "pod_info", "requests", "node_info"))
    assert len(cells["dcgm"].stats.slots) == 2 * 4  # GR series x intervals: GPU_UTIL dropped
    calls = []
    real = om_stream.read_reduced
    monkeypatch.setattr("connectors.telemetry.openmetrics.read_reduced",
                        lambda p, grid: calls.append(grid is not None) or real(p, grid))
    streamed = tables(path, 3600, True, monkeypatch, START)
    assert calls == [True]  # reduced, nothing read again
    whole = tables(path, 3600, False, monkeypatch, START)
    for name, table in whole.items():
        pd.testing.assert_frame_equal(streamed[name], table, check_exact=True, obj=name)
    assert len(whole["gpu_activity"]) == 6 and len(whole["gpu_requests"]) == 6  # 3 h window
    assert set(whole["gpu_requests"]["node"]) == {"n0"} and len(whole["node_info"]) == 1


@pytest.mark.parametrize("lines, again", [
    ([f'kube_pod_container_resource_requests{{namespace="ns",pod="p",container="c",'
      f'resource="nvidia.com/gpu"}} 0.5 {T0}'], True),                       # a fractional request
    ([f"{dcgm(GR, 'n', '0', 'GPU-a', 'p1')} 0.5 {T0}",
      f"{dcgm(GR, 'n', '0', 'GPU-a', 'p2')} 0.25 {T0}"], True),                 # a time-shared GPU
    ([f"{dcgm(GR, 'n', '0', 'GPU-a', 'p1')} 0.5 {T0}", f"{dcgm(UTIL, 'n', '1', 'GPU-b', 'p2')} 5 {T0}",
      f"{dcgm(UTIL, 'n', '1', 'GPU-b', 'p2')} 7 {T0 + 30}"], True),             # GR in order, UTIL kept
    ([f"{dcgm(GR, 'n', '0', 'GPU-a', 'p1')} 0.5 {T0}", f"{dcgm(GR, 'n', '0', 'GPU-a', 'p1')} 0.7 {T0 + 30}",
      f"{dcgm(UTIL, 'n', '0', 'GPU-a', 'p1')} 50 {T0}"], False),              # UTIL dropped
])
def test_what_the_cells_cannot_reproduce_is_read_whole(tmp_path, monkeypatch, lines, again):
    path = tmp_path / "s.om"
    path.write_text("\n".join(lines) + "\n# EOF\n")
    calls = []
    real = om_stream.read_reduced
    monkeypatch.setattr("connectors.telemetry.openmetrics.read_reduced",
                        lambda p, grid: calls.append(grid is not None) or real(p, grid))
    streamed = tables(path, 60, True, monkeypatch, START)
    assert calls == ([True, False] if again else [True])
    whole = tables(path, 60, False, monkeypatch, START)
    for name, table in whole.items():
        pd.testing.assert_frame_equal(streamed[name], table, check_exact=True, obj=name)


@pytest.mark.parametrize("block", [64, 1 << 20])
def test_fixtures_stream_alike(monkeypatch, block):
    for path in [FIXTURES / "telemetry_small" / "cluster.om",
                 FIXTURES / "telemetry_serving" / "serving.om"]:
        for step in (60, 900):
            monkeypatch.setattr(om_stream, "BLOCK", block)
            assert_same_tables(path, step, monkeypatch)


UUIDS = ["GPU-a", "GPU-b", "", "GPU-a/1/3g.40gb"]
DCGM_SERIES = st.tuples(st.just("dcgm"), st.sampled_from([GR, UTIL]), st.sampled_from(["n0", "n1"]),
                        st.sampled_from(["0", "1", ""]), st.integers(0, len(UUIDS) - 1),
                        st.sampled_from(["", "p0", "p1"]), st.sampled_from(["H100", "", "A100"]))
POD_SERIES = st.tuples(st.just("pod"), st.sampled_from(["p0", "p1"]), st.sampled_from(["n0", "n1", ""]),
                       st.integers(0, 1))
REQUEST_SERIES = st.tuples(st.just("req"), st.sampled_from(["p0", "p1"]), st.sampled_from(["c0", "c1"]),
                           st.sampled_from(["n0", ""]), st.sampled_from(["nvidia.com/gpu", "cpu"]))
NODE_SERIES = st.tuples(st.just("node"), st.sampled_from(["kube_node_info", "kube_node_labels"]),
                        st.sampled_from(["n0", "n1", ""]), st.sampled_from(["", "aws:///z/i-1", "aws:///z/i-2"]),
                        st.sampled_from(["", "p5.48xlarge"]))
VALUES = {"dcgm": ["0.5", "0.25", "1.5", "50", "150", "NaN", "-1", "0.1", "0.3", "1", "0"],
          "pod": ["1", "1", "NaN"], "req": ["1", "2", "1", "0.5", "NaN", "-0.0"],
          "node": ["1", "1", "NaN"]}


def head(kind: str, *labels) -> str:
    """A series' name and labels."""
    if kind == "dcgm":
        metric, node, gpu, uuid, pod, model = labels
        base, _, mig = UUIDS[uuid].partition("/")
        text = dcgm(metric, node, gpu, base, pod, model)
        if mig:
            instance, profile = mig.split("/")
            text = text[:-1] + f',GPU_I_ID="{instance}",GPU_I_PROFILE="{profile}"}}'
        return text
    if kind == "pod":
        pod, node, uid = labels
        return f'kube_pod_info{{namespace="ns",pod="{pod}",node="{node}",uid="u{uid}"}}'
    if kind == "req":
        pod, container, node, resource = labels
        return (f'kube_pod_container_resource_requests{{namespace="ns",pod="{pod}",'
                f'container="{container}",node="{node}",resource="{resource}"}}')
    name, node, provider, instance = labels
    return (f'{name}{{node="{node}",provider_id="{provider}",'
            f'label_node_kubernetes_io_instance_type="{instance}"}}')


POINTS = st.lists(st.tuples(st.integers(1, 40), st.integers(0, 10), st.booleans()),
                  min_size=1, max_size=12)


def series_lines(series: tuple, points: list) -> list[tuple[int, str]]:
    """One series' samples as (time, line): times rising by each point's gap (in 30 s scrapes;
    a repeated time is an error or dropped: test_openmetrics); a node series' sample may have no
    timestamp."""
    kind, text, values = series[0], head(*series), VALUES[series[0]]
    out, minute = [], -3
    for gap, value, timed in points:
        minute += gap
        value = values[value % len(values)]
        if kind == "node" and not timed:
            out.append((-1, f"{text} {value}"))
        else:
            out.append((T0 + 30 * minute, f"{text} {value} {T0 + 30 * minute}"))
    return out


@settings(max_examples=120, deadline=None)
@given(series=st.lists(st.tuples(st.one_of(DCGM_SERIES, POD_SERIES, REQUEST_SERIES, NODE_SERIES),
                                 POINTS), min_size=1, max_size=7),
       order=st.randoms(use_true_random=False), interleave=st.booleans(),
       step=st.sampled_from([60, 600, 3600]), block=st.sampled_from([64, 1 << 20]))
def test_any_series_stream_alike(tmp_path_factory, series, order, interleave, step, block):
    series = list({head(*one): (one, points) for one, points in series}.values())  # each series once
    lines = [line for one, points in series for line in series_lines(one, points)]
    if interleave:  # as scraped: series mixed, each in time
        order.shuffle(lines)
        lines.sort(key=lambda line: line[0])
    path = tmp_path_factory.mktemp("series") / "s.om"
    path.write_text("\n".join(text for _, text in lines) + "\n# EOF\n")
    old = om_stream.BLOCK
    om_stream.BLOCK = block
    try:
        with pytest.MonkeyPatch.context() as monkeypatch, np.errstate(all="ignore"):
            assert_same_tables(path, step, monkeypatch, START)
    finally:
        om_stream.BLOCK = old
