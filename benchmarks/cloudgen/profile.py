"""The kernel profile of the chat service: a copy of a public trace, and its gap ratio g (METHOD §3).

The trace is the TraceLens Qwen1.5-0.5B-Chat H100 trace (MIT; sanitised copy kept in the project's
demo fixture and in the shared data): one batch of 16 requests x 2048 prompt tokens, no request
markers. METHOD §3: without request markers g is taken over the trace's profiler steps where it has
them, else over its GPU window: g = (window - kernel-active) / kernel-active, with kernel-active the
union of kernel intervals inside the window (copies and memsets do not count).

This trace has one profiler step (``ProfilerStep#6``, on the host and as its GPU annotation). The
step's window is the union of its GPU annotation and its host span extended to the end of the GPU
work launched inside it (matched by correlation id): the work of the step, wherever the GPU ran it.
A few kernels lie before the step (0.6 % of the kernel time) and are left out, as METHOD's
"work outside the served traffic must not move g" asks. The GPU window (first start to last end of
kernels, copies and memsets) is kept for the record.
"""
from __future__ import annotations

import gzip
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

NAME = "h100_qwen1.5-0.5b-chat.json.gz"
SHA256 = "f0c9c4087f6f12639729661bb76679b768c1bfd5b0681be011dc999a08fc4c2a"
REQUESTS = 16
PROMPT_TOKENS = 32768
GENERATED_TOKENS = 16
ROOT = Path(__file__).resolve().parents[2]
CANDIDATES = (ROOT / "fixtures" / "demo" / "profiles" / NAME,
              ROOT.parent / "shared" / "data" / "traces" / "tracelens" / NAME)


STEP_PREFIX = "ProfilerStep#"
GPU_WORK = ("kernel", "gpu_memcpy", "gpu_memset")


@dataclass(frozen=True)
class Profile:
    path: Path
    kernels: int
    kernel_active_us: float
    window_us: float
    gpu_window_us: float
    basis: str  # "profiler_steps" or "gpu_window"

    @property
    def gap_ratio(self) -> float:
        return (self.window_us - self.kernel_active_us) / self.kernel_active_us

    @property
    def kernel_seconds_per_request(self) -> float:
        return self.kernel_active_us / 1e6 / REQUESTS


def find_trace(explicit: Path | None = None) -> Path:
    for path in ([explicit] if explicit else list(CANDIDATES)):
        if path and path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == SHA256:
            return path
    raise SystemExit(f"trace {NAME} (sha256 {SHA256[:16]}…) not found; give it with --trace")


def merged(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The union of intervals as disjoint, ordered intervals."""
    out: list[tuple[float, float]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def union_length(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of intervals."""
    return sum(e - s for s, e in merged(intervals))


def clipped_union(intervals: list[tuple[float, float]], window: list[tuple[float, float]]) -> float:
    """The length of the union of ``intervals`` inside the disjoint intervals ``window``."""
    pieces = [(max(s, a), min(e, b)) for s, e in intervals for a, b in window]
    return union_length([(s, e) for s, e in pieces if e > s])


def step_window(events: list[dict]) -> list[tuple[float, float]]:
    """METHOD §3's profiler-step window: every step's GPU annotation, and every host step extended to
    the end of the GPU work launched inside it (by correlation id). Empty without steps."""
    def span(e):
        return float(e["ts"]), float(e["ts"]) + float(e["dur"])

    steps = [e for e in events if e.get("ph") == "X" and str(e.get("name", "")).startswith(STEP_PREFIX)]
    host = [span(e) for e in steps if e.get("cat") == "user_annotation"]
    out = [span(e) for e in steps if e.get("cat") == "gpu_user_annotation"]
    launches = {e["args"]["correlation"]: float(e["ts"]) for e in events
                if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver")
                and "correlation" in (e.get("args") or {})}
    work_ends = [(launches[e["args"]["correlation"]], span(e)[1]) for e in events
                 if e.get("ph") == "X" and e.get("cat") in GPU_WORK
                 and (e.get("args") or {}).get("correlation") in launches]
    for s, e in host:
        ends = [end for launched, end in work_ends if s <= launched < e]
        out.append((s, max([e, *ends])))
    return merged(out)


def read_profile(path: Path) -> Profile:
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    spans = [(e.get("cat"), float(e["ts"]), float(e["ts"]) + float(e["dur"]))
             for e in events if e.get("ph") == "X" and e.get("cat") in GPU_WORK]
    kernels = [(s, e) for cat, s, e in spans if cat == "kernel"]
    gpu_window = (min(s for _, s, _ in spans), max(e for _, _, e in spans))
    steps = step_window(events)
    window, basis = (steps, "profiler_steps") if steps else ([gpu_window], "gpu_window")
    return Profile(path, len(kernels), clipped_union(kernels, window), sum(e - s for s, e in window),
                   gpu_window[1] - gpu_window[0], basis)
