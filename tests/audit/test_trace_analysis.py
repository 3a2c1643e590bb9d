"""Trace analyzers (audit/trace): the per-device breakdown under the default rules and under HTA's
rules (checked against HTA's own figures in tests/data/hta_reference.json), and call paths from
kernel to launch, operator and Python frame."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest

from audit.trace.breakdown import breakdown, hta_breakdown, hta_kernel_types, ranks
from audit.trace.callpath import NO_LAUNCH, call_paths, folded_stacks, path_table
from connectors.profiles.events import read_trace
from tests.builders import ADD, CURRENT, GEMM, T0, gpu_events, host_events, trace_doc, write_trace, x
from tests.paths import DATA, TEST_DATA

TRACES = DATA / "traces"
REAL = sorted(str(p.relative_to(TRACES)) for p in TRACES.rglob("*.json.gz"))


# ---------------------------------------------------------------- breakdown, default rules

def test_breakdown_per_device_and_stream(tmp_path):
    doc = trace_doc(gpu_events(CURRENT) + host_events(CURRENT, current=True))
    (rank,) = breakdown([read_trace(write_trace(tmp_path, doc))])
    (device,) = rank["devices"]
    assert device["name"] == "NVIDIA H100 80GB HBM3"
    assert (device["window_us"], device["busy_us"], device["idle_us"]) == (35.5, 25.125, 10.375)
    assert device["kernel_active_us"] == 19.25 and device["kernels"] == 3
    assert device["coarse_us"] == {"computation": 19.25, "communication": 0.0, "memory": 7.375}
    assert device["categories_us"]["memcpy_htod"] == 2.5 and device["categories_us"]["memset"] == 1.875
    streams = {s["stream"]: s for s in device["streams"]}
    assert streams[8] == {"stream": 8, "window_us": 10.0, "busy_us": 10.0, "idle_us": 0.0, "events": 1}
    assert streams[7]["window_us"] == 35.5 and streams[7]["busy_us"] == 10.25 + 2.5 + 1.875 + 6.0
    # cuda_sync events (Stream Sync, Context Sync) are waits, not busy time, in the default rules
    assert all(s in streams for s in (7, 8)) and len(streams) == 2


def test_multimem_all_reduce_is_communication(tmp_path):
    events = [x("kernel", "void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16>(c10::BFloat16*)",
                0.0, 4.0, stream=7), x("kernel", GEMM, 2.0, 4.0, stream=8)]
    (device,) = breakdown([read_trace(write_trace(tmp_path, trace_doc(events)))])[0]["devices"]
    assert device["coarse_us"] == {"computation": 4.0, "communication": 4.0, "memory": 0.0}
    assert device["busy_us"] == 6.0


def test_ranks_from_distributed_info_and_position(tmp_path):
    paths = []
    for rank in (5, 5, None):
        doc = trace_doc(gpu_events(CURRENT))
        if rank is not None:
            doc["distributedInfo"] = {"rank": rank}
        paths.append(write_trace(tmp_path, doc, f"r{len(paths)}.json"))
    assert ranks([read_trace(p) for p in paths]) == [5, 1, 2]


# ---------------------------------------------------------------- breakdown, HTA rules

def step_doc():
    """Two ProfilerSteps; the last one launches a kernel that HTA drops; a cuda_sync event."""
    events = [
        x("user_annotation", "ProfilerStep#1", 0.0, 50.0, stream=None),
        x("user_annotation", "ProfilerStep#2", 50.0, 50.0, stream=None),
        x("cuda_runtime", "cudaLaunchKernel", 1.0, 1.0, correlation=1),
        x("kernel", GEMM, 10.0, 10.0, stream=7, correlation=1),
        x("cuda_runtime", "cudaLaunchKernel", 51.0, 1.0, correlation=2),
        x("kernel", GEMM, 60.0, 10.0, stream=7, correlation=2),
        x("cuda_runtime", "cudaStreamSynchronize", 2.0, 30.0, correlation=3),
        x("cuda_sync", "Stream Sync", 21.0, 10.0, stream=7, correlation=3),
    ]
    for event in events[:3] + events[4:5] + events[6:7]:
        del event["args"]["device"]
        event["args"].pop("stream", None)
    return trace_doc(events)


def test_hta_rules_drop_the_last_step_and_count_cuda_sync(tmp_path):
    trace = read_trace(write_trace(tmp_path, step_doc()))
    (hta,) = hta_breakdown([trace])
    assert hta["window_us"] == 21.0                          # kernel 1 (10..20) + Stream Sync (21..31)
    assert hta["busy_us"] == 20.0 and hta["idle_us"] == 1.0
    assert hta["kernel_types_us"] == {"COMPUTATION": 10.0}   # "Stream Sync" is HTA's OTHER type
    (device,) = breakdown([trace])[0]["devices"]
    assert (device["window_us"], device["busy_us"]) == (60.0, 20.0)   # ours: both kernels, no sync


def test_hta_kernel_types_truncate_segments():
    start = np.array([0.0, 0.5, 3.25])
    end = np.array([1.75, 2.5, 4.0])
    types = np.array(["COMPUTATION", "MEMORY", "COMMUNICATION"], dtype=object)
    assert hta_kernel_types(start, end, types) == {
        "COMPUTATION": 0.0, "COMPUTATION overlapping MEMORY": 1.0, "MEMORY": 0.0, "COMMUNICATION": 0.0}


HTA_REFERENCE = json.loads((TEST_DATA / "hta_reference.json").read_text())


def test_reference_covers_every_chrome_trace():
    assert set(REAL) <= set(HTA_REFERENCE["sets"]) and "HTA_DISABLE_NS_ROUNDING=1" in HTA_REFERENCE["produced_by"]


@pytest.mark.parametrize("key", sorted(HTA_REFERENCE["sets"]))
def test_hta_compatible_mode_agrees_with_hta(key):
    """Busy and idle per rank, and computation / communication / memory (with their overlaps),
    within 0.5 percentage points of the rank's window, against HTA 0.5.0's own figures."""
    reference = HTA_REFERENCE["sets"][key]
    ours = hta_breakdown([read_trace(TRACES / f) for f in reference["files"]])
    for rank in ours:
        theirs = reference["ranks"][str(rank["rank"])]
        window = theirs["window_us"]
        assert rank["window_us"] == pytest.approx(window, rel=1e-9)
        busy_theirs = window - theirs["idle_us"]
        assert abs(rank["busy_us"] - busy_theirs) / window * 100 < 0.5
        assert abs(rank["idle_us"] - theirs["idle_us"]) / window * 100 < 0.5
        assert abs(rank["compute_us"] - theirs["compute_us"]) / window * 100 < 0.5
    total = sum(r["window_us"] for r in ours)
    types: dict[str, float] = {}
    for rank in ours:
        for label, us in rank["kernel_types_us"].items():
            types[label] = types.get(label, 0.0) + us
    for label in set(types) | set(reference["kernel_types_us"]):
        assert abs(types.get(label, 0.0) - reference["kernel_types_us"].get(label, 0.0)) / total * 100 < 0.5, label


# ---------------------------------------------------------------- call paths

def stack_doc():
    """python_function → nn.Module → cpu_op → launch → kernel; a launch on another thread found by
    External id; a graph launch shared by two kernels; a kernel whose launch is missing."""
    def host(cat, name, ts, dur, tid=1, **args):
        return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": T0 + ts, "dur": dur, "args": args}
    events = [
        host("python_function", "model.py(10): forward", 0.0, 100.0),
        host("python_function", "nn.Module: Linear_0", 1.0, 50.0),
        host("cpu_op", "aten::linear", 2.0, 40.0, **{"External id": 7}),
        host("cpu_op", "aten::addmm", 3.0, 30.0, **{"External id": 8}),
        host("cuda_runtime", "cudaLaunchKernel", 4.0, 2.0, correlation=11, **{"External id": 8}),
        host("cuda_runtime", "cudaLaunchKernel", 5.0, 1.0, tid=2, correlation=12, **{"External id": 7}),
        host("cuda_runtime", "cudaGraphLaunch", 60.0, 5.0, correlation=13),
        x("kernel", GEMM, 10.0, 5.0, stream=7, correlation=11),
        x("kernel", ADD, 16.0, 1.0, stream=7, correlation=12),
        x("kernel", "graph_kernel_a", 70.0, 2.0, stream=7, correlation=13),
        x("kernel", "graph_kernel_b", 72.0, 2.0, stream=7, correlation=13),
        x("kernel", "orphan_kernel", 80.0, 1.0, stream=7, correlation=99),
        x("gpu_user_annotation", "decode_step", 69.0, 20.0, stream=7),
    ]
    return trace_doc(events)


def test_call_paths_link_kernel_launch_operator_and_python(tmp_path):
    trace = read_trace(write_trace(tmp_path, stack_doc()))
    paths = call_paths(trace)
    by_kernel = {trace.names[trace.name[row]]: paths.frames(int(p)) for row, p in zip(paths.work, paths.path_of)}
    assert by_kernel[GEMM] == ["model.py(10): forward", "nn.Module: Linear_0", "aten::linear", "aten::addmm",
                               "cudaLaunchKernel"]
    assert by_kernel[ADD] == ["model.py(10): forward", "nn.Module: Linear_0", "aten::linear", "cudaLaunchKernel"]
    assert by_kernel["graph_kernel_a"] == by_kernel["graph_kernel_b"] == ["model.py(10): forward", "cudaGraphLaunch"]
    assert by_kernel["orphan_kernel"] == ["[gpu] decode_step", NO_LAUNCH]
    ops = {trace.names[trace.name[row]]: trace.names[trace.name[op]] for row, op in zip(paths.work, paths.op_of) if op >= 0}
    assert ops == {GEMM: "aten::addmm", ADD: "aten::linear"}


def test_path_table_and_folded_stacks(tmp_path):
    trace = read_trace(write_trace(tmp_path, stack_doc()))
    paths = call_paths(trace)
    table = path_table(trace, paths)
    assert table["gpu_us"].sum() == 5.0 + 1.0 + 2.0 + 2.0 + 1.0
    top = table.iloc[0]
    assert top["call_path"] == "model.py(10): forward > nn.Module: Linear_0 > aten::linear > aten::addmm"
    assert top["top_kernel"] == GEMM
    lines = folded_stacks(trace, paths, unit="ns")
    assert all(re.fullmatch(r"[^\n]+ \d+", line) for line in lines)
    assert "model.py(10): forward;cudaGraphLaunch;graph_kernel_a 2000" in lines
    assert sum(int(line.rsplit(" ", 1)[1]) for line in lines) == 11000


def test_2021_call_stack_stands_in_for_python_frames():
    trace = read_trace(TRACES / "kineto" / "resnet50_v100_num_workers_0.pt.trace.json.gz")
    paths = call_paths(trace)
    assert (paths.launch_of >= 0).all()
    frames = {tuple(paths.frames(int(p))) for p in np.unique(paths.path_of)}
    assert any(f[0].startswith("resnet50_profiler_api.py(") and "aten::conv2d" in f for f in frames)


def test_real_bert_call_paths_reach_modules():
    trace = read_trace(TRACES / "tracelens" / "h100_bert-small-uncased.json.gz")
    paths = call_paths(trace)
    assert (paths.launch_of >= 0).all() and (paths.op_of >= 0).all()
    table = path_table(trace, paths)
    assert table["call_path"].str.startswith("nn.Module: Bert").all()
    assert table["gpu_us"].sum() == pytest.approx(trace.dur[paths.work].sum())


def test_graph_replay_kernels_share_their_launch():
    trace = read_trace(TRACES / "tracelens" / "mi300x_vllm_decode_cudagraph_graph_execution.json.gz")
    paths = call_paths(trace)
    launch_names = [trace.names[trace.name[r]] for r in paths.launch_of if r >= 0]
    assert launch_names.count("hipGraphLaunch") == 421 and (paths.launch_of >= 0).all()
