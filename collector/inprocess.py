"""The in-process target: a Python callable ``module:function`` taking a batch of inputs.

Per request: ``pre(batch)`` (host, timed) → the inputs copied to ``device`` (timed on CUDA, with
synchronisation) → ``function(inputs)`` → outputs copied back to the host (timed) → ``post(outputs)``
(host, timed). Without CUDA the copy time is recorded as "unmeasured: no CUDA device".
torch is imported only when a run names a device or opens a profiler window. A ``module:function``
that does not import, and torch missing when it is needed, are ``UsageError``s (schemas/errors.py).
"""
from __future__ import annotations

import importlib
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from collector.traffic import Request
from schemas.errors import UsageError

ANNOTATION = "costaudit.request"


def load(spec: str | None) -> Callable | None:
    """Import ``module:function`` (None passes through); UsageError when it names nothing there."""
    if not spec:
        return None
    module_name, _, name = spec.partition(":")
    if not name:
        raise UsageError(f"{spec!r}: expected module:function")
    try:
        return getattr(importlib.import_module(module_name), name)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"{spec!r}: {exc}") from None


@dataclass
class CallableTarget:
    """The callable, its hooks and the device its inputs are copied to."""

    function: Callable
    pre: Callable | None = None
    post: Callable | None = None
    device: str | None = None

    @property
    def cuda(self) -> bool:
        """Whether inputs go to a CUDA device (and copies are timed)."""
        return bool(self.device) and self.device.startswith("cuda")


def sender(target: CallableTarget):
    """A ``send(request)`` function for the dispatcher: the request payload is the batch."""
    torch = _torch() if target.cuda else None

    def send(request: Request) -> None:
        t0 = time.perf_counter()
        inputs = target.pre(request.payload) if target.pre else request.payload
        t1 = time.perf_counter()
        copy = 0.0
        if torch is not None:
            inputs, spent = timed_copy(torch, inputs, target.device)
            copy += spent
        outputs = target.function(inputs)
        if torch is not None:
            outputs, spent = timed_copy(torch, outputs, "cpu")
            copy += spent
        t2 = time.perf_counter()
        if target.post:
            target.post(outputs)
        t3 = time.perf_counter()
        request.pre_s, request.post_s = t1 - t0, t3 - t2
        request.copy_s = copy if torch is not None else None
    return send


def timed_copy(torch, value: Any, device: str) -> tuple[Any, float]:
    """``value`` (tensors inside lists, tuples, dicts) moved to ``device``; seconds spent, synchronised."""
    torch.cuda.synchronize()
    start = time.perf_counter()
    moved = _move(value, device, torch)
    torch.cuda.synchronize()
    return moved, time.perf_counter() - start


def _move(value, device, torch):
    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_move(v, device, torch) for v in value)
    if isinstance(value, dict):
        return {k: _move(v, device, torch) for k, v in value.items()}
    return value


def _torch():
    try:
        import torch
    except ImportError as exc:
        raise UsageError(f"a device or a profiler window needs torch: pip install 'costaudit[profile]', "
                         f"or --window off without --device ({exc})") from None
    return torch


@dataclass(frozen=True)
class Window:
    """A torch.profiler schedule: steps skipped, warmed up, then recorded (one request a step)."""

    wait: int = 1
    warmup: int = 2
    active: int = 5

    @property
    def steps(self) -> int:
        """Requests run inside the window."""
        return self.wait + self.warmup + self.active


def profile_window(send: Callable[[Request], None], requests: list[Request], trace: Path,
                   window: Window, cuda: bool) -> list[Request]:
    """Run ``window.steps`` requests one after another under torch.profiler; export the trace.

    Each request is wrapped in a ``costaudit.request#i`` annotation so that the trace's gap ratio is
    measured over request spans. Returns the requests of the active (recorded) steps.
    """
    torch = _torch()
    from torch.profiler import ProfilerActivity, profile, record_function, schedule

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    trace.parent.mkdir(parents=True, exist_ok=True)

    def export(prof) -> None:
        prof.export_chrome_trace(str(trace))

    recorded = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with profile(activities=activities, record_shapes=True, with_stack=True,
                     schedule=schedule(wait=window.wait, warmup=window.warmup, active=window.active,
                                       repeat=1), on_trace_ready=export) as prof:
            for step, request in enumerate(requests[:window.steps]):
                request.scheduled = request.sent = time.perf_counter()
                with record_function(f"{ANNOTATION}#{request.index}"):
                    _attempt(send, request)
                    if cuda:
                        torch.cuda.synchronize()
                if step >= window.wait + window.warmup:
                    recorded.append(request)
                prof.step()
    return recorded


def _attempt(send, request: Request) -> None:
    from collector.drive import attempt
    attempt(send, request)
