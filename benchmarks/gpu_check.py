"""The CUDA paths of the collector, checked on a GPU machine (run by benchmarks/gpu_check.sh).

    python benchmarks/gpu_check.py OUT_FOLDER

Checks: CUDA is visible to torch; NVML samples utilisation, memory, power and clocks; host↔device
copy time is measured; the profiler window records CUDA kernels inside ``costaudit.request`` spans
and the Kineto and bundle readers measure over request spans with the window's traffic. Prints one
PASS / FAIL line per check and exits 1 if any failed.
"""
from __future__ import annotations

import sys
import time
import traceback
from pathlib import Path


def check_cuda() -> str:
    import torch
    assert torch.cuda.is_available(), "torch.cuda.is_available() is False"
    return f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}"


def check_nvml() -> str:
    import torch

    from collector.nvml import Sampler
    sampler = Sampler(interval=0.05).start()
    x = torch.randn(4096, 4096, device="cuda")
    end = time.time() + 1.5
    while time.time() < end:
        x = (x @ x).tanh_()
    torch.cuda.synchronize()
    sampler.stop()
    nvml = sampler.summary()["nvml"]
    assert nvml["measured"], nvml.get("reason")
    d = nvml["devices"][0]
    assert d["samples"] >= 5 and d["power_w"]["max"] > 0 and d["sm_clock_mhz"]["max"] > 0, d
    assert d["utilisation_pct"]["max"] > 0 and d["memory_used_bytes"]["max"] > 0, d
    return (f"{d['name']}: {d['samples']} samples, util max {d['utilisation_pct']['max']:.0f} %, "
            f"power max {d['power_w']['max']:.0f} W, SM clock max {d['sm_clock_mhz']['max']:.0f} MHz")


def check_collect(out: Path) -> str:
    from collector.inprocess import Window
    from collector.profile import CollectConfig, collect_bundle
    from collector.traffic import Arrival
    doc = collect_bundle(CollectConfig(
        out=out, function="collector.demo:mlp", pre="collector.demo:pre",
        post="collector.demo:post", device="cuda:0",
        arrival=Arrival("poisson", rate=200, seed=1, requests=200), concurrency=[1],
        batch_sizes=[1, 32], window=Window(1, 2, 5), progress=False))
    for point in doc["sweep"]:
        assert point["succeeded"] == 200, point["errors"]
        assert point["copy_ms"]["measured"] and point["copy_ms"]["p50"] > 0, point["copy_ms"]
    assert doc["sampling"]["nvml"]["measured"], doc["sampling"]["nvml"]
    assert doc["window"]["activities"] == ["CPU", "CUDA"] and doc["window"]["requests"] == 5
    p = doc["sweep"][1]
    return (f"b=32: p99 {p['latency_ms']['p99']:.2f} ms, {p['inferences_per_s']:.0f} inf/s, "
            f"copy p50 {p['copy_ms']['p50']:.3f} ms")


def check_trace(out: Path) -> str:
    from datetime import datetime, timezone

    from connectors.base import ReadContext, SourceSpec
    from connectors.profiles.bundle import ProfileBundleConnector
    from connectors.profiles.kineto import KinetoConnector
    t = datetime(2026, 1, 1, tzinfo=timezone.utc)
    ctx = ReadContext(t, t, "USD")
    frame = KinetoConnector(SourceSpec("p", "profiles", "kineto", out / "trace.json.gz"), ctx).read()
    row = frame.tables["profile"].iloc[0]
    assert row["gap_basis"] == "request_spans" and row["kernels"] > 0, row.to_dict()
    bundle = ProfileBundleConnector(SourceSpec("p", "profiles", "profile_bundle", out,
                                               {"service": "s"}), ctx).read()
    assert bundle.spec.options["requests"] == 5, bundle.spec.options
    return (f"{int(row['kernels'])} kernels, gap ratio {row['gap_ratio']:.2f} over request spans, "
            f"sync {row['sync_us']:.0f} us; bundle requests = 5")


def main(argv: list[str]) -> int:
    """Run every check; one PASS / FAIL line each."""
    out = Path(argv[0] if argv else "out/gpu_check")
    checks = [("cuda", check_cuda), ("nvml", check_nvml), ("collect", lambda: check_collect(out)),
              ("trace", lambda: check_trace(out))]
    failed = 0
    for name, fn in checks:
        start = time.perf_counter()
        try:
            detail = fn()
            print(f"PASS {name:<8} ({time.perf_counter() - start:.1f} s) {detail}", flush=True)
        except Exception as exc:
            failed += 1
            print(f"FAIL {name:<8} {type(exc).__name__}: {exc}", flush=True)
            traceback.print_exc(limit=3)
    print(f"SUMMARY gpu_check: {len(checks) - failed}/{len(checks)} passed", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
