"""Driving requests: an open-loop dispatcher (scheduled send times) or closed-loop workers.

Open loop: a dispatcher sleeps until each request's scheduled time, stamps that time on the request
and hands it to a worker pool; if every worker is busy the request waits, and the wait counts in
its latency (no coordinated omission). Closed loop: ``concurrency`` workers each send the next
request as soon as their previous one completes; the schedule is the moment of sending.
"""
from __future__ import annotations

import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

from collector.traffic import Request

Send = Callable[[Request], None]


def thread_setup() -> Callable[[], None]:
    """A function each worker thread runs first: it takes on the caller's torch intra-op threads.

    OpenMP keeps its thread count per thread, so a fresh worker would otherwise run torch with
    the default count and can be many times slower than the caller's thread (measured: 100×).
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return lambda: None
    count = torch.get_num_threads()
    return lambda: torch.set_num_threads(count)


def attempt(send: Send, request: Request) -> None:
    """Run ``send`` on one request; any exception marks it failed with its text."""
    if not request.sent:
        request.sent = time.perf_counter()
    try:
        send(request)
        request.ok = request.error is None
    except Exception as exc:          # a failed request is a measurement, not a crash
        request.ok, request.error = False, f"{type(exc).__name__}: {exc}"
    request.done = time.perf_counter()


def drive(requests: list[Request], send: Send, concurrency: int,
          on_done: Callable[[Request], None] | None = None) -> float:
    """Run every request (open loop when they carry offsets); returns the run's start time."""
    if requests and requests[0].offset is not None:
        return _open_loop(requests, send, concurrency, on_done)
    return _closed_loop(requests, send, concurrency, on_done)


def _open_loop(requests, send, workers, on_done) -> float:
    start = time.perf_counter()

    def job(r: Request) -> None:
        attempt(send, r)
        if on_done:
            on_done(r)

    with ThreadPoolExecutor(max_workers=max(workers, 1), thread_name_prefix="costaudit-send",
                            initializer=thread_setup()) as pool:
        for r in requests:
            r.scheduled = start + r.offset
            delay = r.scheduled - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            pool.submit(job, r)
    return start


def _closed_loop(requests, send, concurrency, on_done) -> float:
    start = time.perf_counter()
    lock = threading.Lock()
    queue = iter(requests)
    setup = thread_setup()

    def worker() -> None:
        setup()
        while True:
            with lock:
                r = next(queue, None)
            if r is None:
                return
            r.scheduled = r.sent = time.perf_counter()
            attempt(send, r)
            if on_done:
                on_done(r)

    threads = [threading.Thread(target=worker, name=f"costaudit-closed-{i}", daemon=True)
               for i in range(max(concurrency, 1))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return start
