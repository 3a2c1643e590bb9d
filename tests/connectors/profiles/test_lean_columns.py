"""Trace columns held narrow and analysed without per-event copies give the figures the wide
float64 columns and the per-event pandas tables gave (connectors/profiles/blocks.py, intervals.py)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import audit.trace.callpath as callpath
import connectors.profiles.blocks as blocks
import connectors.profiles.intervals as intervals
import connectors.profiles.kineto as kineto
import connectors.profiles.trace_tables as trace_tables
from audit.trace.analyse import analyse
from connectors.profiles.events import gpu_view, read_trace
from tests.builders import CURRENT, gpu_events, host_events, trace_doc, write_trace, x
from tests.paths import DEMO

DEMO_TRACE = DEMO / "profiles" / "h100_qwen1.5-0.5b-chat.json.gz"


def whole_trace(tmp_path, offset=0.0):
    """The synthetic trace moved onto whole microseconds (every time a whole number)."""
    events = gpu_events(CURRENT) + host_events(CURRENT) + [x(CURRENT["kernel"], "lone", 70.0, 1.0, stream=9)]
    for event in events:
        if "ts" in event:
            event["ts"] = float(round(event["ts"] + offset))
        if "dur" in event:
            event["dur"] = float(max(round(event["dur"]), 1))
    return write_trace(tmp_path, trace_doc(events))


def test_whole_number_times_are_narrow_and_exact(tmp_path):
    trace = read_trace(whole_trace(tmp_path))
    assert trace.start.dtype.kind == "i" and trace.dur.dtype.kind == "i" and trace.start.itemsize <= 2
    assert trace.written_ts is None
    wide = np.array(trace.start, dtype=np.float64) + trace.base
    assert np.array_equal(trace.ts, wide) and trace.end.dtype == trace.start.dtype


def test_fractional_times_stay_float(tmp_path):
    trace = read_trace(write_trace(tmp_path, trace_doc(gpu_events(CURRENT) + host_events(CURRENT))))
    assert trace.start.dtype == np.float64 and trace.dur.dtype == np.float64


@pytest.mark.parametrize("offset", [0.0, 0.5])
def test_narrow_times_change_no_figure(tmp_path, monkeypatch, offset):
    """The whole analysis of a whole-number trace, narrow and (forced) float64, is the same document."""
    path = whole_trace(tmp_path, offset)
    narrow = analyse([path], None)
    monkeypatch.setattr(blocks, "narrow_times", lambda values: np.asarray(values, dtype=np.float64))
    monkeypatch.setattr(blocks, "_whole", lambda values: False)
    wide = analyse([path], None)
    assert read_trace(path).start.dtype == np.float64
    assert narrow == wide


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(0, 200), st.integers(0, 30)), min_size=1, max_size=80), st.booleans())
def test_merge_in_pieces_is_the_same_union(cells, as_float):
    starts = np.array([c[0] for c in cells], dtype=np.float64 if as_float else np.int32)
    ends = starts + np.array([c[1] for c in cells], dtype=starts.dtype)
    whole = intervals.merge(starts, ends)
    saved = intervals.PIECE
    intervals.PIECE = 4
    try:
        pieces = intervals.merge(starts, ends)
    finally:
        intervals.PIECE = saved
    assert whole[0].tolist() == pieces[0].tolist() and whole[1].tolist() == pieces[1].tolist()
    order = np.argsort(starts, kind="stable")            # the reference: one sorted sweep
    s, e = starts[order], ends[order]
    reach = np.maximum.accumulate(e)
    first = np.flatnonzero(np.concatenate(([True], s[1:] > reach[:-1])))
    assert whole[0].tolist() == s[first].tolist()
    assert whole[1].tolist() == reach[np.append(first[1:] - 1, s.size - 1)].tolist()


def test_lean_helpers():
    values = np.array([3, 3, 3], dtype=np.int32)
    constant = intervals.lean(values)
    assert constant.strides == (0,) and constant.tolist() == [3, 3, 3] and not constant.flags.writeable
    assert intervals.lean(np.array([1, 2])).tolist() == [1, 2]
    role = np.array([0, 5, 2, 9, 1], dtype=np.int8)
    assert intervals.among(role, (0, 1, 2)).tolist() == np.isin(role, (0, 1, 2)).tolist()
    saved = intervals.PIECE
    intervals.PIECE = 2
    try:
        table = np.array([10, 20, 30], dtype=np.int16)
        index = np.array([2, 0, 1, 1, 2], dtype=np.int8)
        assert intervals.lookup(table, index).tolist() == table[index].tolist()
        assert intervals.positions(role > 0).tolist() == np.flatnonzero(role > 0).tolist()
        sums, counts = intervals.group_sums(index, np.arange(5), 3)
        assert sums.tolist() == [1.0, 5.0, 4.0] and counts.tolist() == [1, 2, 2]
    finally:
        intervals.PIECE = saved


def test_sums_per_group_match_the_per_event_tables(monkeypatch):
    """Above PER_EVENT_ROWS the call-path table, folded stacks and connector tables are summed per
    group by numpy; they match pandas' per-event sums (to well under the nanosecond printed)."""
    trace = read_trace(DEMO_TRACE)
    assert trace.dur.dtype == np.float64
    view = gpu_view(trace)
    paths = callpath.call_paths(trace)
    reference = (callpath.path_table(trace, paths), callpath.folded_stacks(trace, paths, "ns"),
                 kineto.kernel_table(kineto.event_frame(view)), kineto.category_table(kineto.event_frame(view)))
    monkeypatch.setattr(callpath, "PER_EVENT_ROWS", 0)
    monkeypatch.setattr(trace_tables, "PER_EVENT_ROWS", 0)
    grouped = (callpath.path_table(trace, paths), callpath.folded_stacks(trace, paths, "ns"),
               kineto.kernel_table(kineto.event_frame(view)), kineto.category_table(kineto.event_frame(view)))
    table, ours = reference[0], grouped[0]
    assert table["call_path"].tolist() == ours["call_path"].tolist()
    assert table["top_kernel"].tolist() == ours["top_kernel"].tolist()
    assert table["events"].tolist() == ours["events"].tolist() and table["kernels"].tolist() == ours["kernels"].tolist()
    assert np.allclose(table["gpu_us"], ours["gpu_us"], rtol=1e-12) and np.allclose(table["share"], ours["share"])
    assert reference[1] == grouped[1]
    for before, after in zip(reference[2:], grouped[2:]):
        assert before.drop(columns="total_us").equals(after.drop(columns="total_us"))
        assert np.allclose(before["total_us"], after["total_us"], rtol=1e-12)
