"""KinetoConnector: exact figures on small synthetic traces, then every shared real trace."""
from __future__ import annotations

import gzip
import json
import math
import re
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from tests.paths import DATA
from connectors.base import ReadContext, SourceSpec
from connectors.errors import InputError
from connectors.profiles.kineto import KinetoConnector, kernel_category, memcpy_category
from connectors.registry import resolve
from connectors.profiles.events import KERNEL, MEMSET, length, load_trace, merge, overlap

TRACES = DATA / "traces"
CTX = ReadContext(datetime(2025, 1, 1, tzinfo=timezone.utc), datetime(2025, 2, 1, tzinfo=timezone.utc), "USD")
T0 = 1_700_000_000_000.0          # epoch-scale base, as in real traces; offsets are binary fractions
GEMM = "ampere_sgemm_128x64_nn"
ADD = ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
       "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3>)")

CURRENT = {"kernel": "kernel", "memcpy": "gpu_memcpy", "memset": "gpu_memset", "runtime": "cuda_runtime"}
SCHEMA_2021 = {"kernel": "Kernel", "memcpy": "Memcpy", "memset": "Memset", "runtime": "Runtime"}


def reader(path: Path) -> KinetoConnector:
    """A connector for ``path``."""
    return KinetoConnector(SourceSpec(path.stem, "profiles", "kineto", path), CTX)


def x(cat, name, offset, dur, **args):
    """A complete (ph X) event ``offset`` us after T0."""
    return {"ph": "X", "cat": cat, "name": name, "pid": 0, "tid": args.get("stream", 1),
            "ts": T0 + offset, "dur": dur, "args": {"device": 0, **args}}


def gpu_events(cats, device=0, shift=0.0):
    """Two streams of overlapping kernels, a HtoD and a DtoH memcpy and a memset on one device."""
    events = [
        x(cats["kernel"], GEMM, shift + 0.5, 10.25, stream=7, correlation=1),
        x(cats["kernel"], ADD, shift + 5.25, 10.0, stream=8, correlation=2),
        x(cats["memcpy"], "Memcpy HtoD (Pageable -> Device)", shift + 16.0, 2.5, stream=7),
        x(cats["memset"], "Memset (Device)", shift + 20.125, 1.875, stream=7),
        x(cats["kernel"], GEMM, shift + 30.0, 4.5, stream=7, correlation=3),
        x(cats["memcpy"], "Memcpy DtoH (Device -> Pinned)", shift + 33.0, 3.0, stream=7),
    ]
    for event in events:
        event["args"]["device"] = device
        event["pid"] = device
    return events


def host_events(cats, current=True):
    """CPU-side noise plus synchronisation: one runtime sync call, and (current schema) its
    cuda_sync twin, an uncorrelated context sync and a GPU-side stream wait."""
    events = [
        {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "python", "labels": [1, 2]}},
        {"ph": "i", "cat": "cpu_instant_event", "name": "[memory]", "ts": T0, "pid": 1, "tid": 1,
         "s": "t", "args": {"Bytes": 512}},
        {"ph": "X", "cat": "python_function", "name": "model.py(12): forward", "pid": 1, "tid": 1,
         "ts": T0 - 3, "dur": 60, "args": {"Python id": 3, "Python parent id": None, "device": "cpu"}},
        {"ph": "X", "cat": "cpu_op" if current else "Operator", "name": "aten::mm", "pid": 1,
         "tid": 1, "ts": T0, "dur": 50, "args": {"External id": 4, "Input Dims": [[2, 2]]}},
        {"ph": "s", "cat": "ac2g", "id": 1, "pid": 1, "tid": 1, "ts": T0, "name": "flow"},
        x(cats["runtime"], "cudaLaunchKernel", 0.1, 0.3, correlation=1),
        x(cats["runtime"], "cudaStreamSynchronize", 40.0, 2.5, correlation=99),
    ]
    if current:
        events += [x("cuda_sync", "Stream Sync", 40.25, 2.0, correlation=99),
                   x("cuda_sync", "Context Sync", 45.0, 1.25, correlation=100),
                   x("cuda_sync", "Stream Wait Event", 46.0, 0.5, correlation=101)]
    return events


def trace_doc(events, devices=("NVIDIA H100 80GB HBM3",)):
    """A Kineto-style top-level object."""
    return {"schemaVersion": 1, "traceName": "synthetic", "displayTimeUnit": "ms",
            "deviceProperties": [{"id": i, "name": name, "totalGlobalMem": 1} for i, name in enumerate(devices)],
            "traceEvents": events}


def write(tmp_path: Path, doc, name="trace.json") -> Path:
    """Write ``doc`` (dict or bytes) as JSON, gzipped when ``name`` ends in .gz."""
    data = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return path


# ---------------------------------------------------------------- synthetic: exact figures

@pytest.mark.parametrize("cats, sync", [(CURRENT, 3.75), (SCHEMA_2021, 2.5)], ids=["current", "2021"])
@pytest.mark.parametrize("name", ["trace.json", "trace.json.gz"])
def test_synthetic_profile_exact(tmp_path, cats, sync, name):
    current = cats is CURRENT
    path = write(tmp_path, trace_doc(gpu_events(cats) + host_events(cats, current)), name)
    frame = reader(path).read()
    row = frame.tables["profile"].iloc[0]
    assert row["trace"] == name and row["device"] == "NVIDIA H100 80GB HBM3"
    assert row["gpu_window_us"] == 35.5                 # 0.5 .. 36.0
    assert row["kernel_active_us"] == 19.25             # [0.5, 15.25] + [30, 34.5]
    assert row["busy_us"] == 25.125                     # + [16, 18.5] + [20.125, 22] + [34.5, 36]
    assert row["idle_us"] == 10.375
    assert row["gap_ratio"] == pytest.approx(16.25 / 19.25, abs=1e-15)
    assert row["gap_basis"] == "gpu_window"
    assert row["kernels"] == 3
    assert row["sync_us"] == sync                       # 2.5 runtime (+ its twin once) + 1.25 ctx
    assert frame.rows == len(gpu_events(cats) + host_events(cats, current))
    assert frame.covered == (None, None) and len(frame.sha256) == 64


def test_synthetic_kernel_and_category_tables(tmp_path):
    frame = reader(write(tmp_path, trace_doc(gpu_events(CURRENT) + host_events(CURRENT)))).read()
    kernels = frame.tables["kernels"]
    assert kernels.to_dict("records") == [
        {"name": GEMM, "category": "gemm", "count": 2, "total_us": 14.75},
        {"name": ADD, "category": "elementwise_reduction", "count": 1, "total_us": 10.0},
    ]
    categories = dict(zip(frame.tables["categories"]["category"], frame.tables["categories"]["total_us"]))
    assert categories == {"gemm": 14.75, "elementwise_reduction": 10.0, "memcpy_dtoh": 3.0,
                          "memcpy_htod": 2.5, "memset": 1.875}
    assert list(frame.tables["categories"]["category"])[0] == "gemm"


def test_request_spans_set_the_window(tmp_path):
    spans = [
        {"ph": "X", "cat": "user_annotation", "name": "costaudit.request#1", "pid": 1, "tid": 1,
         "ts": T0, "dur": 12.0, "args": {}},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "costaudit.request#2", "pid": 0, "tid": 7,
         "ts": T0 + 29.0, "dur": 6.0, "args": {"device": 0}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": T0 - 100, "dur": 500.0},
    ]
    row = reader(write(tmp_path, trace_doc(gpu_events(CURRENT) + spans))).read().tables["profile"].iloc[0]
    assert row["gap_basis"] == "request_spans"
    assert row["gpu_window_us"] == 18.0                 # [0, 12] + [29, 35]
    assert row["kernel_active_us"] == 16.0              # [0.5, 12] + [30, 34.5]
    assert row["busy_us"] == 16.5                       # + [34.5, 35] of the DtoH copy
    assert row["idle_us"] == 1.5
    assert row["gap_ratio"] == 0.125
    assert row["kernels"] == 3                          # all kernels are counted


def test_multi_device_sums_and_names_the_busiest(tmp_path):
    events = gpu_events(CURRENT, device=0) + gpu_events(CURRENT, device=1, shift=100.0)
    events.append(x("kernel", GEMM, 200.0, 50.0, stream=7))
    events[-1]["args"]["device"] = 1
    doc = trace_doc(events, devices=("GPU-A", "GPU-B"))
    row = reader(write(tmp_path, doc)).read().tables["profile"].iloc[0]
    assert row["device"] == "GPU-B"
    assert row["kernel_active_us"] == 19.25 * 2 + 50.0
    assert row["gpu_window_us"] == 35.5 + (250.0 - 100.5)
    assert row["busy_us"] == 25.125 * 2 + 50.0
    assert row["kernels"] == 7


def test_no_device_properties_and_string_timestamps(tmp_path):
    events = gpu_events(CURRENT)
    for event in events:
        event["ts"] = repr(event["ts"])                 # some exporters write numbers as strings
        del event["args"]["device"]                     # fall back to pid
    doc = {"traceEvents": events}
    row = reader(write(tmp_path, doc)).read().tables["profile"].iloc[0]
    assert row["device"] == "" and row["kernel_active_us"] == 19.25


def test_no_kernels_gives_null_gap_ratio(tmp_path):
    events = [e for e in gpu_events(CURRENT) if e["cat"] != "kernel"]
    row = reader(write(tmp_path, trace_doc(events))).read().tables["profile"].iloc[0]
    assert row["kernel_active_us"] == 0.0 and row["busy_us"] == 7.375 and math.isnan(row["gap_ratio"])


def test_interval_helpers():
    starts, ends = np.array([5.0, 0.0, 1.0, 10.0]), np.array([6.0, 2.0, 3.0, 10.0])
    merged = merge(starts, ends)
    assert merged[0].tolist() == [0.0, 5.0, 10.0] and merged[1].tolist() == [3.0, 6.0, 10.0]
    assert length(*merged) == 4.0
    window = (np.array([-1.0, 2.5, 5.5]), np.array([1.0, 5.25, 20.0]))
    assert overlap(merged, window) == 1.0 + (0.5 + 0.25) + 0.5
    assert overlap(merged, (np.array([]), np.array([]))) == 0.0


@pytest.mark.parametrize("name, category", [
    ("ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "communication"),
    ("void (anonymous namespace)::multimem_all_reduce_kernel<c10::BFloat16, 16>(c10::BFloat16*)", "communication"),
    ("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, cutlass::bfloat16_t> >(Params)", "attention"),
    ("fmhaSm100aKernel_QkvE4m3OBfloat16H64PagedKvCausal", "attention"),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cublas", "gemm"),
    ("nvjet_tst_64x64_64x16_2x1_2cta_v_bz_bias_TNT", "gemm"),
    ("Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT32x32x256", "gemm"),
    ("void cutlass::Kernel2<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1>(Params)", "gemm"),
    ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, 512, true, 1>(cudnnTensorStruct)", "normalisation_softmax"),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, float>(float*)", "normalisation_softmax"),
    ("void vllm::rms_norm_kernel<c10::BFloat16, 8, 2>(c10::BFloat16*)", "normalisation_softmax"),
    ("sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw", "convolution"),
    ("void implicit_convolve_sgemm<float, float, 1024, 6, 7>(int, int)", "convolution"),
    ("volta_scudnn_128x64_relu_interior_nn_v1", "convolution"),
    ("void at::native::elementwise_kernel<128, 4, direct_copy_kernel_cuda>(int)", "elementwise_reduction"),
    ("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float> >(ReduceOp)", "elementwise_reduction"),
    ("void fbgemm_gpu::permute_2D_data_kernel<false, int>(int, int)", "elementwise_reduction"),
    ("triton_poi_fused_add_mul_0", "elementwise_reduction"),
    ("void fp8_convert_kernel<float>(float*)", "other"),
    ("void tensorrt_llm::quantize_with_block_size<2>(int, flashinfer::QuantizationSFLayout)", "other"),
])
def test_kernel_category(name, category):
    assert kernel_category(name) == category


def test_memcpy_category():
    assert memcpy_category("Memcpy HtoD (Pinned -> Device)") == "memcpy_htod"
    assert memcpy_category("Memcpy DtoH (Device -> Pageable)") == "memcpy_dtoh"
    assert memcpy_category("Memcpy DtoD (Device -> Device)") == "memcpy_dtod"
    assert memcpy_category("Memcpy PtoP (Device -> Device)") == "memcpy_dtod"
    assert memcpy_category("Memcpy HtoH (Pinned -> Pinned)") == "memcpy_other"


# ---------------------------------------------------------------- bad input

@pytest.mark.parametrize("name, data, message", [
    ("bad.json", b'{"traceEvents": [', "not valid JSON"),
    ("bad.json", b"<html>nope</html>", "not valid JSON"),
    ("list.json", b"[]", "unexpected trace structure"),
    ("nokey.json", b'{"schemaVersion": 1, "deviceProperties": []}', "no traceEvents list"),
    ("cpu.json", json.dumps(trace_doc(host_events(CURRENT)[:5])).encode(), "no GPU kernel, memcpy or memset"),
    ("badts.json", json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "soon",
                                                 "dur": 1}]}).encode(), "ts is 'soon'"),
    ("badargs.json", b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "args": [1]}]}',
     "unexpected trace structure"),
])
def test_bad_input_raises_input_error(tmp_path, name, data, message):
    path = write(tmp_path, data, name)
    with pytest.raises(InputError, match=re.escape(message)) as caught:
        reader(path).read()
    assert str(caught.value).startswith(str(path))


def test_no_gpu_events_says_what_was_expected(tmp_path):
    path = write(tmp_path, trace_doc(host_events(CURRENT)))
    with pytest.raises(InputError, match="expected a trace recorded with ProfilerActivity.CUDA"):
        reader(path).read()


def test_truncated_gzip(tmp_path):
    data = gzip.compress(json.dumps(trace_doc(gpu_events(CURRENT))).encode())
    path = tmp_path / "cut.json.gz"
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="cannot decompress gzip"):
        reader(path).read()
    assert len(reader(path).check()) == 1


def test_registry_and_check(tmp_path):
    assert resolve("kineto") is KinetoConnector
    assert reader(write(tmp_path, trace_doc(gpu_events(CURRENT)))).check() == []


# ---------------------------------------------------------------- shared real traces

def provenance_kernels() -> dict[str, int]:
    """file -> kernels column of PROVENANCE.md, for the Chrome traces."""
    counts = {}
    for line in (TRACES / "PROVENANCE.md").read_text().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) > 10 and cells[0].startswith("`") and cells[0].endswith(".json.gz`"):
            counts[cells[0].strip("`")] = int(cells[10])
    return counts


REAL = sorted(str(p.relative_to(TRACES)) for p in TRACES.rglob("*.json.gz"))
assert REAL, f"no shared traces under {TRACES}"


@lru_cache(maxsize=None)
def real(relative: str):
    """The SourceFrame of a shared trace, read once per test session."""
    return reader(TRACES / relative).read()


def test_provenance_lists_every_trace():
    assert set(provenance_kernels()) == set(REAL) and len(REAL) == 15


@pytest.mark.parametrize("relative", REAL)
def test_real_trace_loads_and_counts_kernels(relative):
    frame = real(relative)
    row = frame.tables["profile"].iloc[0]
    assert row["kernels"] == provenance_kernels()[relative]
    assert frame.tables["kernels"]["count"].sum() == row["kernels"]
    assert 0 < row["kernel_active_us"] <= row["busy_us"] <= row["gpu_window_us"]
    assert row["idle_us"] == pytest.approx(row["gpu_window_us"] - row["busy_us"])
    assert row["gap_basis"] == "gpu_window" and frame.rows > row["kernels"]


def test_qwen_matches_naive_reference():
    row = real("tracelens/h100_qwen1.5-0.5b-chat.json.gz").tables["profile"].iloc[0]
    assert row["device"] == "NVIDIA H100 80GB HBM3"
    assert row["kernel_active_us"] == pytest.approx(45432.706, abs=0.02)
    assert row["gpu_window_us"] == pytest.approx(49652.832, abs=0.01)
    assert row["gap_ratio"] == pytest.approx(0.092887, abs=2e-6)


@pytest.mark.parametrize("relative, device", [
    ("hta/multirank_sampled/sampled_rank-0.json.gz", ""),
    ("tracelens/mi300x_vllm_decode_cudagraph_graph_execution.json.gz", ""),
    ("kineto/resnet50_v100_num_workers_0.pt.trace.json.gz", "Tesla V100-DGXS-32GB"),
    ("hta/trace_diff_control_a100_rank3.json.gz", "NVIDIA A100-PG509-200"),
])
def test_real_device_names(relative, device):
    assert real(relative).tables["profile"].iloc[0]["device"] == device


def test_alexnet_sync_time():
    relative = "hta/alexnet_a100_cuda_sync.json.gz"
    events = json.loads(gzip.decompress((TRACES / relative).read_bytes()))["traceEvents"]
    host = sum(e["dur"] for e in events if e.get("cat") == "cuda_runtime" and e["name"] in
               ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize"))
    assert host > 0
    assert real(relative).tables["profile"].iloc[0]["sync_us"] == host   # cuda_sync twins not re-counted


def tracelens_reference(short: str) -> dict[str, float]:
    """TraceLens gpu_timeline.csv of ``short`` as {type: microseconds}."""
    text = (TRACES / "tracelens" / "reference" / f"{short}.gpu_timeline.csv").read_text()
    rows = [line.split(",") for line in text.splitlines()[1:]]
    return {kind: float(ms) * 1000.0 for kind, ms, _ in rows}


@pytest.mark.parametrize("short", ["h100_bert-small-uncased", "h100_owlv2-large-patch14-ensemble"])
def test_tracelens_busy_and_window(short):
    reference = tracelens_reference(short)
    row = real(f"tracelens/{short}.json.gz").tables["profile"].iloc[0]
    assert row["busy_us"] == pytest.approx(reference["busy_time"], rel=1e-5)
    assert row["gpu_window_us"] == pytest.approx(reference["total_time"], rel=1e-5)
    assert row["idle_us"] == pytest.approx(reference["idle_time"], rel=1e-5)


def test_tracelens_qwen_over_its_profiler_step():
    """TraceLens measures over the GPU ProfilerStep annotation (qwen ran 509 GPU events before it)
    and rounds through float32, hence rel=1e-5."""
    path = TRACES / "tracelens" / "h100_qwen1.5-0.5b-chat.json.gz"
    reference = tracelens_reference("h100_qwen1.5-0.5b-chat")
    step = next(e for e in json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
                if e.get("cat") == "gpu_user_annotation")
    trace = load_trace(path)
    window = (np.array([step["ts"] - trace.base]), np.array([step["ts"] + step["dur"] - trace.base]))
    computing = (trace.kind == KERNEL) | (trace.kind == MEMSET)     # TraceLens counts memsets as computation
    assert length(*window) == pytest.approx(reference["total_time"], rel=1e-5)
    assert overlap(merge(trace.start, trace.end), window) == pytest.approx(reference["busy_time"], rel=1e-5)
    assert overlap(merge(trace.start[computing], trace.end[computing]), window) == pytest.approx(
        reference["computation_time"], rel=1e-5)


# ---------------------------------------------------------------- streaming parse

from connectors.profiles import stream as trace_stream                                          # noqa: E402
from audit.trace.breakdown import breakdown, hta_breakdown, hta_kernel_types, ranks  # noqa: E402
from audit.trace.callpath import NO_LAUNCH, call_paths, folded_stacks, path_table   # noqa: E402
from connectors.profiles.events import read_trace                                # noqa: E402

TRICKY = 'a "quoted" name with },{ and ]} inside'


def tricky_doc():
    """Events whose strings and nested args hold the chunk boundary pattern; keys after the list."""
    events = gpu_events(CURRENT) + host_events(CURRENT)
    events.append({"ph": "X", "cat": "user_annotation", "name": TRICKY, "pid": 1, "tid": 1, "ts": T0 + 1.0,
                   "dur": 2.0, "args": {"nested": [{"a": [1, {"b": "},{"}]}, {"c": "]}"}]}})
    events.append({"ph": "i", "cat": "cpu_instant_event", "name": "mark", "pid": 1, "tid": 1, "ts": T0})
    events.append({"ph": "s", "id": 1, "cat": "ac2g", "name": "ac2g", "pid": 1, "tid": 1, "ts": T0})
    return events


@pytest.mark.parametrize("name", ["trace.json", "trace.json.gz"])
def test_stream_in_tiny_chunks_matches_one_piece(tmp_path, monkeypatch, name):
    events = tricky_doc()
    text = (b'{"schemaVersion": 1, "traceEvents": ' + json.dumps(events, indent=2).encode() +
            b', "deviceProperties": [{"id": 0, "name": "GPU-X", "numSms": 132}], "distributedInfo": {"rank": 3}}')
    path = write(tmp_path, text, name)
    whole = read_trace(path)
    monkeypatch.setattr(trace_stream, "CHUNK", 64)
    monkeypatch.setattr(trace_stream, "READ", 100)
    pieces = read_trace(path)
    assert pieces.rows == whole.rows == len(events)
    for column in ("role", "ts", "dur", "thread", "device", "stream", "correlation", "external", "name"):
        assert np.array_equal(getattr(pieces, column), getattr(whole, column)), column
    assert pieces.names == whole.names and TRICKY in pieces.names
    assert pieces.devices == {0: {"name": "GPU-X", "sms": 132}} and pieces.rank == 3


@pytest.mark.parametrize("data, message", [
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 1},', "not valid JSON"),
    (b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "dur": 1}', "not valid JSON"),
    (b'{"traceEvents": {"ph": "X"}}', "no traceEvents list"),
    (b'  [{"ph": "X"}]', "unexpected trace structure"),
])
def test_stream_errors(tmp_path, monkeypatch, data, message):
    monkeypatch.setattr(trace_stream, "CHUNK", 16)
    with pytest.raises(InputError, match=re.escape(message)):
        read_trace(write(tmp_path, data))


def test_empty_event_list_reads_as_no_events(tmp_path):
    trace = read_trace(write(tmp_path, b'{"traceEvents": [ ], "traceName": "x"}'))
    assert trace.rows == 0 and trace.role.size == 0


def test_gc_state_is_restored(tmp_path):
    import gc
    assert gc.isenabled()
    read_trace(write(tmp_path, trace_doc(gpu_events(CURRENT))))
    assert gc.isenabled()


# ---------------------------------------------------------------- breakdown, default rules

def test_breakdown_per_device_and_stream(tmp_path):
    doc = trace_doc(gpu_events(CURRENT) + host_events(CURRENT, current=True))
    (rank,) = breakdown([read_trace(write(tmp_path, doc))])
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
    (device,) = breakdown([read_trace(write(tmp_path, trace_doc(events)))])[0]["devices"]
    assert device["coarse_us"] == {"computation": 4.0, "communication": 4.0, "memory": 0.0}
    assert device["busy_us"] == 6.0


def test_ranks_from_distributed_info_and_position(tmp_path):
    paths = []
    for rank in (5, 5, None):
        doc = trace_doc(gpu_events(CURRENT))
        if rank is not None:
            doc["distributedInfo"] = {"rank": rank}
        paths.append(write(tmp_path, doc, f"r{len(paths)}.json"))
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
    trace = read_trace(write(tmp_path, step_doc()))
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


HTA_REFERENCE = json.loads((Path(__file__).resolve().parents[1] / "data" / "hta_reference.json").read_text())


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
    trace = read_trace(write(tmp_path, stack_doc()))
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
    trace = read_trace(write(tmp_path, stack_doc()))
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
