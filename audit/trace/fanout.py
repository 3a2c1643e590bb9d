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

from decimal import Decimal
from pathlib import Path

from connectors.profiles.workers import (  # noqa: F401  (the runners' names, as they were here)
    CONNECT_TIMEOUT_S,
    EXPECTED_SCHEDULER,
    RankError,
    Runner,
    collect,
    guarded,
    peak_rss_kib,
    runner,
    worker_count,
)
from connectors.profiles.workers import in_order as _in_order  # noqa: F401  (tests call it here)


def analyse_fanout(paths: list[Path], price: Decimal | None, workers: int = 2,
                   scheduler: str | None = None) -> tuple[dict, list[str], list[str], list[dict]]:
    """:func:`audit.trace.analyse.analyse_with_idle` with the ranks in ``workers`` worker
    processes, or on the Dask cluster at ``scheduler``: the same document and folded stacks, and
    per rank (in order) what its worker reported: ``file``, ``bytes`` (the file's size), ``pid``,
    ``host``, ``vmhwm_kib`` (the worker's peak resident memory so far) and ``seconds`` (the second
    round's time for that rank)."""
    from audit.trace.analyse import assemble, rank_claims, set_terms

    paths = [Path(p) for p in paths]
    with runner(workers, scheduler) as run:
        headers = collect(run(_header_task, [(str(p),) for p in paths]))
        ranks, filter_steps, origin = set_terms([h["header"] for h in headers])
        warnings = rank_claims(paths, [h["header"][0] for h in headers], ranks)
        tasks = [(str(p), rank, filter_steps, origin, price) for p, rank in zip(paths, ranks)]
        parts = collect(run(_rank_task, tasks))
    workers_seen = [{"file": p.name, "bytes": p.stat().st_size, **part.pop("worker")} for p, part in zip(paths, parts)]
    document, stacks, idle_stacks = assemble(paths, price, [part["parts"] for part in parts], warnings)
    return document, stacks, idle_stacks, workers_seen


# ---------------------------------------------------------------- tasks (run in the workers)

def _header_task(path: str) -> dict:
    """Round one: the rank's header (:func:`audit.trace.analyse.rank_header`)."""
    def work() -> dict:
        from audit.trace.analyse import rank_header
        from audit.trace.findings import load_profile

        return {"header": rank_header(load_profile(Path(path)))}
    return guarded(path, work)


def _rank_task(path: str, rank: int, filter_steps: bool, origin: float, price: Decimal | None) -> dict:
    """Round two: the rank's parts of the document under the set's terms."""
    def work() -> dict:
        import pandas  # noqa: F401  (loaded before the trace, as the single-process path does)

        from audit.trace.analyse import rank_parts
        from audit.trace.findings import load_profile

        return {"parts": rank_parts(load_profile(Path(path)), rank, filter_steps, origin, price)}
    return guarded(path, work)
