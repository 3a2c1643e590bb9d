"""Traffic for the collector: arrival schedules (open loop), a replayed JSONL file, request records.

Open-loop schedules fix each request's *scheduled* send time before the run starts, from a seeded
RNG, so latency can be measured from the schedule rather than from the moment a request was actually
sent (no coordinated omission). Closed-loop runs have no schedule: a request is scheduled the moment
its worker becomes free. A schedule, sweep list or traffic file that cannot be used is a
``UsageError`` (schemas/errors.py).
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from schemas.errors import UsageError

ARRIVALS = ("poisson", "gamma", "closed", "replay", "trace")


@dataclass(frozen=True)
class Arrival:
    """How requests arrive: the process, its rate, shape (gamma), seed and request count."""

    process: str = "poisson"
    rate: float = 10.0            # requests per second (open loop)
    shape: float = 1.0            # gamma shape k (k = 1 is Poisson; k < 1 burstier)
    seed: int = 0
    requests: int = 100
    concurrency: int = 1          # closed loop: requests in flight; open loop: worker cap

    def describe(self) -> dict:
        """The arrival process as written to profile.json."""
        out = {"process": self.process, "seed": self.seed, "requests": self.requests,
               "concurrency": self.concurrency}
        if self.process in ("poisson", "gamma"):
            out["rate_per_s"] = self.rate
        if self.process == "gamma":
            out["shape"] = self.shape
        return out


@dataclass
class Request:
    """One request: its payload, scheduled offset (s) and, once done, what was measured."""

    index: int
    payload: Any
    offset: float | None = None   # scheduled send time after the run start (None: closed loop)
    batch_size: int = 1
    scheduled: float = 0.0        # perf_counter of the scheduled send
    sent: float = 0.0             # perf_counter of the actual send
    done: float = 0.0             # perf_counter of the completion
    ok: bool = False
    error: str | None = None
    ttft: float | None = None     # seconds from the schedule to the first token (streaming)
    itl: list[float] = field(default_factory=list)   # inter-token gaps in seconds
    prompt_tokens: int | None = None
    generated_tokens: int | None = None
    pre_s: float | None = None    # host pre-processing time (None: not measured, e.g. HTTP)
    post_s: float | None = None   # host post-processing time (None: not measured)
    copy_s: float | None = None   # host↔device copy time (None: unmeasured)
    stated_prompt_tokens: int | None = None      # trace replay: the row's counts
    stated_generated_tokens: int | None = None

    @property
    def latency(self) -> float:
        """Seconds from the scheduled send to completion."""
        return self.done - self.scheduled


def offsets(arrival: Arrival) -> np.ndarray:
    """Scheduled send offsets (s) of an open-loop run, from the seeded RNG."""
    rng = np.random.default_rng(arrival.seed)
    n = arrival.requests
    if arrival.process == "poisson":
        gaps = rng.exponential(1.0 / arrival.rate, n)
    elif arrival.process == "gamma":
        gaps = rng.gamma(arrival.shape, 1.0 / (arrival.rate * arrival.shape), n)
    else:
        raise UsageError(f"arrival {arrival.process!r} has no schedule; expected poisson or gamma")
    gaps[0] = 0.0
    return np.cumsum(gaps)


def read_traffic(path: Path) -> list[tuple[float, Any]]:
    """A JSONL traffic file: one request a line, ``{"t": offset seconds, "payload": {...}}``."""
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise UsageError(f"--traffic {path}: {exc.strerror or exc}") from None
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            out.append((float(row["t"]), row["payload"]))
        except (ValueError, KeyError, TypeError) as exc:
            raise UsageError(f"{path}:{number}: expected {{\"t\": seconds, \"payload\": ...}}: {exc}") from None
    out.sort(key=lambda item: item[0])
    return out


def plan(arrival: Arrival, payloads: list[Any], batch_size: int = 1,
         traffic: list[tuple[float, Any]] | None = None) -> list[Request]:
    """The requests of one run: payloads cycled, offsets from the schedule or the traffic file."""
    if traffic is not None:
        return [Request(i, p, t, batch_size) for i, (t, p) in enumerate(traffic)]
    if not payloads:
        raise UsageError("no payloads to send")
    times = offsets(arrival) if arrival.process in ("poisson", "gamma") else [None] * arrival.requests
    return [Request(i, payloads[i % len(payloads)], None if t is None else float(t), batch_size)
            for i, t in enumerate(times)]


def parse_list(text: str | None, default: list[int]) -> list[int]:
    """'1,2,4' → [1, 2, 4] (a sweep option)."""
    if not text:
        return default
    try:
        values = [int(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 1:
        raise UsageError(f"{text!r}: expected whole numbers ≥ 1, comma-separated")
    return values
