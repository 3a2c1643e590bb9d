"""The kernel profile of the chat service: a copy of a public trace, and its gap ratio g (METHOD §3).

The trace is the TraceLens Qwen1.5-0.5B-Chat H100 trace (MIT; sanitised copy kept in the project's
demo fixture and in the shared data): one batch of 16 requests x 2048 prompt tokens, no request
markers and no profiler steps, so g is taken over its GPU window: (window - kernel-active) /
kernel-active, with kernel-active the union of kernel intervals and the window the first start to
the last end of kernels, copies and memsets.
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


@dataclass(frozen=True)
class Profile:
    path: Path
    kernels: int
    kernel_active_us: float
    gpu_window_us: float

    @property
    def gap_ratio(self) -> float:
        return (self.gpu_window_us - self.kernel_active_us) / self.kernel_active_us

    @property
    def kernel_seconds_per_request(self) -> float:
        return self.kernel_active_us / 1e6 / REQUESTS


def find_trace(explicit: Path | None = None) -> Path:
    for path in ([explicit] if explicit else list(CANDIDATES)):
        if path and path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == SHA256:
            return path
    raise SystemExit(f"trace {NAME} (sha256 {SHA256[:16]}…) not found; give it with --trace")


def union_length(intervals: list[tuple[float, float]]) -> float:
    if not intervals:
        return 0.0
    ordered = sorted(intervals)
    total = 0.0
    cur_s, cur_e = ordered[0]
    for s, e in ordered[1:]:
        if s > cur_e:
            total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    return total + cur_e - cur_s


def read_profile(path: Path) -> Profile:
    with gzip.open(path, "rt") as handle:
        events = json.load(handle)["traceEvents"]
    spans = [(e.get("cat"), float(e["ts"]), float(e["ts"]) + float(e["dur"]))
             for e in events if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    kernels = [(s, e) for cat, s, e in spans if cat == "kernel"]
    window = max(e for _, _, e in spans) - min(s for _, s, _ in spans)
    return Profile(path, len(kernels), union_length(kernels), window)
