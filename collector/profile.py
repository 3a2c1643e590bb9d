"""The collector (`costaudit collect`): drive traffic, measure it, write a profile bundle.

A bundle is a folder with ``profile.json`` (traffic served, latency percentiles from scheduled send
times, throughput, goodput, error rate, NVML summary or why it is unmeasured, environment, arrival
process and seed, one entry per sweep point) and, for an in-process callable, ``trace.json.gz`` (a
Kineto trace of a torch.profiler window with ``costaudit.request`` annotations). A case names the
bundle as a ``[[profiles]]`` source with ``format = "profile_bundle"`` (connectors/profiles/bundle.py).
The collector's own sampling runs outside the profiler window. A configuration it cannot run, an
output folder it cannot write and a traffic file it cannot read are ``UsageError``s
(schemas/errors.py).
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from collector import http_target as http
from collector import inprocess as incall
from collector.drive import drive
from collector.latency import LATE_TOLERANCE_S
from collector.nvml import Sampler
from collector.repeat import summarise
from collector.replay import TraceReplay
from collector.stats import run_figures, run_wall
from collector.traffic import Arrival, Request, plan, read_traffic
from schemas.errors import UsageError

BUNDLE_VERSION = 1
DEFAULT_PAYLOADS = {
    "completions": {"prompt": "Say hello.", "max_tokens": 16},
    "chat": {"messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 16},
    "json": {"input": "hello"},
    "callable": "hello",
}


@dataclass
class CollectConfig:
    """Everything one `costaudit collect` run needs."""

    out: Path
    url: str | None = None                 # HTTP target (base url or full endpoint)
    mode: str = "completions"              # completions | chat | json
    model: str | None = None
    function: str | None = None            # in-process target module:function
    pre: str | None = None
    post: str | None = None
    device: str | None = None              # e.g. cuda:0 for the callable's inputs
    arrival: Arrival = field(default_factory=Arrival)
    concurrency: list[int] = field(default_factory=lambda: [1])
    batch_sizes: list[int] = field(default_factory=lambda: [1])
    payloads: list[Any] = field(default_factory=list)
    traffic: Path | None = None            # JSONL replay (overrides the arrival schedule)
    trace: TraceReplay | None = None       # Azure LLM trace replay (overrides the arrival schedule)
    repeat: int = 1                        # runs per sweep point (a t-interval over them when ≥ 2)
    goodput: dict[str, float] = field(default_factory=dict)   # SLOs in ms: ttft / tpot / e2el
    late_tolerance: float = LATE_TOLERANCE_S
    cold_command: str | None = None        # shell command started for the cold-start measurement
    cold_timeout: float = 300.0
    window: incall.Window | None = field(default_factory=incall.Window)
    max_error_rate: float = 0.01
    slo_ms: float | None = None
    warmup: int = 3
    sample_interval: float = 0.1
    nvml: bool = True
    progress: bool = True
    timeout: float = 30.0


def collect_bundle(config: CollectConfig) -> dict:
    """Run the whole collection and write the bundle; returns profile.json's document."""
    if bool(config.url) == bool(config.function):
        raise UsageError("name exactly one target: an HTTP url or a module:function callable")
    if config.repeat < 1:
        raise UsageError(f"--repeat {config.repeat}: expected a whole number ≥ 1")
    if config.trace is not None and (config.traffic or config.function):
        raise UsageError("--trace replays at an HTTP target (--url) and replaces --traffic; give one of them")
    traffic = read_traffic(config.traffic) if config.traffic else None
    if config.trace is not None:
        traffic = trace_traffic(config.trace, config.mode)
    _writable(config.out)
    payloads = config.payloads or [DEFAULT_PAYLOADS["callable" if config.function else config.mode]]
    cold, server = cold_start(config, payloads[0])
    try:
        send, cuda = make_sender(config)
        _warm(send, payloads, config)
        sampler = Sampler(config.sample_interval, config.nvml).start()
        try:
            sweep = [sweep_point(config, send, payloads, traffic, c, b)
                     for b in config.batch_sizes for c in config.concurrency]
        finally:
            sampler.stop()
        window = run_window(config, send, payloads, cuda)
    finally:
        if server is not None:
            _stop(server)
    document = bundle_document(config, payloads, sweep, sampler.summary(), window, cold)
    (config.out / "profile.json").write_text(json.dumps(document, indent=2, default=str) + "\n")
    return document


def _writable(out: Path) -> None:
    """Create the bundle folder; UsageError naming it when that fails."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {out}: {exc.strerror or exc}") from None


def make_sender(config: CollectConfig):
    """(send function, whether copies and the profiler use CUDA)."""
    if config.url:
        target = http.HttpTarget(config.url, config.mode, config.model, config.timeout)
        return http.sender(target), False
    target = incall.CallableTarget(incall.load(config.function), incall.load(config.pre),
                                   incall.load(config.post), config.device)
    return incall.sender(target), target.cuda


def batches(payloads: list[Any], requests: int, size: int) -> list[list[Any]]:
    """``requests`` batches of ``size`` payloads each, cycling through the payloads."""
    n = len(payloads)
    return [[payloads[(i * size + j) % n] for j in range(size)] for i in range(requests)]


def trace_traffic(trace: TraceReplay, mode: str) -> list[tuple[float, Any]]:
    """(offset, payload builder) per trace row; the builder carries the stated token counts."""
    from collector.replay import payload
    payload(mode, 1, 1, trace.force, trace.prompt_form)        # the mode and forms are checked first
    return [(r.offset, _Stated(mode, r.prompt_tokens, r.generated_tokens, trace.force, trace.prompt_form))
            for r in trace.rows()]


@dataclass(frozen=True)
class _Stated:
    """A trace row's request body, built when it is sent (a full trace's prompts do not sit in memory)."""

    mode: str
    prompt_tokens: int
    generated_tokens: int
    force: str
    form: str

    def __call__(self) -> dict:
        from collector.replay import payload
        return payload(self.mode, self.prompt_tokens, self.generated_tokens, self.force, self.form)


def requests_for(config: CollectConfig, payloads, traffic, concurrency: int, size: int) -> list[Request]:
    """The planned requests of one sweep point (callable payloads become batches)."""
    arrival = Arrival(**{**config.arrival.__dict__, "concurrency": concurrency})
    if config.trace is not None:
        out = plan(arrival, payloads, 1, traffic)
        for r in out:
            r.stated_prompt_tokens, r.stated_generated_tokens = r.payload.prompt_tokens, r.payload.generated_tokens
        return out
    if config.function:
        if traffic is not None:
            traffic = [(t, [p] * size) for t, p in traffic]
        items = batches(payloads, arrival.requests, size)
        return plan(arrival, items, size, traffic)
    if size != 1:
        raise UsageError("an HTTP target takes batch size 1 (the server batches)")
    return plan(arrival, payloads, 1, traffic)


def sweep_point(config, send, payloads, traffic, concurrency: int, size: int) -> dict:
    """Drive one (concurrency, batch size) point ``repeat`` times and return its figures: with one
    run, that run's; with several, every request pooled (throughput over the summed run durations),
    each run's own figures under ``runs`` and a t-interval per figure under ``repeat``."""
    runs, pooled, walls = [], [], []
    for run in range(config.repeat):
        requests = requests_for(config, payloads, traffic, concurrency, size)
        label = f"c={concurrency} b={size}" + (f" run {run + 1}/{config.repeat}" if config.repeat > 1 else "")
        with _progress(config.progress, label, len(requests)) as tick:
            drive(requests, send, concurrency, tick)
        runs.append(_figures(config, requests))
        pooled += requests
        walls.append(run_wall(requests))
    point = {"concurrency": concurrency, "batch_size": size}
    if config.repeat == 1:
        return {**point, **runs[0]}
    return {**point, **_figures(config, pooled, sum(walls)), "repeat": summarise(runs), "runs": runs}


def _figures(config: CollectConfig, requests: list[Request], wall: float | None = None) -> dict:
    return run_figures(requests, config.max_error_rate, config.slo_ms, wall, config.goodput, config.late_tolerance)


def run_window(config: CollectConfig, send, payloads, cuda: bool) -> dict:
    """The torch.profiler window (in-process targets only) and the traffic it served."""
    if config.window is None:
        return {"measured": False, "reason": "unmeasured: profiler window switched off"}
    if config.url:
        return {"measured": False, "reason": "unmeasured: the model runs in another process "
                "(HTTP target); profile the server with torch.profiler and name its trace"}
    size = config.batch_sizes[0]
    requests = plan(Arrival("closed", requests=config.window.steps),
                    batches(payloads, config.window.steps, size), size)
    trace = config.out / "trace.json.gz"
    recorded = incall.profile_window(send, requests, trace, config.window, cuda)
    ok = [r for r in recorded if r.ok]
    return {"measured": True, "trace": trace.name, "requests": len(ok),
            "inferences": sum(r.batch_size for r in ok), "failed": len(recorded) - len(ok),
            "prompt_tokens": None, "generated_tokens": None, "batch_size": size,
            "schedule": {"wait": config.window.wait, "warmup": config.window.warmup,
                         "active": config.window.active},
            "activities": ["CPU", "CUDA"] if cuda else ["CPU"],
            "record_shapes": True, "with_stack": True}


def cold_start(config: CollectConfig, payload) -> tuple[dict, Any]:
    """Process start → first successful response, when a command is given; (figures, process)."""
    if not config.cold_command:
        return {"measured": False, "reason": "unmeasured: no cold-start command given"}, None
    if not config.url:
        return _cold_callable(config)
    target = http.HttpTarget(config.url, config.mode, config.model, timeout=5.0)
    start = time.perf_counter()
    proc = subprocess.Popen(config.cold_command, shell=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    while time.perf_counter() - start < config.cold_timeout:
        if http.probe(target, payload):
            return {"measured": True, "seconds": time.perf_counter() - start,
                    "command": config.cold_command}, proc
        if proc.poll() is not None:
            return {"measured": False, "reason": f"unmeasured: the command exited ({proc.returncode})"}, None
        time.sleep(0.05)
    _stop(proc)
    return {"measured": False, "reason": f"unmeasured: no success within {config.cold_timeout} s"}, None


def _cold_callable(config: CollectConfig) -> tuple[dict, None]:
    """A fresh interpreter that imports the callable and serves one batch; wall time of it all."""
    code = ("import sys,importlib;m,f=sys.argv[1].split(':');fn=getattr(importlib.import_module(m),f);"
            "p=sys.argv[2];pre=getattr(importlib.import_module(p.split(':')[0]),p.split(':')[1]) if p else None;"
            "b=['hello'];fn(pre(b) if pre else b)")
    start = time.perf_counter()
    try:
        done = subprocess.run(config.cold_command.split() + ["-c", code, config.function, config.pre or ""],
                              capture_output=True, timeout=config.cold_timeout, cwd=os.getcwd())
    except OSError as exc:
        raise UsageError(f"--cold-command {config.cold_command!r}: {exc.strerror or exc}") from None
    if done.returncode:
        return {"measured": False, "reason": "unmeasured: " + done.stderr.decode()[-200:]}, None
    return {"measured": True, "seconds": time.perf_counter() - start,
            "command": config.cold_command + " -c <import + first batch>"}, None


def _stop(proc) -> None:
    """End the process group the collector started."""
    import signal
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=10)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        proc.kill()


def _warm(send, payloads, config: CollectConfig) -> None:
    """A few unrecorded requests so the sweep measures a warm target."""
    size = config.batch_sizes[0] if config.function else 1
    items = batches(payloads, config.warmup, size) if config.function else payloads
    for i in range(config.warmup):
        r = Request(i, items[i % len(items)], batch_size=size)
        r.scheduled = time.perf_counter()
        from collector.drive import attempt
        attempt(send, r)


def bundle_document(config, payloads, sweep, sampling, window, cold) -> dict:
    """profile.json: the first sweep point on top, every point under ``sweep``."""
    first = sweep[0]
    head = {k: first.get(k) for k in ("requests", "succeeded", "error_rate", "latency_ms",
                                        "requests_per_s", "inferences_per_s", "goodput",
                                        "prompt_tokens", "generated_tokens", "ttft_ms", "itl_ms",
                                        "host_pre_ms", "host_post_ms", "host_reason", "copy_ms", "first_error",
                                        "late", "llm", "repeat")}
    if config.trace is not None:
        arrival = {**config.trace.describe(config.trace.rows(), config.mode), "concurrency": config.concurrency,
                   "batch_sizes": config.batch_sizes, "repeat": config.repeat}
    else:
        arrival = {**(config.arrival.describe() if not config.traffic else {"process": "replay"}),
                   "concurrency": config.concurrency, "batch_sizes": config.batch_sizes, "repeat": config.repeat}
    source = config.trace.path if config.trace is not None else config.traffic
    return {
        "costaudit_profile_bundle": BUNDLE_VERSION,
        "target": {"url": config.url, "mode": config.mode if config.url else "callable",
                   "function": config.function, "pre": config.pre, "post": config.post,
                   "device": config.device, "model": config.model},
        "arrival": arrival,
        "traffic_file": str(source) if source else None,
        "traffic_file_sha256": _sha(source),
        "payload_bytes": sum(len(json.dumps(p, default=str)) for p in payloads) / len(payloads),
        "max_error_rate": config.max_error_rate, "slo_ms": config.slo_ms, "goodput_slo_ms": config.goodput or None,
        **head, "window": window, "cold_start": cold, "sampling": sampling,
        "sweep": sweep, "environment": environment(),
    }


def _sha(path: Path | None) -> str | None:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if path else None


def environment() -> dict:
    """Interpreter, platform, CPU count and (if imported) torch and CUDA device."""
    env = {"python": platform.python_version(), "platform": platform.platform(),
           "cpus": os.cpu_count()}
    torch = sys.modules.get("torch")
    if torch is not None:
        env["torch"] = torch.__version__
        env["cuda"] = torch.cuda.get_device_name(0) if torch.cuda.is_available() else None
    return env


class _progress:
    """A rich progress bar over one sweep point (a no-op when switched off)."""

    def __init__(self, show: bool, label: str, total: int):
        self.show, self.label, self.total, self.bar = show, label, total, None

    def __enter__(self):
        if not self.show:
            return None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
        console = Console(stderr=True)
        if not console.is_terminal:
            return None
        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=console, transient=True)
        self.bar.start()
        task = self.bar.add_task(self.label, total=self.total)
        return lambda _request: self.bar.advance(task)

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
