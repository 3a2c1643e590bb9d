"""Idle by host call path (audit/trace/idle.py, METHOD §6, issue 16): planted patterns recovered
from fixtures/make_sync_trace.py's trace against its truth, and the shared real traces."""
from __future__ import annotations

import json
import subprocess
import sys
from decimal import Decimal
from functools import lru_cache

import pytest

from audit.trace.analyse import analyse
from audit.trace.findings import findings_from_profile
from audit.trace.idle import CATEGORIES, idle_by_category, idle_folded, idle_groups
from audit.trace.profile_view import ProfileView
from connectors.profiles.events import read_trace
from tests.paths import DATA, FIXTURES, ROOT

TRACES = DATA / "traces"
GENERATOR = FIXTURES / "make_sync_trace.py"


@pytest.fixture(scope="module", params=[16, 2027])
def planted(request, tmp_path_factory):
    """(trace path, truth) of a generated trace, for two seeds."""
    out = tmp_path_factory.mktemp(f"sync{request.param}")
    subprocess.run([sys.executable, str(GENERATOR), "--out", str(out), "--seed", str(request.param)],
                   cwd=ROOT, check=True)
    return out / "sync_trace.json.gz", json.loads((out / "sync_trace.truth.json").read_text())


@lru_cache(maxsize=None)
def view_of(path: str) -> ProfileView:
    return ProfileView(read_trace(path), 0)


def test_generator_is_deterministic_and_imports_nothing_of_ours(tmp_path):
    text = GENERATOR.read_text()
    assert "import audit" not in text and "from audit" not in text and "connectors" not in text.split('"""', 2)[2]
    for name in ("a", "b"):
        subprocess.run([sys.executable, str(GENERATOR), "--out", str(tmp_path / name)], cwd=ROOT, check=True)
    for file in ("sync_trace.json.gz", "sync_trace.truth.json"):
        assert (tmp_path / "a" / file).read_bytes() == (tmp_path / "b" / file).read_bytes()


def test_pattern_1_is_a_sync_finding_at_the_call_path_that_issued_the_sync(planted):
    path, truth = planted
    want = truth["planted"]["sync_drain"]
    sync = [f for f in findings_from_profile(path, "3.50") if f["id"] == "sync_waste"]
    top = sync[0]
    assert top["kernel"] == "cudaStreamSynchronize"
    assert top["call_path"].split(" > ")[0] == want["frame"]                  # logging_hooks.py(18): log_topk
    recovered = top["evidence"]["drained_idle_us"]
    assert abs(recovered - want["idle_us"]) <= 0.03 * want["idle_us"], (recovered, want)
    assert top["evidence"]["drained_gaps"] == want["gaps"]
    # the GPU idle it caused, not only the microseconds the host was blocked, and priced
    assert float(top["gpu_ms"]) * 1000 >= recovered > 5 * top["evidence"]["idle_inside_calls_us"]
    share = Decimal(top["share"])
    assert share == (Decimal(recovered) / Decimal(truth["window_us"])).quantize(Decimal("0.000001"))
    assert Decimal(top["cost"]) == (share * Decimal("3.50")).quantize(Decimal("0.0001"))
    # and that idle is no longer the launch's that ended the gap
    launch = [f for f in findings_from_profile(path) if f["id"] in ("launch_bound", "host_overhead")]
    assert all("log_topk" not in f["call_path"] and "step" not in f["call_path"].split(" > ")[-1] for f in launch)


def test_host_compute_and_launch_bound_gaps_recovered(planted):
    path, truth = planted
    groups = idle_groups(view_of(str(path)))
    for category in ("host_compute", "launch_bound", "sync_drain"):
        want = truth["planted"][category]
        got = sum(g["idle_us"] for g in groups if g["category"] == category and want["frame"] in g["callpath"])
        assert abs(got - want["idle_us"]) <= 0.03 * want["idle_us"], (category, got, want)
    (host,) = [f for f in findings_from_profile(path) if f["id"] == "host_compute"][:1]
    assert host["call_path"].startswith(truth["planted"]["host_compute"]["frame"])


def test_every_gap_is_classified_and_the_classes_add_up_to_the_idle(planted):
    path, truth = planted
    view = view_of(str(path))
    totals = idle_by_category(view)
    assert set(totals) == set(CATEGORIES)
    assert sum(totals.values()) == pytest.approx(truth["idle_us"], abs=1e-6)
    folded = idle_folded(view)
    assert sum(int(line.rsplit(" ", 1)[1]) for line in folded) == pytest.approx(truth["idle_us"], abs=len(folded))
    assert any("log_topk;" in line and line.split(" ")[-2].endswith("[idle: sync drain]") or
               "[idle: sync drain]" in line and "log_topk" in line for line in folded)


def test_the_trace_document_lists_idle_paths_and_writes_the_idle_flame_graph(planted):
    path, truth = planted
    document, busy = analyse([path], Decimal("2.00"))
    (entry,) = document["idle_paths"]
    top = entry["top"][0]
    assert top["category"] == "sync_drain" and top["callpath"].startswith(truth["planted"]["sync_drain"]["frame"])
    assert Decimal(top["cost"]) == (Decimal(top["share"]) * Decimal("2.00")).quantize(Decimal("0.0001"))
    assert entry["by_category_us"]["sync_drain"] == pytest.approx(truth["planted"]["sync_drain"]["idle_us"], rel=0.03)
    assert busy and all(not line.startswith("[idle") for line in busy)


# ---------------------------------------------------------------- shared traces

def test_alexnet_shows_its_pageable_copies_as_copy_overhead():
    path = TRACES / "hta" / "alexnet_a100_cuda_sync.json.gz"
    (copy,) = [f for f in findings_from_profile(path, "3.50") if f["id"] == "copy_overhead"]
    assert copy["kernel"] == "Memcpy HtoD (Pageable -> Device)" and copy["title"].startswith("Exposed pageable")
    assert copy["evidence"]["pageable"] == copy["evidence"]["copies"] == 16
    assert copy["evidence"]["share_of_busy"] > 0.8                        # most of its busy time
    assert copy["evidence"]["staging_idle_us"] > 0 and Decimal(copy["cost"]) >= 0
    totals = idle_by_category(view_of(str(path)))
    assert totals["copy_bound"] > 0 and totals["host_compute"] > 0.9 * sum(totals.values())   # cuDNN's search


def test_graph_replayed_decode_is_never_host_idle():
    view = view_of(str(TRACES / "tracelens" / "mi300x_vllm_decode_cudagraph_graph_execution.json.gz"))
    totals = idle_by_category(view)
    assert totals["gpu_side"] == pytest.approx(sum(totals.values()))      # every gap: queued work
    replay = [g for g in idle_groups(view) if "hipGraphLaunch" in g["callpath"]]
    assert replay and replay[0]["gaps"] >= 400 and replay[0]["category"] == "gpu_side"
    assert not [f for f in findings_from_profile(view.trace.path) if f["part"] == "in_flight_idle"]


@pytest.mark.parametrize("relative", ["tracelens/h100_bert-small-uncased.json.gz",
                                      "kineto/resnet50_v100_num_workers_0.pt.trace.json.gz",
                                      "tracelens/h100_owlv2-large-patch14-ensemble.json.gz"])
def test_real_traces_classes_add_up_to_the_breakdowns_idle(relative):
    view = view_of(str(TRACES / relative))
    idle = sum(float(view.windows[d][1] - view.windows[d][0]) - float((view.busy[d][1] - view.busy[d][0]).sum())
               for d in view.devices)
    assert sum(idle_by_category(view).values()) == pytest.approx(idle, rel=1e-9)


def test_a_sync_whose_caller_returned_leaves_the_rest_of_the_gap_to_what_the_host_did():
    """owlv2's blocking device-to-host copy (``_ensure_tensor_on_device``) returns ~14 us into each of
    four ~123 ms gaps; the host then loads and resizes the next image in the DataLoader. The whole
    gaps were sync drain (499 ms, and a sync_waste finding telling to drop the sync) with input wait
    0, beside an input_bound finding of the same 491 ms. profile16's NVTX range ``wait`` ends 73 us
    into a 170 ms gap that ``init_data`` (host allocations) fills."""
    owl = idle_by_category(view_of(str(TRACES / "tracelens" / "h100_owlv2-large-patch14-ensemble.json.gz")))
    assert owl["input_wait"] > 490_000 and owl["sync_drain"] < 3_000
    document, _ = analyse([TRACES / "nsys-extrap" / "profile16.sqlite"], Decimal("2.00"))
    nsys = document["idle_paths"][0]["by_category_us"]
    assert nsys["sync_drain"] < 200 and nsys["host_compute"] > 238_000


def test_an_nsight_sync_with_no_caller_frame_drains_until_the_next_launch_call():
    """ex-gpu.s10 (Nsight, no Python stacks or NVTX): each cudaDeviceSynchronize drains the GPU until
    the next cudaLaunchKernel starts; the last launch then stalls 2,969 us in its call (a first-launch
    stall), which is launch-bound. With no caller frame the syncs took their whole gaps: sync drain
    3,024.787 us (a sync_waste finding of 3.029 ms, 98.16 % of GPU time), launch-bound 26.656 us."""
    document, _ = analyse([TRACES / "nsys-extrap" / "ex-gpu.s10.sqlite"], Decimal("2"))
    totals = document["idle_paths"][0]["by_category_us"]
    assert (totals["sync_drain"], totals["launch_bound"]) == (31.297, 3020.146)
    assert sum(totals.values()) == pytest.approx(3051.443, abs=1e-6)
    found = {f["id"]: f for f in document["findings"]}
    assert (found["sync_waste"]["gpu_ms"], found["sync_waste"]["evidence"]["drained_idle_us"]) == ("0.035", 31.297)
    assert (found["launch_bound"]["gpu_ms"], found["launch_bound"]["cost"]) == ("3.020", "1.9576")


def test_resnet_without_workers_waits_for_input_bert_is_launch_bound():
    resnet = idle_by_category(view_of(str(TRACES / "kineto" / "resnet50_v100_num_workers_0.pt.trace.json.gz")))
    assert max(resnet, key=resnet.get) == "input_wait"
    bert = idle_by_category(view_of(str(TRACES / "tracelens" / "h100_bert-small-uncased.json.gz")))
    assert max(bert, key=bert.get) == "launch_bound" and bert["launch_bound"] + bert["host_compute"] > 0.85 * sum(bert.values())


IDLE_TABLE = "| trace | idle ms | sync drain | host compute | launch-bound | input wait | copy-bound | GPU-side | untraced |"
IDLE_ORDER = ("sync_drain", "host_compute", "launch_bound", "input_wait", "copy_bound", "gpu_side", "untraced")


def idle_row(relative: str) -> str:
    """The row of docs/trace.md's idle-class table for one shared trace, from its idle by class."""
    found = idle_by_category(view_of(str(TRACES / relative)))
    total = sum(found.values())
    ms = total / 1000
    label = relative.replace(".pt.trace.json.gz", "").replace(".json.gz", "")
    shares = " | ".join(f"{100 * found[k] / total:.1f}" for k in IDLE_ORDER)
    return f"| `{label}` | {f'{ms:,.1f}' if ms >= 1 else f'{ms:.2f}'} | {shares} |"


def test_the_documented_idle_classes_are_the_traces_own():
    """docs/trace.md's "idle ms; shares of it" table: every row has the header's 9 cells (before: the
    HTA-comparison rows, 11 cells of window and idle %, stood under it) and the small traces' rows
    are what the analysis gives."""
    lines = (ROOT / "docs" / "trace.md").read_text().splitlines()
    start = lines.index(IDLE_TABLE) + 2
    rows = lines[start:start + next(i for i, line in enumerate(lines[start:]) if not line.startswith("|"))]
    assert len(rows) == 15 and all(row.count("|") == IDLE_TABLE.count("|") for row in rows)
    for relative in ("tracelens/h100_bert-small-uncased.json.gz", "tracelens/h100_qwen1.5-0.5b-chat.json.gz",
                     "tracelens/mi300x_vllm_decode_cudagraph_graph_execution.json.gz"):
        assert idle_row(relative) in rows


# ---------------------------------------------------------------- the remove-sync-points model

def test_sync_points_model_prices_the_costed_sync_and_host_idle():
    from audit.pricing.sync_points import NO_PART, NO_PROFILE, ServiceIdle, sync_points

    chat = ServiceIdle("chat", "p", Decimal("0.2"), Decimal("0.05"), Decimal("0.5"), Decimal("1000"))
    embed = ServiceIdle("embed", "q", Decimal("0.1"), Decimal("0"), Decimal("0.25"), Decimal("200"))
    found = sync_points([chat, embed])          # shares of the idle: chat 0.4 + 0.1, embed 0.4 + 0
    assert found.saving == {"low": Decimal("480"), "expected": Decimal("580"), "high": Decimal("580")}
    assert ("sync-drain idle share of the profile's GPU time (chat)", "0.200000",
            "kernel profile p (audit/trace/idle.py)") in found.inputs
    assert ("sync-drain share of the profile's idle, used for cost (chat)", "0.400000",
            "kernel profile p (audit/trace/idle.py)") in found.inputs
    assert sync_points([]) == NO_PROFILE
    assert sync_points([ServiceIdle("chat", "p", Decimal("0.2"), Decimal("0"), Decimal("0.5"), None)]) == NO_PART


def test_sync_points_model_reads_the_generated_trace(planted):
    from audit.ledger import Ledger
    from audit.normalised import ProfileSummary
    from audit.pricing.sync_points import service_idle, sync_points

    path, truth = planted
    ledger = Ledger()
    ledger.add("serving_path", "in_flight_idle", "chat", Decimal("500"), "test", "S")
    profile = ProfileSummary("gen", "chat", str(path), None, "gpu_window", Decimal(0), Decimal(0), None, None, None,
                             {}, None, None)
    (idle,) = service_idle({"chat": profile}, ledger)
    want = Decimal(truth["planted"]["sync_drain"]["idle_us"]) / Decimal(truth["window_us"])
    assert abs(idle.sync_share - want) <= Decimal("0.03") * want
    found = sync_points([idle])
    assert found.saving["low"] == Decimal("500") * idle.of_part(idle.sync_share)
    assert found.saving["expected"] == Decimal("500") * (idle.of_part(idle.sync_share) + idle.of_part(idle.host_share))


QWEN = TRACES / "tracelens" / "h100_qwen1.5-0.5b-chat.json.gz"


def test_idle_is_costed_as_a_share_of_the_idle_part_o10803():
    """o10803 (cloudgen AKS seed 10803, window 1 day): chat's S = serving_path.in_flight_idle = 127.63
    over the window, its profile the qwen1.5-0.5b-chat trace. By hand, from idle_by_category:
    GPU time 49,652.832 us, idle 4,005.532 us (0.080671 of it): sync drain 28.528, host compute
    335.072, launch-bound 1,181.709, GPU-side 1,732.580, untraced 727.643 us.
    A path's cost = its idle ÷ the profile's idle × cost(S): untraced 727.643 / 4,005.532 = 0.181660
    × 127.63 = 23.18 (before: its share of the whole GPU time, 0.014655 × 127.63 = 1.87); the ten
    listed paths 81.57 + every other path (1,445.689 us, 0.360923) 46.06 = 127.63, all of S (before:
    the ten cost 6.58 in all). The cudaDeviceSynchronize finding: 20.801 / 4,005.532 = 0.005193
    × 127.63 = 0.66 (before 0.05). Remove sync points over the window: (28.528 + 335.072) /
    4,005.532 = 0.090774 × 127.63 = 11.5855, a month (× 30.4375 / 1 day) 352.63 (before 28.45);
    low (sync drain alone) 28.528 / 4,005.532 = 0.007122 × 127.63 = 0.9090, a month 27.67 (before 2.23)."""
    from audit.audit_json_profiles import idle_paths as _idle_paths
    from audit.evidence import _costed, _costed_idle
    from audit.ledger import Ledger
    from audit.money import cents
    from audit.normalised import ProfileSummary
    from audit.pricing.sync_points import service_idle, sync_points
    from audit.trace.analyse import kernel_evidence

    part = Decimal("127.63")
    trace = read_trace(str(QWEN))
    _, found, idle = kernel_evidence([trace])
    amounts = {("serving_path", "in_flight_idle", "chat"): part}
    rows = _idle_paths(_costed_idle(idle, "chat", amounts), part)
    assert (rows[0]["category"], rows[0]["share"], rows[0]["share_of_part"], rows[0]["cost"]) == \
        ("untraced", "0.014655", "0.181660", "23.18")
    assert [r["cost"] for r in rows] == ["23.18", "8.61", "8.38", "7.74", "7.68", "6.88", "5.57", "4.64", "4.47",
                                         "4.42", "46.06"]
    assert (rows[-1]["category"], rows[-1]["idle_us"], rows[-1]["share_of_part"]) == ("other", 1445.689, "0.360923")
    assert sum(Decimal(r["cost"]) for r in rows) == part
    sync = next(f for f in found if f["kernel"] == "cudaDeviceSynchronize")
    assert (sync["share"], sync["share_of_part"], cents(_costed(sync, "chat", "p", amounts).cost)) == \
        ("0.000419", "0.005193", Decimal("0.66"))
    ledger = Ledger()
    ledger.add("serving_path", "in_flight_idle", "chat", part, "test", "S")
    profile = ProfileSummary("chat-profile", "chat", str(QWEN), trace, "gpu_window", Decimal(0), Decimal(0), None,
                             None, None, {}, None, None)
    (service,) = service_idle({"chat": profile}, ledger)
    saving = sync_points([service]).saving
    assert {k: cents(v) for k, v in saving.items()} == {"low": Decimal("0.91"), "expected": Decimal("11.59"),
                                                          "high": Decimal("11.59")}
    month = Decimal("30.4375")
    assert (cents(saving["low"] * month), cents(saving["expected"] * month)) == (Decimal("27.67"), Decimal("352.63"))
