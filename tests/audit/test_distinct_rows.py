"""The stages that read per-interval telemetry tables work on each distinct label value once and
take columns as lists (iterating a pandas string column value by value is ten times slower): each
gives what the row-by-row code it replaced gave, on tables with repeated, empty and missing values."""
from __future__ import annotations

from datetime import datetime, timezone
from decimal import Decimal

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.case import Service
from audit.mismatches import _keys_in, pods_of
from audit.normalise import _traffic
from audit.phases import service_rows
from audit.services import service_of
from audit.unit_costs import traffic_by_service
from connectors.telemetry.promquery import long_frame, series_id

SERVICES = {"chat": Service(name="chat", match={"namespace": "llm", "pod": "re:^chat-"}),
            "embed": Service(name="embed", match={"model_name": "bge"}),
            "batch": Service(name="batch", match={})}


def _table(seed: int, n: int = 400) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    namespaces = np.array(["llm", "tools", "", "llm/x"], dtype=object)
    pods = np.array(["chat-0", "chat-1", "embed-0", "", "x/chat-2", "batch"], dtype=object)
    models = np.array(["llama", "bge", ""], dtype=object)
    stamps = pd.date_range("2025-01-01", periods=6, freq="h", tz="UTC")
    frame = pd.DataFrame({
        "ts": stamps[rng.integers(0, len(stamps), n)],
        "namespace": pd.array(namespaces[rng.integers(0, len(namespaces), n)], dtype="str"),
        "pod": pd.array(pods[rng.integers(0, len(pods), n)], dtype="str"),
        "model_name": pd.array(models[rng.integers(0, len(models), n)], dtype="str"),
        "requests": rng.random(n) * 10,
        "prompt_tokens": rng.random(n) * 1e4,
        "generated_tokens": rng.random(n) * 1e3,
        "source": pd.array(np.array(["prom (prometheus)", "logs (access_log)"], dtype=object)[
            rng.integers(0, 2, n)], dtype="str"),
    })
    frame.loc[rng.random(n) < 0.05, "pod"] = np.nan
    return frame


def _old_per_value(frame, keys, wanted):
    out: dict = {}
    for row in frame[keys + ["ts"]].itertuples(index=False, name=None):
        if tuple(row[:-1]) in wanted:
            out.setdefault("/".join(str(v) for v in row[:-1]), set()).add(row[-1])
    return sorted(out), len(set().union(*out.values())) if out else 0


@pytest.mark.parametrize("seed", range(4))
def test_keys_in_gives_what_the_row_loop_gave(seed):
    frame = _table(seed)
    for keys in (["namespace", "pod"], ["pod"]):
        every = set(frame[keys].drop_duplicates().itertuples(index=False, name=None))
        for wanted in (set(), every, set(list(every)[:2]), {("nowhere",) * len(keys)}):
            assert _keys_in(frame, keys, wanted) == _old_per_value(frame, keys, wanted)


@pytest.mark.parametrize("seed", range(4))
def test_pods_gives_what_the_row_loop_gave(seed):
    frame = _table(seed)
    named = frame.loc[frame["pod"].astype(str) != ""]
    assert pods_of(frame) == set(zip(named["namespace"].astype(str), named["pod"].astype(str)))


@pytest.mark.parametrize("seed", range(4))
def test_rows_of_matches_each_row_as_before(seed):
    frame = _table(seed)
    got = service_rows(frame, SERVICES)
    names = [service_of({"namespace": str(ns), "pod": str(pod), "model_name": str(model), "container": ""},
                        SERVICES, {}) for ns, pod, model in frame[["namespace", "pod", "model_name"]].to_numpy(object)]
    expected = frame.assign(service=names)
    pd.testing.assert_frame_equal(got, expected.loc[expected["service"].notna()])


def _old_traffic_by_service(traffic, services):
    """The row-by-row sums the stage made before (requests, tokens, by interval and by pod)."""
    out: dict = {}
    for row in traffic.itertuples(index=False):
        labels = {"namespace": row.namespace, "pod": row.pod, "model_name": row.model_name, "container": ""}
        name = service_of(labels, services, {})
        if name is None and not row.namespace and not row.model_name and row.pod in services:
            name = row.pod
        if name is None:
            continue
        sums = out.setdefault((name, row.source), [Decimal(0), Decimal(0), Decimal(0), {}, {}])
        requests = Decimal(repr(float(row.requests)))
        sums[0] += requests
        sums[1] += Decimal(repr(float(row.prompt_tokens)))
        sums[2] += Decimal(repr(float(row.generated_tokens)))
        ts = row.ts.to_pydatetime()
        sums[3][ts] = sums[3].get(ts, Decimal(0)) + requests
        sums[4][(row.pod, ts)] = sums[4].get((row.pod, ts), Decimal(0)) + requests
    return out


@pytest.mark.parametrize("seed", range(4))
def test_traffic_by_service_sums_as_the_row_loop_did(seed):
    frame = _table(seed)
    frame["pod"] = frame["pod"].fillna("")  # the traffic table's labels are never missing (schemas)
    frame.loc[frame.index[:5], ["namespace", "model_name"]] = ""
    frame.loc[frame.index[:5], "pod"] = "batch"  # a request log's rows name their service
    got = traffic_by_service(frame, SERVICES)
    old = _old_traffic_by_service(frame, SERVICES)
    assert set(got) == {name for name, _ in old}
    for name, totals in got.items():
        assert totals.by_source == {source: sums[0] for (n, source), sums in old.items() if n == name}
        primary = max((sums for (n, _), sums in old.items() if n == name), key=lambda s: s[1] + s[2])
        assert (totals.requests, totals.prompt_tokens, totals.generated_tokens) == tuple(primary[:3])
        assert totals.by_ts == primary[3] and totals.by_pod_ts == primary[4]
        assert all(isinstance(ts, datetime) and ts.tzinfo == timezone.utc for ts in totals.by_ts)


def test_traffic_sources_name_the_counter_where_the_family_has_one():
    from types import SimpleNamespace

    table = pd.DataFrame({"family": pd.array(["vllm", "", "triton", np.nan, "tgi"], dtype="str"),
                          "requests": [1.0] * 5})
    frame = SimpleNamespace(tables={"traffic": table}, spec=SimpleNamespace(name="prom", format="prometheus"))
    collected = SimpleNamespace(of=lambda role: [frame])
    assert list(_traffic(collected)["source"]) == [
        "prom (prometheus): vllm:request_success_total", "prom (prometheus)",
        "prom (prometheus): nv_inference_request_success", "prom (prometheus)",
        "prom (prometheus): tgi_request_success"]


def test_long_frame_repeats_each_series_labels_over_its_points():
    series = [({"__name__": "m", "pod": "a", "gpu": "0"}, np.array([1, 2, 3]), np.array([0.5, 1.0, 1.5])),
              ({"__name__": "m", "pod": "b"}, np.array([4]), np.array([2.0])),
              ({"__name__": "m", "pod": "a", "gpu": "1"}, np.array([], dtype=np.int64), np.array([]))]
    frame = long_frame(series, None)
    assert list(frame.columns) == ["k", "v", "gpu", "pod", "id"]
    assert list(frame["pod"]) == ["a", "a", "a", "b"] and list(frame["gpu"]) == ["0", "0", "0", ""]
    assert list(frame["id"]) == [series_id(series[0][0])] * 3 + [series_id(series[1][0])]
    assert str(frame["pod"].dtype) == "str" and list(frame["k"]) == [1, 2, 3, 4]
    assert long_frame([], ["pod"]).empty


def _activity(seed: int, n: int = 600) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    stamps = pd.date_range("2025-01-01", periods=4, freq="h", tz="UTC")
    gpus = np.array(["0", "1", "01", "10", "2", "mig", "a"], dtype=object)  # "1" and "01" tie
    return pd.DataFrame({
        "ts": stamps[rng.integers(0, len(stamps), n)],
        "node": pd.array(np.array(["n-b", "n-a", "n-c"], dtype=object)[rng.integers(0, 3, n)], dtype="str"),
        "gpu": pd.array(gpus[rng.integers(0, len(gpus), n)], dtype="str"),
        "uuid": pd.array(np.array(["GPU-2", "GPU-1", "GPU-1/1/3g.40gb"], dtype=object)[rng.integers(0, 3, n)],
                         dtype="str"),
        "gpus": rng.integers(-1, 3, n),
        "busy_fraction": rng.random(n),
    })


@pytest.mark.parametrize("seed", range(4))
def test_the_split_indexes_hold_the_rows_the_append_and_sort_held(seed):
    from collections import defaultdict

    from audit.gpu_index import index_activity, index_requests
    from audit.gpuunits import gpu_key as _gpu_key
    from audit.table_rows import table_rows

    frame = _activity(seed)
    old_activity, old_requests = defaultdict(list), defaultdict(list)
    for row in table_rows(frame):
        old_activity[(row.node, row.ts)].append(row)
        if row.gpus > 0:
            old_requests[(row.node, row.ts)].append(row)
    for rows in old_activity.values():
        rows.sort(key=lambda r: (_gpu_key(r.gpu), r.uuid))
    assert index_activity(frame) == dict(old_activity)
    assert index_requests(frame) == dict(old_requests)
    assert index_activity(frame.iloc[0:0]) == {} == index_requests(frame.iloc[0:0])


@pytest.mark.parametrize("seed", range(4))
def test_split_rows_hold_one_object_per_distinct_text_and_time(seed):
    """The GPU split's row lists equal what iterating the columns gave, and a repeated pod name or
    interval start is one Python object however many rows repeat it (memory, not values)."""
    from audit.table_rows import column_values, datetimes_of

    frame = _table(seed)
    frame.loc[frame.index[::7], "ts"] = pd.NaT
    for name in ("namespace", "pod", "model_name", "source"):
        values = column_values(frame[name])
        plain = frame[name].to_numpy().tolist()
        assert len(values) == len(plain)
        assert all(a == b or (a != a and b != b) for a, b in zip(values, plain))  # NaN where missing
        assert len({id(v) for v in values}) == frame[name].nunique(dropna=False)
    stamps = datetimes_of(frame["ts"])
    assert [str(t) for t in stamps] == [str(t) for t in frame["ts"].array.to_pydatetime().tolist()]
    assert len({id(t) for t in stamps}) == frame["ts"].nunique(dropna=False)
    assert column_values(frame["pod"].iloc[0:0]) == [] == datetimes_of(frame["ts"].iloc[0:0])


def test_lines_where_takes_the_rows_or_all_of_them_without_a_copy():
    """Every line in scope: the same lines, not a copy, and a column set on them stays theirs."""
    from audit.lines import lines_where

    frame = _table(0, 50)
    frame.index = frame.index * 3  # the index labels are kept
    every = lines_where(frame, pd.Series(True, index=frame.index))
    pd.testing.assert_frame_equal(every, frame)
    assert np.shares_memory(every["requests"].to_numpy(), frame["requests"].to_numpy())
    every["gross"] = 1
    assert "gross" not in frame
    some = np.arange(50) % 3 == 0
    pd.testing.assert_frame_equal(lines_where(frame, some), frame[some])
    assert len(lines_where(frame, np.zeros(50, dtype=bool))) == 0


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), max_size=300), st.integers(0, 3))
def test_lines_where_gives_the_boolean_take_whatever_the_runs(keep, every):
    """Runs of kept lines joined as slices are the boolean take: values, dtypes, index, order."""
    from audit.lines import lines_where

    keep = [k or (every and i % (every + 1) == 0) for i, k in enumerate(keep)]
    frame = _table(0, len(keep))
    frame.index = frame.index * 3 + 1
    frame["amount"] = [Decimal(i) / 7 for i in range(len(keep))]
    mask = np.array(keep, dtype=bool)
    pd.testing.assert_frame_equal(lines_where(frame, mask), frame[mask])


def test_lines_where_joins_a_few_runs_without_copying_text():
    """A few lines dropped: the text columns of the result are slices of the lines' own buffers."""
    import pyarrow as pa

    from audit.lines import lines_where

    frame = _table(0, 5000)
    mask = np.ones(5000, dtype=bool)
    mask[[10, 2000, 4999]] = False
    before = pa.total_allocated_bytes()
    kept = lines_where(frame, mask)
    assert pa.total_allocated_bytes() - before < 100_000  # the numbers only, no text copied
    pd.testing.assert_frame_equal(kept, frame[mask])
