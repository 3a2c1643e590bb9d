"""Trace events whose times or names are missing or wrong: excluded, counted per trace, never work.

Before: a complete Kineto event with no ``dur`` (absent or null) was read as lasting 0 us and a
negative one was clipped to 0, so both counted as zero-length GPU work (a kernel, a window edge,
a call path); an event with no name became "(unnamed)". An Nsight Systems row that ended before it
started was clipped to 0 the same way. Now each such event is left out of the columns and counted
by kind (``negative_dur``, ``missing_dur``, ``no_name``) per trace file: `costaudit trace` prints the
counts (``excluded_events`` per rank in --json), and a `costaudit run` case records them as notes
of its profile source in audit.json (``sources[].notes``), which the report shows.
"""
from __future__ import annotations

import json
import sqlite3

import pytest

from audit.audit_json import to_dict
from audit.case import load_case
from audit.pipeline import run_audit
from connectors.profiles.events import KERNEL, read_trace
from connectors.profiles.nsys import read_nsys
from tests.builders import CURRENT, GEMM, gpu_events, host_events, trace_doc, write_trace, x
from tests.hostile.harness import costaudit, profile, write_case

EXPECTED = {"negative_dur": 1, "missing_dur": 2, "negative_ts": 0, "bad_device": 0, "no_name": 2}
NONE = dict.fromkeys(EXPECTED, 0)


def spoiled_events() -> list[dict]:
    """The synthetic trace plus, far after its last event (where a zero-length kernel would move
    the window's end), kernels with a negative, absent and null dur, and two with no name."""
    bad = [x(CURRENT["kernel"], GEMM, 900.0, -4.0, stream=7), x(CURRENT["kernel"], GEMM, 950.0, 1.0, stream=7),
           x(CURRENT["kernel"], GEMM, 960.0, 1.0, stream=7), x(CURRENT["kernel"], "", 970.0, 2.0, stream=7),
           x(CURRENT["kernel"], "ignored", 980.0, 2.0, stream=7)]
    del bad[1]["dur"]
    bad[2]["dur"] = None
    del bad[4]["name"]
    return gpu_events(CURRENT) + host_events(CURRENT) + bad


def test_kineto_events_without_a_valid_dur_or_a_name_are_counted_not_read(tmp_path):
    clean = read_trace(write_trace(tmp_path, trace_doc(gpu_events(CURRENT) + host_events(CURRENT)), "clean.json"))
    trace = read_trace(write_trace(tmp_path, trace_doc(spoiled_events()), "spoiled.json"))
    assert trace.excluded == EXPECTED and clean.excluded == dict.fromkeys(EXPECTED, 0)
    assert trace.role.size == clean.role.size and int((trace.role == KERNEL).sum()) == 3
    assert (trace.dur >= 0).all() and "" not in trace.names and "(unnamed)" not in trace.names
    first = len(gpu_events(CURRENT) + host_events(CURRENT))      # traceEvents row (from 1) of the first
    assert trace.excluded_at == {"negative_dur": ("traceEvents", first + 1), "missing_dur": ("traceEvents", first + 2),
                                 "no_name": ("traceEvents", first + 4)}


def test_trace_command_reports_the_counts(tmp_path):
    write_trace(tmp_path, trace_doc(spoiled_events()), "spoiled.json")
    write_trace(tmp_path, trace_doc(gpu_events(CURRENT) + host_events(CURRENT)), "clean.json")
    spoiled = costaudit("trace", "spoiled.json", "--json", cwd=tmp_path)
    clean = costaudit("trace", "clean.json", "--json", cwd=tmp_path)
    assert spoiled.rc == 0 and clean.rc == 0, spoiled.stderr + clean.stderr
    bad, good = json.loads(spoiled.stdout), json.loads(clean.stdout)
    assert bad["ranks"][0]["excluded_events"] == EXPECTED
    assert good["ranks"][0]["excluded_events"] == dict.fromkeys(EXPECTED, 0)
    # the left-out events change no time figure: windows, busy time, kernels and call paths
    for document in (bad, good):
        document["ranks"][0].pop("excluded_events")
        for entry in (document["ranks"] + document["hta_compatible"] + document["call_paths"] + document["findings"]
                      + document["idle_paths"]):
            entry.pop("file", None)
            entry.pop("trace", None)
        document.pop("traces")
    assert bad == good
    text = costaudit("trace", "spoiled.json", cwd=tmp_path)
    assert text.rc == 0 and ("excluded events (not counted as work): 1 with a negative duration, "
                             "2 with no duration, 2 with no name") in text.stdout


def test_a_clean_trace_prints_no_excluded_line(tmp_path):
    write_trace(tmp_path, trace_doc(gpu_events(CURRENT) + host_events(CURRENT)), "clean.json")
    outcome = costaudit("trace", "clean.json", cwd=tmp_path)
    assert outcome.rc == 0 and "excluded events" not in outcome.stdout


def test_all_kernels_excluded_is_one_named_error(tmp_path):
    events = [x(CURRENT["kernel"], GEMM, 1.0, -1.0, stream=7), x(CURRENT["kernel"], "", 2.0, 1.0, stream=7)]
    path = write_trace(tmp_path, trace_doc(events), "none.json")
    trace = read_trace(path)
    assert trace.role.size == 0 and trace.excluded == {**NONE, "negative_dur": 1, "no_name": 1}
    outcome = costaudit("trace", "none.json", "--json", cwd=tmp_path)
    # no GPU event is left to measure: refused (it printed a rank with no device and no finding), saying why
    assert outcome.rc == 1 and outcome.stdout == ""
    assert ("none.json: no GPU kernel, memcpy or memset events in any rank; excluded events (not counted as work): "
            "1 with a negative duration, 1 with no name") in outcome.stderr


def test_a_kernel_before_0_or_on_a_device_that_is_no_integer_is_counted_not_read(tmp_path):
    """Before: a kernel at ts -1e6 us stretched its device's window (and idle) by a whole second,
    and one with ``args.device`` "x" became a phantom GPU with a window of its own (a stream "x"
    read as stream -1) — each without a word. Now each is left out and counted, as a bad duration
    is; a device or stream written as decimal text ("0") is read as HTA reads it."""
    clean = read_trace(write_trace(tmp_path, trace_doc(gpu_events(CURRENT)), "clean.json"))
    bad = [x(CURRENT["kernel"], GEMM, -1e6, 1.0, stream=7), x(CURRENT["kernel"], GEMM, 950.0, 1.0, stream=7),
           x(CURRENT["kernel"], GEMM, 960.0, 1.0, stream="x"), x(CURRENT["kernel"], GEMM, 970.0, 1.0, stream=True)]
    bad[0]["ts"] = -1e6  # T0 is an epoch time: this one is before 0
    bad[1]["args"]["device"] = "x"
    trace = read_trace(write_trace(tmp_path, trace_doc(gpu_events(CURRENT) + bad), "spoiled.json"))
    assert trace.excluded == {**NONE, "negative_ts": 1, "bad_device": 3}
    first = len(gpu_events(CURRENT))
    assert trace.excluded_at == {"negative_ts": ("traceEvents", first + 1), "bad_device": ("traceEvents", first + 2)}
    assert trace.role.size == clean.role.size and float(trace.ts.min()) == float(clean.ts.min())
    assert set(trace.device.tolist()) == set(clean.device.tolist())
    texts = [x(CURRENT["kernel"], GEMM, 950.0, 1.0, stream="7")]
    texts[0]["args"]["device"] = "0"
    read = read_trace(write_trace(tmp_path, trace_doc(gpu_events(CURRENT) + texts), "text_ids.json"))
    assert read.excluded == NONE and read.role.size == clean.role.size + 1
    outcome = costaudit("trace", "spoiled.json", cwd=tmp_path)
    assert outcome.rc == 0 and ("excluded events (not counted as work): 1 with a timestamp before 0, "
                                "3 on a device or stream that is not an integer") in outcome.stdout


@pytest.mark.parametrize("field", ["dur", "ts"])
def test_a_time_beyond_2_53_microseconds_is_one_named_error(tmp_path, field):
    """A kernel lasting 1e308 us (finite, so a finiteness check passed it) once reached audit.json's
    cents as an InvalidOperation traceback; a time beyond 2^53 us is named instead, event and row."""
    events = gpu_events(CURRENT)
    events[-1][field] = 1e308
    write_trace(tmp_path, trace_doc(events), "absurd.json")
    case = write_case(tmp_path / "case", extra=profile("kineto", "absurd.json"))
    write_trace(case, trace_doc(events), "absurd.json")
    for args, cwd in ((("trace", "absurd.json"), tmp_path), (("run", ".", "--out", "out"), case)):
        outcome = costaudit(*args, cwd=cwd)
        assert outcome.rc == 1 and "Traceback" not in outcome.stderr, outcome.stderr
        assert f"row {len(events)}, column {field}:" in outcome.stderr and "1e+308" in outcome.stderr
        assert "at most 2^53 either side of 0" in outcome.stderr
    assert not (case / "out").exists()
    events[-1][field] = 2.0 ** 53  # the bound itself is read
    assert read_trace(write_trace(tmp_path, trace_doc(events), "edge.json")).role.size


def test_run_case_notes_the_excluded_events(tmp_path):
    case = write_case(tmp_path / "case", extra=profile("kineto", "spoiled.json"))
    write_trace(case, trace_doc(spoiled_events()), "spoiled.json")
    document = to_dict(run_audit(load_case(case)))
    source = next(s for s in document["sources"] if s["kind"] == "profiles")
    notes = {n["note"].split(" (the first")[0]: (n["row"], n["column"]) for n in source["notes"]}
    first = len(gpu_events(CURRENT) + host_events(CURRENT))
    assert source["notes_total"] == 4
    # the synthetic trace's DtoH copy [33, 36] us begins inside the GEMM [30, 34.5] on its stream 7
    overlap = ("1 GPU event on device 0 stream 7 began before earlier work on that stream ended (impossible on one "
               "stream: a clock or trace defect): their 1.5 us under earlier work are counted once, with it (GPU time "
               "per kernel, category and call path is clipped to the stream's busy time)")
    assert notes == {"1 event with a negative duration": (first + 1, "dur"),
                     "2 complete (ph X) events with no duration": (first + 2, "dur"),
                     "2 events with no name": (first + 4, "name"), overlap: (0, "ts")}
    assert all("not read as zero-duration work" in n["note"] for n in source["notes"] if n["note"] != overlap)
    profile_entry = document["profiles"][0]
    assert profile_entry["kernel_active_ms"] == to_dict(run_audit(load_case(_clean_case(tmp_path))))["profiles"][0][
        "kernel_active_ms"]


def _clean_case(tmp_path):
    case = write_case(tmp_path / "clean", extra=profile("kineto", "clean.json"))
    write_trace(case, trace_doc(gpu_events(CURRENT) + host_events(CURRENT)), "clean.json")
    return case


# ---------------------------------------------------------------- Nsight Systems

def nsys_export(path, rows):
    """A minimal export: kernels (start, end) on device 0, stream 7, named by StringIds."""
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE StringIds (id INTEGER, value TEXT)")
    db.execute("INSERT INTO StringIds VALUES (1, 'kernel_a')")
    db.execute("CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER, end INTEGER, deviceId INTEGER, "
               "streamId INTEGER, correlationId INTEGER, demangledName INTEGER, gridX INTEGER, gridY INTEGER, "
               "gridZ INTEGER, blockX INTEGER, blockY INTEGER, blockZ INTEGER)")
    db.executemany("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (?, ?, 0, 7, ?, 1, ?, 1, 1, 128, 1, 1)",
                   [(s, e, i, 10 + i) for i, (s, e) in enumerate(rows)])
    db.commit()
    db.close()
    return path


def test_nsys_rows_ending_before_they_start_are_counted_not_read(tmp_path):
    good = [(1000, 2000), (3000, 5000)]
    trace = read_nsys(nsys_export(tmp_path / "bad.sqlite", good + [(90_000, 80_000)]))
    clean = read_nsys(nsys_export(tmp_path / "good.sqlite", good))
    assert trace.excluded == {**NONE, "negative_dur": 1}
    assert trace.excluded_at == {"negative_dur": ("CUPTI_ACTIVITY_KIND_KERNEL", 3)}
    assert trace.role.size == 2 and trace.rows == 3 and trace.kernel["blocks"].tolist() == [10, 11]
    assert float(trace.end.max()) == float(clean.end.max()) == 4.0
    outcome = costaudit("trace", "bad.sqlite", "--json", cwd=tmp_path)
    assert outcome.rc == 0 and json.loads(outcome.stdout)["ranks"][0]["excluded_events"]["negative_dur"] == 1


@pytest.mark.parametrize("dur", [0, 0.0])
def test_zero_dur_is_valid_work(tmp_path, dur):
    events = gpu_events(CURRENT) + [x(CURRENT["kernel"], GEMM, 900.0, dur, stream=7)]
    trace = read_trace(write_trace(tmp_path, trace_doc(events)))
    assert trace.excluded == dict.fromkeys(EXPECTED, 0) and int((trace.role == KERNEL).sum()) == 4


# ---------------------------------------------------------------- work overlapping on one stream

def overlapping_doc() -> dict:
    """Kernels [1000, 1100], [1050, 1150], [1200, 1300] and [1210, 1230] us on one stream 7, each
    launched under aten::mm: two of them begin before earlier work on the stream ends, which no real
    stream can do (a clock or trace defect)."""
    events = [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 100, "tid": 100, "ts": 990, "dur": 400,
               "args": {"External id": 1}}]
    kernels = (("gemm_a", 1000, 100), ("gemm_b", 1050, 100), ("gemm_c", 1200, 100), ("nested", 1210, 20))
    for n, (name, ts, dur) in enumerate(kernels, 1):
        events += [{"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": 7, "ts": ts, "dur": dur,
                    "args": {"device": 0, "stream": 7, "correlation": n, "External id": n}},
                   {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 100,
                    "ts": ts - 5, "dur": 3, "args": {"correlation": n, "External id": n}}]
    return trace_doc(events)


def test_work_overlapping_on_one_stream_is_named_and_counted_once(tmp_path):
    """Before: busy 250 us, but categories gemm 300 + other 20 = 320 us and the call path aten::mm 320 us
    (share 1.000000) inside a 300 us window, the overlaps named nowhere. Now each stream's instant is
    credited once, to the earliest-starting work covering it: gemm 250 us, other 0 (nested lies wholly
    under gemm_c), aten::mm 250 us; the rank names the 2 overlapping events of stream 7 and their 70 us."""
    from audit.cli.trace import render
    from audit.trace.analyse import analyse_with_idle

    path = write_trace(tmp_path, overlapping_doc(), "overlap.json")
    document, stacks, _ = analyse_with_idle([path], None)
    (rank,) = document["ranks"]
    (device,) = rank["devices"]
    assert rank["overlapping_events"] == [{"device": "0", "stream": 7, "events": 2, "overlap_us": 70.0}]
    assert (device["window_us"], device["busy_us"], device["categories_us"]) == (300.0, 250.0,
                                                                                 {"gemm": 250.0, "other": 0.0})
    assert document["call_paths"][0]["top"] == [{"call_path": "aten::mm", "events": 4, "gpu_us": 250.0,
                                                 "share_of_gpu_work": "1.000000", "top_kernel": "gemm_a"}]
    assert sorted(stacks) == [f"aten::mm;cudaLaunchKernel;{k}" for k in ("gemm_a 100", "gemm_b 50", "gemm_c 100")]
    assert ("2 GPU events on device 0 stream 7 began before earlier work on that stream ended (impossible on one "
            "stream: a clock or trace defect): their 70 us under earlier work are counted once") in render(document)
