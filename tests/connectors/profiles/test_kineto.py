"""KinetoConnector: exact figures on small synthetic traces, then every shared real trace, and the
streaming parse. The trace analyzers built on it are tested in tests/audit/test_trace_analysis.py."""
from __future__ import annotations

import gzip
import json
import re
from datetime import datetime, timezone
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from connectors.base import ReadContext, SourceSpec
from connectors.errors import InputError
from connectors.profiles import stream as trace_stream
from connectors.profiles.events import KERNEL, MEMSET, length, load_trace, merge, overlap, read_trace
from connectors.profiles.kineto import KinetoConnector, kernel_category, memcpy_category
from connectors.registry import resolve
from tests.builders import ADD, CURRENT, GEMM, SCHEMA_2021, T0, gpu_events, host_events, trace_doc, write_trace, x
from tests.paths import DATA

TRACES = DATA / "traces"
CTX = ReadContext(datetime(2025, 1, 1, tzinfo=timezone.utc), datetime(2025, 2, 1, tzinfo=timezone.utc), "USD")
def reader(path: Path) -> KinetoConnector:
    """A connector for ``path``."""
    return KinetoConnector(SourceSpec(path.stem, "profiles", "kineto", path), CTX)


# ---------------------------------------------------------------- synthetic: exact figures

@pytest.mark.parametrize("cats, sync", [(CURRENT, 3.75), (SCHEMA_2021, 2.5)], ids=["current", "2021"])
@pytest.mark.parametrize("name", ["trace.json", "trace.json.gz"])
def test_synthetic_profile_exact(tmp_path, cats, sync, name):
    current = cats is CURRENT
    path = write_trace(tmp_path, trace_doc(gpu_events(cats) + host_events(cats, current)), name)
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
    frame = reader(write_trace(tmp_path, trace_doc(gpu_events(CURRENT) + host_events(CURRENT)))).read()
    kernels = frame.tables["kernels"]
    assert kernels.to_dict("records") == [
        {"name": GEMM, "category": "gemm", "count": 2, "total_us": 14.75},
        {"name": ADD, "category": "elementwise_reduction", "count": 1, "total_us": 10.0},
    ]
    categories = dict(zip(frame.tables["categories"]["category"], frame.tables["categories"]["total_us"]))
    # the DtoH copy [33, 36] us begins inside the GEMM [30, 34.5] on its stream 7: its first 1.5 us are
    # the GEMM's (3.0 before, the overlap counted twice), and the source's notes say so
    assert categories == {"gemm": 14.75, "elementwise_reduction": 10.0, "memcpy_dtoh": 1.5,
                          "memcpy_htod": 2.5, "memset": 1.875}
    assert list(frame.tables["categories"]["category"])[0] == "gemm"
    assert frame.tables["notes"]["note"].tolist()[0].startswith("1 GPU event on device 0 stream 7 began before")


def test_request_spans_set_the_window(tmp_path):
    spans = [
        {"ph": "X", "cat": "user_annotation", "name": "costaudit.request#1", "pid": 1, "tid": 1,
         "ts": T0, "dur": 12.0, "args": {}},
        {"ph": "X", "cat": "gpu_user_annotation", "name": "costaudit.request#2", "pid": 0, "tid": 7,
         "ts": T0 + 29.0, "dur": 6.0, "args": {"device": 0}},
        {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
         "ts": T0 - 100, "dur": 500.0},
    ]
    row = reader(write_trace(tmp_path, trace_doc(gpu_events(CURRENT) + spans))).read().tables["profile"].iloc[0]
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
    row = reader(write_trace(tmp_path, doc)).read().tables["profile"].iloc[0]
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
    row = reader(write_trace(tmp_path, doc)).read().tables["profile"].iloc[0]
    assert row["device"] == "" and row["kernel_active_us"] == 19.25


def test_a_trace_of_copies_alone_is_refused(tmp_path):
    """It read as a profile of kernel-active 0 and a null gap ratio, and the audit then put its
    service's GPU time under "no kernel profile" beside the profile."""
    events = [e for e in gpu_events(CURRENT) if e["cat"] != "kernel"]
    with pytest.raises(InputError, match="no GPU kernel event, only memcpy / memset"):
        reader(write_trace(tmp_path, trace_doc(events))).read()


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
    # copies alone measure no forward pass: the service's GPU time was "no kernel profile", beside one
    ("copies.json", json.dumps(trace_doc(host_events(CURRENT)[:5] + [
        {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "ts": 10, "dur": 5,
         "pid": 0, "tid": 7, "args": {"device": 0, "stream": 7}}])).encode(), "no GPU kernel event, only memcpy"),
    ("badts.json", json.dumps({"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": "soon",
                                                 "dur": 1}]}).encode(), "ts is 'soon'"),
    # a JSON true read as 1 us of kernel time (before: busy and the window moved, no word)
    ("booldur.json", json.dumps(trace_doc(gpu_events(CURRENT) + [
        {"ph": "X", "cat": "kernel", "name": "k", "ts": 40, "dur": True, "pid": 0, "tid": 7,
         "args": {"device": 0, "stream": 7}}])).encode(), "dur is True"),
    ("boolts.json", json.dumps(trace_doc(gpu_events(CURRENT) + [
        {"ph": "X", "cat": "kernel", "name": "k", "ts": False, "dur": 3, "pid": 0, "tid": 7,
         "args": {"device": 0, "stream": 7}}])).encode(), "ts is False"),
    ("badargs.json", b'{"traceEvents": [{"ph": "X", "cat": "kernel", "ts": 1, "args": [1]}]}',
     "unexpected trace structure"),
])
def test_bad_input_raises_input_error(tmp_path, name, data, message):
    path = write_trace(tmp_path, data, name)
    with pytest.raises(InputError, match=re.escape(message)) as caught:
        reader(path).read()
    assert str(caught.value).startswith(str(path))


def test_no_gpu_events_says_what_was_expected(tmp_path):
    path = write_trace(tmp_path, trace_doc(host_events(CURRENT)))
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
    assert reader(write_trace(tmp_path, trace_doc(gpu_events(CURRENT)))).check() == []


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
    assert row["gap_basis"] in ("gpu_window", "profiler_steps", "main_activity") and frame.rows > row["kernels"]
    # each trace's basis and g: tests/connectors/profiles/test_gap_window.py


def test_qwen_matches_naive_reference():
    row = real("tracelens/h100_qwen1.5-0.5b-chat.json.gz").tables["profile"].iloc[0]
    assert row["device"] == "NVIDIA H100 80GB HBM3"
    assert row["kernel_active_us"] == pytest.approx(45432.706, abs=0.02)
    assert row["gpu_window_us"] == pytest.approx(49652.832, abs=0.01)
    assert row["gap_ratio_full"] == pytest.approx(0.092887, abs=2e-6)      # over the GPU window
    assert row["gap_basis"] == "profiler_steps"     # g over its one ProfilerStep: test_gap_window.py


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
    path = write_trace(tmp_path, text, name)
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
        read_trace(write_trace(tmp_path, data))


def test_empty_event_list_reads_as_no_events(tmp_path):
    trace = read_trace(write_trace(tmp_path, b'{"traceEvents": [ ], "traceName": "x"}'))
    assert trace.rows == 0 and trace.role.size == 0


def test_gc_state_is_restored(tmp_path):
    import gc
    assert gc.isenabled()
    read_trace(write_trace(tmp_path, trace_doc(gpu_events(CURRENT))))
    assert gc.isenabled()


@pytest.mark.parametrize("name", ["big.json", "big.json.gz"])
def test_a_malformed_value_is_named_at_its_byte_of_the_file(tmp_path, name):
    """The byte was counted from the start of the piece being decoded (byte 193,905 for a NaN at
    byte 3,339,591 of the file), and a trace cut short gave the same words as one with garbage after it."""
    events = [dict(e, ts=e["ts"] + 100 * i) for i in range(12_000) for e in gpu_events(CURRENT)]
    text = json.dumps(trace_doc(events)).encode()
    assert len(text) > 3 * (1 << 20)  # several pieces of the stream
    hits = [m.start(1) for m in re.finditer(rb'"dur": (\d+(\.\d+)?)', text)]
    at = hits[len(hits) * 2 // 3]
    bad = text[:at] + b"NaN" + text[text.index(b",", at):]
    with pytest.raises(InputError) as caught:
        reader(write_trace(tmp_path, bad, name)).read()
    where = " of the decompressed trace" if name.endswith(".gz") else ""
    assert f"invalid character (byte {at}{where})" in str(caught.value)
    with pytest.raises(InputError) as caught:
        reader(write_trace(tmp_path, text + b"garbage", "tail.json")).read()
    assert f"trailing characters (byte {len(text)})" in str(caught.value)
