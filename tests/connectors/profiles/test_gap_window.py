"""g's window (connectors/profiles/window.py, METHOD §3): request spans, profiler steps, else the
main GPU activity; a stray kernel planted around the demo's traffic moves g by no more than the
rule's bound, and the same for an Nsight Systems export."""
from __future__ import annotations

import copy
import gzip
import json
import shutil
import sqlite3
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from connectors.base import ReadContext, SourceSpec
from connectors.profiles.events import load_trace, merge
from connectors.profiles.kineto import KinetoConnector
from connectors.profiles.nsys import NsysConnector
from connectors.profiles.window import BREAK_FACTOR, BREAK_MIN_US, BREAK_RANK, STEP_MIN_SHARE
from tests.builders import GEMM, T0, trace_doc, write_trace, x
from tests.paths import DATA, DEMO

CTX = ReadContext(datetime(2025, 1, 1, tzinfo=timezone.utc), datetime(2025, 2, 1, tzinfo=timezone.utc), "USD")
DEMO_TRACE = DEMO / "profiles" / "h100_qwen1.5-0.5b-chat.prefill_decode.derived.json.gz"
TRACES = DATA / "traces"
DEMO_G = 0.103518267                      # fixtures/demo/truth.json profile.gap_ratio
STRAY_US = 5.0                            # the planted kernel's duration
DISTANCES_MS = (1, 20, 200, 2000)


def row_of(path: Path) -> dict:
    """The profile row the kineto or nsys connector reads from ``path`` (schema-checked)."""
    kind = NsysConnector if path.suffix == ".sqlite" else KinetoConnector
    frame = kind(SourceSpec(path.stem, "profiles", kind.format_name, path), CTX).read()
    return frame.tables["profile"].iloc[0].to_dict()


@lru_cache(maxsize=1)
def demo_row() -> dict:
    return row_of(DEMO_TRACE)


@lru_cache(maxsize=1)
def demo_bytes() -> bytes:
    return gzip.decompress(DEMO_TRACE.read_bytes())


@lru_cache(maxsize=1)
def demo_doc() -> dict:
    return json.loads(demo_bytes())


def threshold_us(path: Path) -> float:
    """The break threshold of the (one-device) trace at ``path``: max(BREAK_FACTOR × its
    BREAK_RANK-th longest idle gap, BREAK_MIN_US)."""
    trace = load_trace(path)
    starts, ends = merge(trace.start, trace.end)
    gaps = np.sort(starts[1:] - ends[:-1])
    return max(BREAK_FACTOR * float(gaps[-BREAK_RANK]), BREAK_MIN_US)


def planted(tmp_path: Path, side: str, distance_us: float) -> Path:
    """The demo's trace with one extra kernel ``distance_us`` before its first or after its last GPU
    event (a copy of its first kernel: same name, device and stream, no launch in the trace)."""
    doc = demo_doc()
    work = [e for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    first, last = min(e["ts"] for e in work), max(e["ts"] + e["dur"] for e in work)
    stray = copy.deepcopy(next(e for e in work if e["cat"] == "kernel"))
    stray["dur"] = STRAY_US
    stray["ts"] = last + distance_us if side == "after" else first - distance_us - STRAY_US
    stray["args"]["correlation"] = 10 ** 9
    raw = demo_bytes()                     # the trace's own bytes, the stray spliced in first
    at = raw.index(b"[", raw.index(b'"traceEvents"')) + 1
    return write_trace(tmp_path, raw[:at] + json.dumps(stray).encode() + b"," + raw[at:], f"stray_{side}.json")


def test_demo_g_unchanged():
    row = demo_row()
    assert row["gap_basis"] == "gpu_window" and row["gap_ratio"] == pytest.approx(DEMO_G, abs=1e-9)
    assert row["gap_ratio_full"] == row["gap_ratio"] and row["excluded_kernels"] == 0 and row["excluded_us"] == 0
    # its one ProfilerStep is the real prefill; the decode steps after it carry no annotation
    assert row["gap_note"].startswith("profiler steps hold 13.4 % of the kernel-active time")


@pytest.mark.parametrize("side", ["before", "after"])
@pytest.mark.parametrize("distance_ms", DISTANCES_MS)
def test_stray_kernel_moves_g_within_the_bound(tmp_path, side, distance_ms):
    """Bound: a planted kernel of duration d at distance x from the traffic leaves g exactly as it
    was when x > T (the break threshold: 1.376 ms on the demo), and else moves it by at most
    (T + d) ÷ kernel-active (0.0041 on the demo); over the whole GPU window it would move by
    x ÷ kernel-active."""
    base = demo_row()
    limit, active = threshold_us(DEMO_TRACE), base["kernel_active_us"]
    assert limit == pytest.approx(1376.0, abs=0.1)
    row = row_of(planted(tmp_path, side, distance_ms * 1000.0))
    assert abs(row["gap_ratio"] - DEMO_G) <= (limit + STRAY_US) / active
    full = (base["gpu_window_us"] + distance_ms * 1000.0 - active) / (active + STRAY_US)
    assert row["gap_ratio_full"] == pytest.approx(full, rel=1e-6)      # timestamps of 1.4e12 µs: ulp 2e-4 µs
    if distance_ms * 1000.0 > limit:
        # unchanged (to float rounding: a kernel before moves the trace's base, hence every start)
        assert row["gap_basis"] == "main_activity" and row["gap_ratio"] == pytest.approx(base["gap_ratio"], rel=1e-9)
        assert row["excluded_kernels"] == 1 and row["excluded_kernel_us"] == pytest.approx(STRAY_US)
        assert row["excluded_us"] == pytest.approx(distance_ms * 1000.0 + STRAY_US, abs=1e-3)
        assert row["gap_window_us"] == pytest.approx(base["gpu_window_us"], rel=1e-12)
    else:                                  # kept: a kernel 1 ms off is traffic by the rule
        assert row["gap_basis"] == "gpu_window" and row["excluded_kernels"] == 0
        assert row["gap_ratio"] == pytest.approx(full, rel=1e-6)


def test_issue_figure_on_the_real_qwen_trace(tmp_path):
    """Issue 16's figure: one kernel 200 ms after the real qwen trace (g 0.093) moved g to 4.49.
    Its one ProfilerStep holds 99.4 % of the kernel-active time, so g is taken over it."""
    path = TRACES / "tracelens" / "h100_qwen1.5-0.5b-chat.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    work = [e for e in doc["traceEvents"] if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    stray = dict(copy.deepcopy(work[-1]), ts=max(e["ts"] + e["dur"] for e in work) + 200_000.0, dur=STRAY_US)
    stray["args"] = dict(stray["args"], correlation=10 ** 9)
    base = row_of(path)
    row = row_of(write_trace(tmp_path, dict(doc, traceEvents=doc["traceEvents"] + [stray]), "qwen_stray.json"))
    assert base["gap_basis"] == row["gap_basis"] == "profiler_steps"
    assert row["gap_ratio"] == base["gap_ratio"] == pytest.approx(0.093186, abs=1e-6)
    assert row["gap_ratio_full"] == pytest.approx(4.49, abs=0.005)
    assert row["excluded_kernels"] == base["excluded_kernels"] + 1


@pytest.mark.parametrize("relative, basis, g, full, excluded", [
    ("tracelens/h100_qwen1.5-0.5b-chat.json.gz", "profiler_steps", 0.093186, 0.092888, 5),
    ("kineto/resnet50_v100_num_workers_0.pt.trace.json.gz", "profiler_steps", 0.801345, 0.684570, 0),
    ("hta/alexnet_a100_cuda_sync.json.gz", "main_activity", 186.734255, 1214.450988, 1),
    ("tracelens/mi300x_vllm_decode_cudagraph_graph_execution.json.gz", "gpu_window", 0.006433, 0.006433, 0),
])
def test_real_traces(relative, basis, g, full, excluded):
    """alexnet: one 71 µs kernel 10.0 s before the rest (the next gaps are 1.04 s and 0.82 s) is
    outside; resnet50: its steps start with the host's data loading, before the GPU's first kernel."""
    row = row_of(TRACES / relative)
    assert row["gap_basis"] == basis and row["excluded_kernels"] == excluded
    assert row["gap_ratio"] == pytest.approx(g, abs=1e-6) and row["gap_ratio_full"] == pytest.approx(full, abs=1e-6)


def step(name: str, offset: float, dur: float) -> dict:
    return {"ph": "X", "cat": "user_annotation", "name": name, "pid": 1, "tid": 1, "ts": T0 + offset,
            "dur": dur, "args": {}}


def launched(offset: float, at: float, dur: float, correlation: int) -> list[dict]:
    """A kernel at ``at`` and its launch at ``offset`` (host thread)."""
    launch = x("cuda_runtime", "cudaLaunchKernel", offset, 1.0, correlation=correlation)
    launch.update(pid=1, tid=1)
    return [launch, x("kernel", GEMM, at, dur, stream=7, correlation=correlation)]


def test_profiler_steps_with_their_launched_work_and_a_stray(tmp_path):
    events = [step("ProfilerStep#1", 0.0, 40.0), step("ProfilerStep#2", 40.0, 40.0)]
    events += launched(1.0, 10.0, 20.0, 1) + launched(41.0, 50.0, 10.0, 2)
    events += launched(75.0, 85.0, 10.0, 3)            # launched in step 2, runs to 95 after it ends
    events.append(x("kernel", GEMM, 5000.0, 1.0, stream=7, correlation=4))     # a stray, no launch
    row = row_of(write_trace(tmp_path, trace_doc(events)))
    assert row["gap_basis"] == "profiler_steps" and row["gap_window_us"] == 95.0
    assert row["gap_kernel_active_us"] == 40.0 and row["gap_ratio"] == (95.0 - 40.0) / 40.0
    assert row["excluded_kernels"] == 1 and row["excluded_kernel_us"] == 1.0
    assert row["gap_ratio_full"] == (5001.0 - 10.0 - 41.0) / 41.0
    assert row["gpu_window_us"] == 4991.0 and row["kernel_active_us"] == 41.0   # the trace's, as before


def test_steps_that_hold_little_of_the_work_are_not_the_window(tmp_path):
    events = [step("ProfilerStep#1", 0.0, 20.0)] + launched(1.0, 2.0, 10.0, 1)
    events += [x("kernel", GEMM, 20.0 + 12.0 * i, 10.0, stream=7, correlation=10 + i) for i in range(10)]
    row = row_of(write_trace(tmp_path, trace_doc(events)))
    share = 10.0 / 110.0
    assert share < STEP_MIN_SHARE and row["gap_basis"] == "gpu_window"
    assert row["gap_note"].startswith(f"profiler steps hold {100 * share:.1f} % of the kernel-active time")
    assert row["gap_ratio"] == pytest.approx((138.0 - 2.0 - 110.0) / 110.0)


def kernels_at(starts: list[float], dur: float = 10.0) -> list[dict]:
    return [x("kernel", GEMM, s, dur, stream=7, correlation=i + 1) for i, s in enumerate(starts)]


@pytest.mark.parametrize("starts, why", [
    ([i * 30_000.0 + j * 12.0 for i in range(10) for j in range(5)], "recurring 30 ms gaps between iterations"),
    ([j * 12.0 for j in range(50)] + [5e6 + j * 12.0 for j in range(50)], "two bursts of equal work, 5 s apart"),
    ([0.0, 50_000.0, 900_000.0], "too few gaps to tell a typical one"),
    ([j * 12.0 for j in range(50)] + [598.0 + 900.0], "a kernel 0.9 ms off: under BREAK_MIN_US, kept"),
])
def test_traffic_is_not_cut(tmp_path, starts, why):
    row = row_of(write_trace(tmp_path, trace_doc(kernels_at(starts))))
    assert row["gap_basis"] == "gpu_window" and row["gap_ratio"] == row["gap_ratio_full"], why


def test_a_warm_up_group_before_the_traffic_is_outside(tmp_path):
    starts = [j * 12.0 for j in range(3)] + [100_000.0 + j * 12.0 for j in range(60)]
    row = row_of(write_trace(tmp_path, trace_doc(kernels_at(starts))))
    assert row["gap_basis"] == "main_activity" and row["excluded_kernels"] == 3
    assert row["gap_ratio"] == pytest.approx((59 * 12.0 + 10.0 - 600.0) / 600.0)


NSYS = TRACES / "nsys-extrap" / "profile16.sqlite"


def nsys_with_stray(tmp_path: Path, distance_ms: float | None, step: str | None = None) -> Path:
    """profile16 with a kernel row ``distance_ms`` after its last GPU row (no runtime call has its
    correlation id; none for None), and, given ``step``, an NVTX range of that name over all its
    runtime calls."""
    path = tmp_path / f"profile16_{distance_ms}.sqlite"
    shutil.copyfile(NSYS, path)
    path.chmod(0o644)
    db = sqlite3.connect(path)
    try:
        last = max(db.execute(f"SELECT MAX(end) FROM {t}").fetchone()[0] or 0 for t in
                   ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"))
        columns = [r[1] for r in db.execute("PRAGMA table_info(CUPTI_ACTIVITY_KIND_KERNEL)")]
        row = dict(zip(columns, db.execute("SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()))
        if distance_ms is not None:
            row.update(start=last + int(distance_ms * 1_000_000), end=last + int(distance_ms * 1_000_000) + 5_000,
                       correlationId=10 ** 9)
            db.execute(f"INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL ({', '.join(columns)}) VALUES "
                       f"({', '.join('?' * len(columns))})", [row[c] for c in columns])
        if step:
            lo, hi, tid = db.execute("SELECT MIN(start), MAX(end), MIN(globalTid) FROM CUPTI_ACTIVITY_KIND_RUNTIME").fetchone()
            db.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, text, globalTid) VALUES (?, ?, 59, ?, ?)",
                       (lo, hi, step, tid))
        db.commit()
    finally:
        db.close()
    return path


@pytest.mark.parametrize("distance_ms", [200, 2000])
def test_nsys_export_stray_row(tmp_path, distance_ms):
    """The same rule on an Nsight Systems export: a kernel row 200 ms / 2 s after the last GPU row."""
    base, got = row_of(NSYS), row_of(nsys_with_stray(tmp_path, distance_ms))
    assert base["gap_basis"] == "gpu_window" and got["gap_basis"] == "main_activity"
    assert got["gap_ratio"] == base["gap_ratio"] and got["excluded_kernels"] == 1
    assert got["gap_ratio_full"] > base["gap_ratio"] + distance_ms * 1000.0 / base["kernel_active_us"] * 0.99


@pytest.mark.parametrize("name, basis", [("ProfilerStep#1", "profiler_steps"), ("costaudit.request#1", "request_spans")])
def test_nsys_nvtx_steps_and_request_spans(tmp_path, name, basis):
    """An NVTX range over every runtime call of the export, as a profiler step (extended to the end
    of the GPU rows those calls launched) or a request span: the stray row is outside either."""
    row, clean = row_of(nsys_with_stray(tmp_path, 200, step=name)), row_of(nsys_with_stray(tmp_path, None, step=name))
    assert row["gap_basis"] == clean["gap_basis"] == basis and row["excluded_kernels"] == 1
    assert row["gap_ratio"] == clean["gap_ratio"] and clean["excluded_kernels"] == 0
    assert row["gap_kernel_active_us"] == pytest.approx(row_of(NSYS)["kernel_active_us"])


def test_a_device_with_no_gpu_work_adds_nothing(tmp_path):
    """A device named only by a cuda_sync record (no kernel, memcpy or memset) has no window."""
    sync = x("cuda_sync", "Stream Sync", 3.0, 1.0, correlation=99)
    sync["args"]["device"] = 1
    row = row_of(write_trace(tmp_path, trace_doc(kernels_at([0.0, 20.0]) + [sync])))
    assert row["gap_basis"] == "gpu_window" and row["gpu_window_us"] == 30.0
    assert row["gap_ratio"] == row["gap_ratio_full"] == 0.5
