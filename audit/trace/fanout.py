"""The ranks of a trace set analysed in worker processes, or on a Dask cluster (docs/trace.md).

`costaudit trace TRACES… --workers N` runs N worker processes (``concurrent.futures``, spawn
context); ``--scheduler tcp://host:port`` sends the ranks to a running Dask cluster
(``dask.distributed``, the optional extra ``costaudit[dask]``, imported only then). Either way a
worker reads one rank's trace at a time and sends back only what the document says of it
(:func:`audit.trace.analyse.rank_parts`: a few kilobytes and its folded stacks), never the trace,
so a worker holds one rank at a time whatever the number of ranks.

Two rounds: the first reads each rank for its header (distributedInfo rank, ProfilerStep names,
base: what the rank numbers and HTA's rules take across the set, :func:`audit.trace.analyse.set_terms`),
the second analyses each rank under the set's terms. Each trace is therefore read twice; in
exchange the results are those of the single-process path, rank by rank, to the byte.

Each task also returns its worker's peak resident memory (``VmHWM`` of /proc/self/status, the
high-water mark of the process over every rank it has analysed) and its time. An error a rank
raises (a bad file) is the single-process path's error, the first in the order of the files; a
worker that dies (killed for memory) is one error naming the file it was analysing.
"""
from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from decimal import Decimal
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


class RankError(SourceError):
    """An error one rank raised in a worker, as the single-process path raises it (its text)."""

    slug = "input"


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


def analyse_fanout(paths: list[Path], price: Decimal | None, workers: int = 2,
                   scheduler: str | None = None) -> tuple[dict, list[str], list[str], list[dict]]:
    """:func:`audit.trace.analyse.analyse_with_idle` with the ranks in ``workers`` worker
    processes, or on the Dask cluster at ``scheduler``: the same document and folded stacks, and
    per rank (in order) what its worker reported: ``file``, ``bytes`` (the file's size), ``pid``,
    ``host``, ``vmhwm_kib`` (the worker's peak resident memory so far) and ``seconds`` (the second
    round's time for that rank)."""
    from audit.trace.analyse import assemble, rank_claims, set_terms

    paths = [Path(p) for p in paths]
    with (_dask(scheduler) if scheduler else _pool(workers)) as run:
        headers = _collect(run(_header_task, [(str(p),) for p in paths]))
        ranks, filter_steps, origin = set_terms([h["header"] for h in headers])
        warnings = rank_claims(paths, [h["header"][0] for h in headers], ranks)
        tasks = [(str(p), rank, filter_steps, origin, price) for p, rank in zip(paths, ranks)]
        parts = _collect(run(_rank_task, tasks))
    workers_seen = [{"file": p.name, "bytes": p.stat().st_size, **part.pop("worker")} for p, part in zip(paths, parts)]
    document, stacks, idle_stacks = assemble(paths, price, [part["parts"] for part in parts], warnings)
    return document, stacks, idle_stacks, workers_seen


def _collect(results: list[dict]) -> list[dict]:
    """The tasks' results in the order of the files; the first error (in that order) raised."""
    for result in results:
        if "error" in result:
            slug, text = result["error"]
            raise (UsageError(text) if slug == "usage" else RankError(text))
    return results


# ---------------------------------------------------------------- tasks (run in the workers)

def _guarded(path: str, work: Callable[[], dict]) -> dict:
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


def _header_task(path: str) -> dict:
    """Round one: the rank's header (:func:`audit.trace.analyse.rank_header`)."""
    def work() -> dict:
        from audit.trace.analyse import rank_header
        from audit.trace.findings import load_profile

        return {"header": rank_header(load_profile(Path(path)))}
    return _guarded(path, work)


def _rank_task(path: str, rank: int, filter_steps: bool, origin: float, price: Decimal | None) -> dict:
    """Round two: the rank's parts of the document under the set's terms."""
    def work() -> dict:
        import pandas  # noqa: F401  (loaded before the trace, as the single-process path does)

        from audit.trace.analyse import rank_parts
        from audit.trace.findings import load_profile

        return {"parts": rank_parts(load_profile(Path(path)), rank, filter_steps, origin, price)}
    return _guarded(path, work)


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

def _in_order(futures: list, args: list[tuple], result: Callable[[Any], dict], died: tuple[type[BaseException], ...],
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
def _pool(workers: int) -> Iterator[Runner]:
    """A runner on ``workers`` spawned processes, each taking one rank at a time."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    with ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("spawn")) as pool:
        def run(task: Callable, args: list[tuple]) -> list[dict]:
            return _in_order([pool.submit(task, *a) for a in args], args, lambda f: f.result(), (BrokenProcessPool,),
                             lambda rest: [f.cancel() for f in rest])
        yield run


@contextmanager
def _dask(address: str) -> Iterator[Runner]:
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
            return _in_order([client.submit(task, *a, pure=False) for a in args], args, lambda f: f.result(),
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
