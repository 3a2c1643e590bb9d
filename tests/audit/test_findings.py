"""Kernel-level findings (audit/trace/findings.py) and the `costaudit trace` command (audit/cli/trace.py)."""
from __future__ import annotations

import json
from decimal import Decimal
from functools import lru_cache
from pathlib import Path

import pytest

from audit.cli.trace import trace_command
from audit.trace.findings import findings_from_profile, findings_from_traces
from audit.trace.idle import idle_by_category, idle_groups
from audit.trace.profile_view import ProfileView
from connectors.profiles.events import read_trace
from tests.paths import DATA

TRACES = DATA / "traces"
T0 = 1_700_000_000_000.0
GEMM = "ampere_sgemm_128x64_nn"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float> >(int)"


@lru_cache(maxsize=None)
def real(relative: str, price: str | None = "3.50") -> tuple:
    """Findings of a shared trace (cached), as a tuple of dicts."""
    return tuple(findings_from_profile(TRACES / relative, price))


def ids(findings) -> list[str]:
    """The ids of a list of findings, in order."""
    return [f["id"] for f in findings]


def event(cat, name, ts, dur, tid=1, pid=1, **args):
    """A complete event ``ts`` us after T0."""
    return {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": T0 + ts, "dur": dur, "args": args}


def kernel(name, ts, dur, correlation, stream=7, cat="kernel", **args):
    """A GPU event on device 0."""
    return event(cat, name, ts, dur, tid=stream, pid=0, device=0, stream=stream, correlation=correlation, **args)


def write(tmp_path: Path, events, name="t.json") -> Path:
    """A Kineto-style trace file."""
    path = tmp_path / name
    doc = {"deviceProperties": [{"id": 0, "name": "GPU", "numSms": 100}], "traceEvents": events}
    path.write_text(json.dumps(doc))
    return path


# ---------------------------------------------------------------- synthetic, exact

def test_sync_waste_counts_the_gap_the_blocking_call_drained(tmp_path):
    events = [event("cpu_op", "aten::item", 0.0, 40.0, **{"External id": 1}),
              event("cuda_runtime", "cudaLaunchKernel", 1.0, 1.0, correlation=1, **{"External id": 1}),
              kernel(GEMM, 2.0, 10.0, 1),
              event("cuda_runtime", "cudaStreamSynchronize", 5.0, 30.0, correlation=2, **{"External id": 1}),
              event("cuda_runtime", "cudaLaunchKernel", 41.0, 1.0, correlation=3),
              kernel(GEMM, 50.0, 10.0, 3)]
    (sync,) = [f for f in findings_from_profile(write(tmp_path, events), "3.60") if f["id"] == "sync_waste"]
    assert sync["kernel"] == "cudaStreamSynchronize" and sync["call_path"] == "aten::item"
    # the sync was blocking when the GPU went idle (12): the gap until the next launch call (41) is
    # its doing (issue 16, METHOD §6), not only the 23 us the host was blocked (12 .. 35); the 9 us
    # from the launch call to the kernel (41 .. 50) are the launch's (they were counted here, 38 us)
    assert sync["gpu_ms"] == "0.029" and sync["evidence"]["gpu_idle_us"] == 29.0
    assert sync["evidence"]["drained_gaps"] == 1 and sync["evidence"]["drained_idle_us"] == 29.0
    assert sync["share"] == f"{Decimal(29) / Decimal(58):.6f}"                       # window 2 .. 60
    assert sync["bucket"] == "serving_path" and sync["part"] == "in_flight_idle"
    assert sync["profile_cost"] == "0.000000029"                                     # 29 us at 3.60 / h
    assert sync["cost"] == str((Decimal(29) / Decimal(58) * Decimal("3.60")).quantize(Decimal("0.0001")))
    assert idle_by_category(ProfileView(read_trace(write(tmp_path, events)), 0)) == {
        "sync_drain": 29.0, "host_compute": 0.0, "launch_bound": 9.0, "input_wait": 0.0, "copy_bound": 0.0,
        "gpu_side": 0.0, "untraced": 0.0}


def test_a_sync_drain_ends_at_the_next_launch_even_inside_the_syncs_caller(tmp_path):
    """The Python frame that issued the sync also makes the next launch, which stalls 20 us in its
    call: the drain lasts from the GPU going idle (12) to that launch call (41), the rest of the gap
    (41 .. 70) is launch-bound at the launched kernel's path. It was 58 us of sync drain: the gap
    ran to the caller's return (80), past the kernel's start (70)."""
    events = [event("python_function", "serve.py(10): step", 0.0, 80.0),
              event("cpu_op", "aten::item", 0.5, 35.0),
              event("cuda_runtime", "cudaLaunchKernel", 1.0, 1.0, correlation=1),
              kernel(GEMM, 2.0, 10.0, 1),
              event("cuda_runtime", "cudaStreamSynchronize", 5.0, 30.0, correlation=2),
              event("cpu_op", "aten::add", 40.0, 30.0),
              event("cuda_runtime", "cudaLaunchKernel", 41.0, 28.0, correlation=3),
              kernel(ADD, 70.0, 10.0, 3)]
    view = ProfileView(read_trace(write(tmp_path, events)), 0)
    assert idle_by_category(view) == {"sync_drain": 29.0, "host_compute": 0.0, "launch_bound": 29.0,
                                      "input_wait": 0.0, "copy_bound": 0.0, "gpu_side": 0.0, "untraced": 0.0}
    assert {(g["category"], g["callpath"], g["idle_us"]) for g in idle_groups(view)} == {
        ("sync_drain", "aten::item", 29.0), ("launch_bound", "aten::add", 29.0)}


def test_launch_bound_tiny_kernels_with_late_launches(tmp_path):
    events = []
    for i in range(20):                                   # a launch every 20 us, 2 us kernels
        events.append(event("cuda_runtime", "cudaLaunchKernel", 20.0 * i, 5.0, correlation=i + 1))
        events.append(kernel(ADD, 20.0 * i + 6.0, 2.0, i + 1))
    (found,) = [f for f in findings_from_profile(write(tmp_path, events)) if f["id"] == "launch_bound"]
    assert found["evidence"]["starved_gaps"] == 19 and found["evidence"]["median_kernel_us"] == 2.0
    assert found["gpu_ms"] == "0.342" and found["kernel"] == ADD                     # 19 gaps of 18 us
    assert found["cost"] is None and found["reason"] == "no price per GPU-hour given"


def test_queued_kernels_are_not_launch_bound(tmp_path):
    events = [event("cuda_runtime", "cudaLaunchKernel", float(i), 0.5, correlation=i + 1) for i in range(10)]
    events += [kernel(ADD, 20.0 + 5.0 * i, 2.0, i + 1) for i in range(10)]           # all queued early
    assert "launch_bound" not in ids(findings_from_profile(write(tmp_path, events)))


def test_input_bound_needs_gpu_idle_during_data_loading(tmp_path):
    events = []
    for step in range(3):
        base = 100.0 * step
        events.append(event("cpu_op", "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__", base, 60.0))
        events.append(event("cuda_runtime", "cudaLaunchKernel", base + 61.0, 1.0, correlation=step + 1))
        events.append(kernel(GEMM, base + 62.0, 38.0, step + 1))
    (found,) = [f for f in findings_from_profile(write(tmp_path, events)) if f["id"] == "input_bound"]
    assert found["evidence"]["gpu_idle_us"] == 120.0 and found["kernel"] == GEMM       # 2 waits inside the window
    assert found["call_path"].startswith("enumerate(DataLoader)")


def test_copy_overhead_and_pageable_copies(tmp_path):
    events = [event("cuda_runtime", "cudaMemcpyAsync", 0.0, 12.0, correlation=1),
              kernel("Memcpy HtoD (Pageable -> Device)", 1.0, 10.0, 1, cat="gpu_memcpy", bytes=4096),
              event("cuda_runtime", "cudaLaunchKernel", 12.0, 1.0, correlation=2),
              kernel(GEMM, 13.0, 87.0, 2)]
    found = {f["id"]: f for f in findings_from_profile(write(tmp_path, events))}
    copy = found["copy_overhead"]
    # 10 us of copy not hidden behind a kernel, and the 1 us the GPU idled while the host was still in
    # the pageable copy's call (11 .. 12: copy-bound idle, issue 16); from 12 the host is in the next
    # launch call, which is launch-bound (the drain ends at the next launch, METHOD §6: it was 2 us, 11 .. 13)
    assert copy["gpu_ms"] == "0.011" and copy["evidence"]["pageable"] == 1 and copy["evidence"]["bytes"] == 4096
    assert copy["evidence"]["exposed_us"] == 10.0 and copy["evidence"]["staging_idle_us"] == 1.0
    assert idle_by_category(ProfileView(read_trace(write(tmp_path, events)), 0))["launch_bound"] == 1.0
    assert copy["kernel"] == "Memcpy HtoD (Pageable -> Device)"


def test_memory_bound_chain_from_shapes(tmp_path):
    events = []
    for i in range(4):
        ts = 10.0 * i
        events.append(event("cpu_op", "aten::add", ts, 5.0, **{"External id": i + 1, "Input Dims": [[64, 64], [64, 64]],
                                                              "Input type": ["float", "float"]}))
        events.append(event("cuda_runtime", "cudaLaunchKernel", ts + 1.0, 1.0, correlation=i + 1,
                            **{"External id": i + 1}))
        events.append(kernel(ADD, ts + 3.0, 4.0, i + 1))
    (chain,) = [f for f in findings_from_profile(write(tmp_path, events)) if f["id"] == "memory_bound_chain"]
    assert chain["evidence"]["chains"] == 1 and chain["evidence"]["kernels"] == 4
    assert chain["evidence"]["median_flop_per_byte"] == pytest.approx(4096 / (3 * 4096 * 4), abs=1e-3)
    assert chain["bucket"] == "model_compute" and chain["gpu_ms"] == "0.016"
    # the mean length read as a count ("Chains of 4.0 short memory-bound kernels")
    assert chain["title"] == "1 chain of short memory-bound kernels, 4.0 kernels long on average (fusion candidates)"


def test_a_chain_launched_from_unrelated_paths_names_its_longest_kernel_s_path(tmp_path):
    """Its call path was "(various)" where its kernels shared no frame (METHOD §6: a finding names
    the call path that launched its kernel)."""
    events = []
    for i, op in enumerate(("aten::add", "aten::mul", "aten::add", "aten::mul")):
        ts = 10.0 * i
        events.append(event("cpu_op", op, ts, 5.0, **{"External id": i + 1, "Input Dims": [[64, 64], [64, 64]],
                                                      "Input type": ["float", "float"]}))
        events.append(event("cuda_runtime", "cudaLaunchKernel", ts + 1.0, 1.0, correlation=i + 1,
                            **{"External id": i + 1}))
        events.append(kernel(ADD, ts + 3.0, 5.0 if i == 1 else 4.0, i + 1))
    (chain,) = [f for f in findings_from_profile(write(tmp_path, events)) if f["id"] == "memory_bound_chain"]
    assert chain["evidence"]["kernels"] == 4 and chain["call_path"] == "aten::mul"  # the 5 us kernel's


def test_batch_size_mismatch_small_m_from_shapes(tmp_path):
    events = [event("cpu_op", "aten::mm", 0.0, 5.0, **{"External id": 1, "Input Dims": [[8, 1024], [1024, 1024]],
                                                       "Input type": ["c10::BFloat16", "c10::BFloat16"]}),
              event("cuda_runtime", "cudaLaunchKernel", 1.0, 1.0, correlation=1, **{"External id": 1}),
              kernel(GEMM, 2.0, 50.0, 1, grid=[64, 1, 1], block=[128, 1, 1])]
    (found,) = [f for f in findings_from_profile(write(tmp_path, events)) if f["id"] == "batch_size_mismatch"]
    assert found["evidence"]["median_m"] == 8 and found["evidence"]["reasons"] == ["small_m"]
    assert found["call_path"] == "aten::mm" and found["gpu_ms"] == "0.050"


# ---------------------------------------------------------------- shared traces

def test_alexnet_shows_synchronisation_waste():
    findings = real("hta/alexnet_a100_cuda_sync.json.gz")
    found = [f for f in findings if f["id"] == "sync_waste"]
    calls = {f["kernel"] for f in found}
    assert {"cudaStreamSynchronize", "cudaDeviceSynchronize"} == calls
    assert all(float(f["gpu_ms"]) > 0 and f["part"] == "in_flight_idle" for f in found)
    # the pageable cudaMemcpyAsync calls drained no gap: the idle inside them is the host staging the
    # pageable buffer (copy-bound, in copy_overhead), not idle with nothing queued; before, it was
    # counted in a sync_waste finding too (idle_inside_calls_us 1892)
    (copy,) = [f for f in findings if f["id"] == "copy_overhead"]
    assert copy["evidence"]["staging_idle_us"] == 1931.0


def test_idle_inside_a_sync_that_drained_nothing_counts_only_while_nothing_was_queued():
    """profile16's cudaEventSynchronize (main->process > phase3) drained no gap; the idle inside it,
    163.514 us, was the tail of a host-compute gap whose next copy had already been launched before
    the sync began (153.178 us) and four gaps whose next work was launched long before (10.336 us):
    work was queued throughout, so it is no sync waste (METHOD §6: "while the GPU has nothing
    queued"). Before, a sync_waste finding counted all of it, already counted in host_compute."""
    findings = [f for f in real("nsys-extrap/profile16.sqlite") if f["id"] == "sync_waste"]
    assert {f["kernel"] for f in findings} == {"cudaStreamSynchronize"}
    assert all(f["evidence"]["idle_inside_calls_us"] == 0.0 for f in findings)


def test_bert_is_launch_bound():
    findings = real("tracelens/h100_bert-small-uncased.json.gz")
    top = findings[0]
    # its idle by host call path (issue 16): most is launch overhead, the rest host work that launches
    # nothing (transformers' ModelOutput dataclasses, inspect.signature) and one read-back
    assert top["id"] == "launch_bound" and float(top["share"]) > 0.55
    host = sum(float(f["share"]) for f in findings if f["id"] == "host_compute")
    assert float(top["share"]) + host > 0.7                                  # top 3 host paths
    assert top["evidence"]["median_kernel_us"] < 10 and "nn.Module: Bert" in top["call_path"]
    assert Decimal(top["cost"]) == (Decimal(top["share"]) * Decimal("3.50")).quantize(Decimal("0.0001"))


def test_resnet_input_bound_with_no_workers_only():
    zero = [f for f in real("kineto/resnet50_v100_num_workers_0.pt.trace.json.gz") if f["id"] == "input_bound"]
    four = [f for f in real("kineto/resnet50_v100_num_workers_4.pt.trace.json.gz") if f["id"] == "input_bound"]
    assert len(zero) == 1 and float(zero[0]["share"]) > 0.2 and not four
    assert "DataLoader" in zero[0]["call_path"]


def test_nsys_export_findings():
    findings = findings_from_profile(TRACES / "nsys-extrap" / "profile16.sqlite")
    assert "sync_waste" in ids(findings) and "copy_overhead" in ids(findings)


@pytest.mark.parametrize("relative", sorted(str(p.relative_to(TRACES)) for p in TRACES.rglob("*.json.gz")))
def test_findings_are_json_and_well_formed(relative):
    findings = real(relative)
    json.dumps(findings)
    for f in findings:
        assert Decimal(f["share"]) >= 0 and Decimal(f["gpu_ms"]) > 0
        assert {"id", "kernel", "call_path", "bucket", "part", "cost", "evidence", "fix"} <= set(f)
        assert isinstance(f["cost"], str) and Decimal(f["cost"]) >= 0
    assert [float(f["gpu_ms"]) for f in findings] == sorted((float(f["gpu_ms"]) for f in findings), reverse=True)


def test_multi_rank_findings_name_their_rank():
    traces = [read_trace(TRACES / "hta" / "multirank_sampled" / f"sampled_rank-{r}.json.gz") for r in (0, 1)]
    findings = findings_from_traces(traces)
    assert {f["rank"] for f in findings} == {0, 1}


# ---------------------------------------------------------------- costaudit trace

def test_trace_command_text_json_and_folded(tmp_path, capsys):
    path = TRACES / "tracelens" / "h100_bert-small-uncased.json.gz"
    folded = tmp_path / "bert.folded"
    assert trace_command([path], False, Decimal("3.50"), folded=folded) == 0
    text = capsys.readouterr().out
    assert "window 3.908 ms" in text and "HTA rules" in text and "[launch_bound]" in text
    assert "top call paths by GPU time" in text
    lines = folded.read_text().splitlines()
    assert lines and all(line.rsplit(" ", 1)[1].isdigit() for line in lines)
    assert trace_command([path], True, None) == 0
    document = json.loads(capsys.readouterr().out)
    assert document["format"] == 1 and document["ranks"][0]["devices"][0]["busy_us"] == pytest.approx(309.437, abs=1e-3)
    assert document["findings"][0]["cost"] is None and document["call_paths"][0]["top"]


def test_trace_command_multi_rank_and_nsys(capsys):
    paths = [TRACES / "hta" / "multirank_sampled" / f"sampled_rank-{r}.json.gz" for r in (0, 1)]
    assert trace_command(paths + [TRACES / "nsys-extrap" / "con_kernel.sqlite"], True, None) == 0
    document = json.loads(capsys.readouterr().out)
    assert [r["rank"] for r in document["ranks"]] == [0, 1, 2]
    assert [r["source"] for r in document["ranks"]] == ["kineto", "kineto", "nsys"]


def test_trace_command_bad_input(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    assert trace_command([bad], False, None) == 1
    assert "costaudit: error:" in capsys.readouterr().err


def cpu_only_trace(path: Path) -> Path:
    """A Kineto trace recorded without the CUDA activity: host operators only."""
    events = [{"ph": "X", "name": "aten::mm", "cat": "cpu_op", "ts": 10 * i, "dur": 5, "pid": 0, "tid": 0}
              for i in range(4)]
    path.write_text(json.dumps({"traceEvents": events}))
    return path


@pytest.mark.parametrize("as_json", [False, True])
def test_trace_command_refuses_a_trace_with_no_gpu_events(tmp_path, capsys, as_json):
    """It used to print the rank's name and "findings: none", as if the GPU had wasted nothing."""
    path = cpu_only_trace(tmp_path / "cpu.json")
    assert trace_command([path], as_json, None) == 1
    out = capsys.readouterr()
    assert out.out == ""
    assert f"{path}: no GPU kernel, memcpy or memset events in any rank" in out.err
    assert "ProfilerActivity.CUDA" in out.err


def test_trace_command_names_the_rank_with_no_gpu_events_among_others(tmp_path, capsys):
    paths = [cpu_only_trace(tmp_path / "cpu.json"), TRACES / "tracelens" / "h100_bert-small-uncased.json.gz"]
    assert trace_command(paths, False, None) == 0
    text = capsys.readouterr().out
    rank0 = text.split("rank 1")[0]
    assert "no GPU kernel, memcpy or memset events: this rank's GPU time is unmeasured" in rank0
    assert "window 3.908 ms" in text.split("rank 1")[1]
