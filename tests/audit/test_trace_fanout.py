"""`costaudit trace --workers N` and `--scheduler ADDRESS` (audit/trace/fanout.py): a 16-rank
generated set analysed in this process, in two spawned worker processes and on a two-worker Dask
LocalCluster gives the same bytes rank by rank, each worker's peak RSS stays under a bound that
does not depend on the number of ranks, and a bad file or an unreachable scheduler is one error."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from decimal import Decimal

import pytest

from audit.cli.trace import trace_command
from audit.trace.analyse import analyse_with_idle
from audit.trace.fanout import analyse_fanout, worker_count
from benchmarks.trace.rankset import write_rank_set
from schemas.errors import UsageError
from tests.paths import ROOT

RANKS, KERNELS = 16, 2000
PRICE = Decimal("3.5")
#: a worker holds one rank of ~1.5 MiB at a time; measured 125-135 MiB (pool) and 165-180 MiB (Dask worker,
#: its own runtime included). The bound is what one rank needs, whatever the number of ranks.
RSS_BOUND_MIB = 400


@pytest.fixture(scope="module")
def rank_set(tmp_path_factory):
    paths = write_rank_set(tmp_path_factory.mktemp("ranks"), RANKS, KERNELS, seed=7)
    document, stacks, idle = analyse_with_idle(paths, PRICE)
    return paths, (document, stacks, idle)


def _same_rank_by_rank(got, want):
    """The documents agree entry by entry (as JSON bytes), and so do the folded stacks."""
    (document, stacks, idle), (ref, ref_stacks, ref_idle) = got, want
    for key in ("ranks", "hta_compatible", "call_paths", "idle_paths"):
        assert len(document[key]) == RANKS
        for mine, theirs in zip(document[key], ref[key]):
            assert json.dumps(mine, sort_keys=True) == json.dumps(theirs, sort_keys=True), (key, mine["rank"])
    assert json.dumps(document, indent=1, sort_keys=True) == json.dumps(ref, indent=1, sort_keys=True)
    assert stacks == ref_stacks and idle == ref_idle


def _bounded(seen, processes):
    assert [s["file"] for s in seen] == [f"rank_{r:02d}.json" for r in range(RANKS)]
    assert len({s["pid"] for s in seen}) <= processes
    peaks = [s["vmhwm_kib"] / 1024 for s in seen]
    assert all(0 < peak < RSS_BOUND_MIB for peak in peaks), peaks


def test_two_worker_processes_give_the_same_bytes_with_bounded_memory(rank_set):
    paths, reference = rank_set
    document, stacks, idle, seen = analyse_fanout(paths, PRICE, workers=2)
    _same_rank_by_rank((document, stacks, idle), reference)
    assert document["findings"] and document["hta_compatible"][3]["window_us"] > 0
    _bounded(seen, 2)


@pytest.mark.slow
def test_a_dask_local_cluster_gives_the_same_bytes_with_bounded_memory(rank_set):
    distributed = pytest.importorskip("distributed")
    paths, reference = rank_set
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        document, stacks, idle, seen = analyse_fanout(paths, PRICE, scheduler=cluster.scheduler_address)
    _same_rank_by_rank((document, stacks, idle), reference)
    _bounded(seen, 2)


def costaudit(*args, **env):
    return subprocess.run([sys.executable, "-m", "audit", "trace", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=300, env={**os.environ, **env})


def test_cli_workers_prints_the_same_bytes_and_a_bad_file_is_the_same_one_error(rank_set, tmp_path, capsys):
    paths, _ = rank_set
    broken = tmp_path / "rank_99.json"
    broken.write_text('{"traceEvents": [{"ph": "X", "name": ')
    assert trace_command(paths[:4], True, None) == 0
    alone = capsys.readouterr().out
    assert trace_command([paths[0], broken, paths[1]], False, None) == 1
    alone_error = capsys.readouterr().err
    fanned = costaudit(*paths[:4], "--json", "--workers", "2")
    assert fanned.returncode == 0, fanned.stderr
    assert fanned.stdout == alone
    fanned = costaudit(paths[0], broken, paths[1], "--workers", "2")
    assert fanned.returncode == 1 and fanned.stderr == alone_error and str(broken) in fanned.stderr
    assert fanned.stderr.count("\n") == 1 and "Traceback" not in fanned.stderr


def test_workers_refuse_a_copy_of_a_rank_and_warn_of_a_rank_claimed_twice(rank_set, tmp_path, capsys):
    """A copy of rank 0 is the in-process error (same sha256); rank 1's file with rank 0 claimed is
    read as rank 1 with the same warning and document. Before: both silently counted."""
    paths, _ = rank_set
    copy = tmp_path / "copy.json"
    copy.write_bytes(paths[0].read_bytes())
    assert trace_command([paths[0], copy], False, None) == 1
    alone_error = capsys.readouterr().err
    assert "same sha256" in alone_error and str(copy) in alone_error and str(paths[0]) in alone_error
    fanned = costaudit(paths[0], copy, "--workers", "2")
    assert fanned.returncode == 1 and fanned.stderr == alone_error
    claims = tmp_path / "claims0.json"
    claims.write_text(paths[1].read_text().replace('"rank":1,', '"rank":0,', 1))
    assert trace_command([paths[0], claims], True, None) == 0
    alone = capsys.readouterr()
    assert f"{claims} claims rank 0 (distributedInfo.rank), as {paths[0]} does: read as rank 1" in alone.err
    fanned = costaudit(paths[0], claims, "--json", "--workers", "2")
    assert (fanned.returncode, fanned.stdout, fanned.stderr) == (0, alone.out, alone.err)


def test_an_unreachable_scheduler_is_one_error_naming_it(rank_set):
    pytest.importorskip("distributed")
    with socket.socket() as probe:           # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    paths, _ = rank_set
    result = costaudit(*paths[:2], "--scheduler", address, COSTAUDIT_SCHEDULER_TIMEOUT_S="1")
    assert result.returncode == 1 and "Traceback" not in result.stderr and result.stderr.count("\n") == 1
    assert result.stderr.startswith(f"costaudit: error: cannot reach the Dask scheduler at {address} ("), result.stderr


def test_something_not_a_scheduler_at_the_address_is_one_error_naming_it(rank_set):
    pytest.importorskip("distributed")
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    address = f"tcp://127.0.0.1:{server.getsockname()[1]}"

    def answer_garbage():
        with server:
            for _ in range(4):
                try:
                    conn, _ = server.accept()
                except OSError:
                    return
                with conn:
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
    threading.Thread(target=answer_garbage, daemon=True).start()
    paths, _ = rank_set
    result = costaudit(paths[0], "--scheduler", address, COSTAUDIT_SCHEDULER_TIMEOUT_S="2")
    assert result.returncode == 1 and "Traceback" not in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"costaudit: error: cannot reach the Dask scheduler at {address} (")


def test_worker_counts():
    assert worker_count("3", 16) == 3 and worker_count("auto", 1) == 1
    assert 1 <= worker_count("auto", 16) <= 16
    for bad in ("0", "-2", "many"):
        with pytest.raises(UsageError, match="--workers"):
            worker_count(bad, 4)


def test_a_worker_that_dies_is_one_error_naming_the_file_it_owed():
    from concurrent.futures.process import BrokenProcessPool

    from audit.trace.fanout import _in_order
    from connectors.errors import InputError

    def result(future):
        if future == "dead":
            raise BrokenProcessPool("A process in the process pool was terminated abruptly")
        return {"parts": future}

    cancelled = []
    with pytest.raises(InputError, match=r"^/r/rank_01.json: the worker analysing it stopped .*terminated abruptly"):
        _in_order(["ok", "dead", "later"], [("/r/rank_00.json",), ("/r/rank_01.json",), ("/r/rank_02.json",)],
                  result, (BrokenProcessPool,), cancelled.extend)
    assert cancelled == ["dead", "later"]
