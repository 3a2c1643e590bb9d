"""Worker processes, or a Dask cluster, that analyse the ranks of a trace set one at a time.

Used by `costaudit trace --workers / --scheduler` (audit/trace/fanout.py) and by the profiles
connectors reading a folder of rank traces in `costaudit run --workers / --scheduler`
(connectors/profiles/rankset.py). A task is a module-level function of picklable arguments that
returns a small dict (never a trace): :func:`guarded` adds its worker's figures (pid, host, peak
resident memory ``VmHWM``, seconds) and turns an error of ours into (kind, text), which pickles;
:func:`collect` raises the first error in the order of the files. A worker that dies (killed for
memory) is one error naming the file it was analysing.

Where a run asks for workers without naming them per call (``costaudit run --workers``), the
setting travels in :data:`FANOUT`, a context variable (the source-reading threads copy the
caller's context): :func:`fanout_settings` sets it, :func:`runner_for` opens the runner it names.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from connectors.errors import InputError, SourceError
from schemas.errors import CostauditError, UsageError

#: how long to wait for a Dask scheduler before saying it cannot be reached (seconds), unless the
#: environment's COSTAUDIT_SCHEDULER_TIMEOUT_S says otherwise
CONNECT_TIMEOUT_S = 10.0
EXPECTED_SCHEDULER = "a running Dask scheduler at tcp://host:port (dask-scheduler, or a LocalCluster's address)"
DIED = "the worker analysing it stopped before it finished ({why})"
EXPECTED_DIED = "more memory per worker (a worker holds one rank at a time), or fewer workers per machine"

Runner = Callable[[Callable, list[tuple]], list[dict]]


class RankError(InputError):
    """An error one rank raised in a worker: a bad input, as the single-process path raises it
    (its text, which names the file)."""

    def __init__(self, text: str):
        self.text = text
        super().__init__("", text)

    def __str__(self) -> str:
        return self.text


def worker_count(text: str, ranks: int) -> int:
    """``--workers``: a positive whole number, or ``auto`` (as many as ranks, at most the CPUs)."""
    if text.strip().lower() == "auto":
        return max(1, min(ranks, os.cpu_count() or 1))
    try:
        count = int(text)
    except ValueError:
        count = 0
    if count < 1:
        raise UsageError(f"--workers {text!r} is not a number of worker processes (a whole number ≥ 1, or auto)")
    return count


def collect(results: list[dict]) -> list[dict]:
    """The tasks' results in the order of the files; the first error (in that order) raised."""
    for result in results:
        if "error" in result:
            slug, text = result["error"]
            raise (UsageError(text) if slug == "usage" else RankError(text))
    return results


def guarded(path: str, work: Callable[[], dict]) -> dict:
    """``work()`` with its worker's figures; an error of ours as (kind, text), which pickles (an
    InputError's constructor takes more than its message)."""
    began = time.perf_counter()
    try:
        out = work()
    except MemoryError:
        return {"error": ("input", str(InputError(path, "not enough memory to analyse the trace (it needs about "
                                                        "30 bytes per event)", expected=EXPECTED_DIED)))}
    except CostauditError as exc:
        return {"error": (exc.slug, str(exc))}
    out["worker"] = {"pid": os.getpid(), "host": os.uname().nodename, "vmhwm_kib": peak_rss_kib(),
                     "seconds": time.perf_counter() - began}
    return out


def peak_rss_kib() -> int:
    """This process's peak resident memory (``VmHWM``, KiB); 0 where /proc has no such line."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


# ---------------------------------------------------------------- runners

def in_order(futures: list, args: list[tuple], result: Callable[[Any], dict], died: tuple[type[BaseException], ...],
              cancel: Callable[[list], Any]) -> list[dict]:
    """The futures' results in order, up to the first error (the later ones cancelled); a dead
    worker (``died``) is one error naming the file whose result it owed."""
    out: list[dict] = []
    try:
        for a, future in zip(args, futures):
            try:
                out.append(result(future))
            except died as exc:
                raise InputError(a[0], DIED.format(why=str(exc) or type(exc).__name__), expected=EXPECTED_DIED) from None
            if "error" in out[-1]:
                break
    finally:
        cancel(futures[len(out):])
    return out


@contextmanager
def pool(workers: int) -> Iterator[Runner]:
    """A runner on ``workers`` spawned processes, each taking one rank at a time."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        def run(task: Callable, args: list[tuple]) -> list[dict]:
            return in_order([pool.submit(task, *a) for a in args], args, lambda f: f.result(), (BrokenProcessPool,),
                             lambda rest: [f.cancel() for f in rest])
        yield run


@contextmanager
def dask(address: str) -> Iterator[Runner]:
    """A runner on the Dask cluster whose scheduler is at ``address``."""
    try:
        from distributed import Client, KilledWorker
    except ImportError:
        raise UsageError("--scheduler needs dask.distributed: pip install 'costaudit[dask]'") from None
    try:
        timeout = float(os.environ.get("COSTAUDIT_SCHEDULER_TIMEOUT_S") or CONNECT_TIMEOUT_S)
    except ValueError:
        raise UsageError("COSTAUDIT_SCHEDULER_TIMEOUT_S is not a number of seconds") from None
    _reachable(address, timeout)
    client = Client.__new__(Client)      # held, so that a failed one can be let go quietly
    try:
        client.__init__(address, timeout=timeout, set_as_default=False)  # type: ignore[misc]
    except Exception as exc:             # anything but a scheduler answered (or nothing did)
        _let_go(client)
        raise SourceError(f"cannot reach the Dask scheduler at {address} ({type(exc).__name__}: {exc}); "
                          f"expected {EXPECTED_SCHEDULER}") from None
    try:
        def run(task: Callable, args: list[tuple]) -> list[dict]:
            return in_order([client.submit(task, *a, pure=False) for a in args], args, lambda f: f.result(),
                             (KilledWorker,), lambda rest: client.cancel(rest) if rest else None)
        yield run
    finally:
        client.close()


def _reachable(address: str, timeout: float) -> None:
    """Raise the one error naming ``address`` when it is no scheduler address, or (tcp://) nothing
    accepts a connection there within ``timeout``: checked before a ``Client`` is made, since a
    Client that fails to connect prints a traceback when it is collected at exit."""
    import socket

    from distributed.comm.addressing import get_address_host_port, parse_address

    try:
        scheme = parse_address(address)[0]
        host, port = get_address_host_port(address)
    except ValueError as exc:
        raise SourceError(f"cannot reach the Dask scheduler at {address} ({exc}); expected {EXPECTED_SCHEDULER}") from None
    if scheme != "tcp":
        return
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise SourceError(f"cannot reach the Dask scheduler at {address} ({exc.strerror or exc} within "
                          f"{timeout:g} s); expected {EXPECTED_SCHEDULER}") from None


def _let_go(client: Any) -> None:
    """Stop a Client whose connection failed, so that collecting it at exit neither waits twice
    the timeout nor prints a traceback (distributed 2026.8's ``Client.__del__`` closes a client
    whose loop was set: the loop is stopped here and unset)."""
    from contextlib import suppress

    with suppress(Exception):
        client._loop_runner.stop()
    with suppress(Exception):
        client._Client__loop = None


@contextmanager
def runner(workers: int, scheduler: str | None) -> Iterator[Runner]:
    """The Dask cluster's runner at ``scheduler``, else one on ``workers`` spawned processes."""
    with (dask(scheduler) if scheduler else pool(workers)) as run:
        yield run


def in_process(task: Callable, args: list[tuple]) -> list[dict]:
    """A runner in this process, one task after the other (stopping at the first error), as the
    workers' runners give their results: the single-process path of the same tasks."""
    out: list[dict] = []
    for a in args:
        out.append(task(*a))
        if "error" in out[-1]:
            break
    return out


#: (workers, scheduler) for rank sets read without their own setting: workers a whole number ≥ 1,
#: or 0 for ``auto`` (as many as ranks, at most the CPUs); 1 and no scheduler: in this process
FANOUT: ContextVar[tuple[int, str | None]] = ContextVar("costaudit_fanout", default=(1, None))


@contextmanager
def fanout_settings(workers: str, scheduler: str | None) -> Iterator[None]:
    """Within it, rank sets are read on ``workers`` processes (``--workers``: a whole number ≥ 1 or
    ``auto``) or on the Dask cluster at ``scheduler``; the two exclude each other."""
    if scheduler is not None and workers.strip() != "1":
        raise UsageError("--workers and --scheduler exclude each other (a Dask cluster has its own workers)")
    count = 0 if workers.strip().lower() == "auto" else worker_count(workers, 1)
    token = FANOUT.set((count, scheduler))
    try:
        yield
    finally:
        FANOUT.reset(token)


@contextmanager
def runner_for(ranks: int) -> Iterator[tuple[Runner, str]]:
    """The runner :data:`FANOUT` names for a set of ``ranks``, and words for it ("2 worker
    processes", "the Dask cluster at …", "this process")."""
    workers, scheduler = FANOUT.get()
    if scheduler:
        with dask(scheduler) as run:
            yield run, f"the Dask cluster at {scheduler}"
        return
    count = max(1, min(ranks, os.cpu_count() or 1)) if workers == 0 else workers
    if count <= 1 or ranks <= 1:
        yield in_process, "this process"
        return
    with pool(count) as run:
        yield run, f"{count} worker processes"
