"""A profile that is a folder of one job's rank traces (connectors/profiles/rankset.py,
audit/trace/rankset.py), read by `costaudit run` in this process, in worker processes
(``--workers``) and on a Dask LocalCluster (``--scheduler``).

- A set of one rank is its trace read alone: the demo's audit.json, apart from the words that
  name the folder and the rank keys a set adds.
- Sixteen generated ranks give the same audit.json bytes on every runner, and its figures are the
  ranks' as `costaudit trace` reads them, added up: kernel-active and GPU-window time, g over the
  whole windows, each rank's own figures; the findings and idle paths of a part never cost more
  than the part.
- A folder without traces, a rank given twice, and bad --workers / --scheduler values are one
  error each, naming what is wrong.
"""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import pytest

from benchmarks.trace.rankset import write_rank_set
from tests.paths import DATA, FIXTURES, ROOT

DEMO_TRACE = "profiles/h100_qwen1.5-0.5b-chat.prefill_decode.derived.json.gz"
RANKS, KERNELS = 16, 2000


def costaudit(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "audit", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout)


def demo_with_profile(folder: Path, fill) -> Path:
    """The demo case with its profile's path a folder ``profiles/set`` that ``fill`` writes."""
    case = folder / "case"
    shutil.copytree(FIXTURES / "demo", case)
    (case / DEMO_TRACE).unlink()
    (case / "profiles" / "set").mkdir()
    fill(case / "profiles" / "set")
    text = (case / "case.toml").read_text()
    assert f'path = "{DEMO_TRACE}"' in text
    (case / "case.toml").write_text(text.replace(f'path = "{DEMO_TRACE}"', 'path = "profiles/set"'))
    return case


def audit_of(case: Path, out: Path, *flags) -> dict:
    done = costaudit("run", case, "--out", out, "--format", "json", "-q", *flags)
    assert done.returncode in (0, 2), done.stderr
    return json.loads((out / "audit.json").read_text())


@pytest.fixture(scope="module")
def sixteen(tmp_path_factory):
    root = tmp_path_factory.mktemp("sixteen")
    case = demo_with_profile(root, lambda folder: write_rank_set(folder, RANKS, KERNELS, seed=11))
    return case, audit_of(case, root / "one"), (root / "one" / "audit.json").read_text()


def test_a_set_of_one_rank_is_its_trace_read_alone(tmp_path):
    reference = audit_of(FIXTURES / "demo", tmp_path / "ref")
    case = demo_with_profile(tmp_path, lambda folder: shutil.copy(FIXTURES / "demo" / DEMO_TRACE, folder))
    got = audit_of(case, tmp_path / "set", "--workers", "2")
    (profile,) = got["profiles"]
    assert profile["trace"] == "set" and [r["file"] for r in profile["ranks"]] == [Path(DEMO_TRACE).name]
    assert profile["ranks"][0]["kernel_active_ms"] == reference["profiles"][0]["kernel_active_ms"]
    assert {row.pop("rank") for row in profile["top_call_paths"]} == {0}
    del profile["ranks"]
    profile["trace"] = reference["profiles"][0]["trace"]
    for doc in (got, reference):
        doc.pop("sources")
    text = json.dumps(got, sort_keys=True).replace("(set/, 1 rank)", f"({Path(DEMO_TRACE).name})")
    assert text == json.dumps(reference, sort_keys=True)


def test_sixteen_ranks_in_two_worker_processes_give_the_same_bytes(sixteen, tmp_path):
    case, _, reference = sixteen
    audit_of(case, tmp_path / "w2", "--workers", "2")
    assert (tmp_path / "w2" / "audit.json").read_text() == reference


@pytest.mark.slow
def test_sixteen_ranks_on_a_dask_local_cluster_give_the_same_bytes(sixteen, tmp_path):
    distributed = pytest.importorskip("distributed")
    case, _, reference = sixteen
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        audit_of(case, tmp_path / "dask", "--scheduler", cluster.scheduler_address)
    assert (tmp_path / "dask" / "audit.json").read_text() == reference


def test_the_set_adds_up_its_ranks_as_costaudit_trace_reads_them(sixteen):
    from audit.trace.analyse import analyse_with_idle

    case, document, _ = sixteen
    files = sorted((case / "profiles" / "set").iterdir())
    trace, _, _ = analyse_with_idle(files, None)
    devices = [rank["devices"][0] for rank in trace["ranks"]]
    window = sum(Fraction(str(d["window_us"])) for d in devices)
    active = sum(Fraction(str(d["kernel_active_us"])) for d in devices)
    (profile,) = document["profiles"]
    assert Fraction(profile["gap_sensitivity"]["full_window"]) == round((window - active) / active, 6)
    assert [r["file"] for r in profile["ranks"]] == [f.name for f in files]
    assert [r["rank"] for r in profile["ranks"]] == list(range(RANKS))
    for mine, theirs in zip(profile["ranks"], devices):
        assert abs(Fraction(mine["kernel_active_ms"]) - Fraction(str(theirs["kernel_active_us"])) / 1000) <= Fraction(1, 2000)
    summed = sum(Fraction(r["kernel_active_ms"]) for r in profile["ranks"])
    assert abs(summed - Fraction(profile["kernel_active_ms"])) <= Fraction(RANKS, 2000)
    assert abs(Fraction(profile["kernel_seconds_per_request"]) * 16_000 - Fraction(profile["kernel_active_ms"])) <= Fraction(1, 1000)
    assert {row["rank"] for row in profile["top_call_paths"]} <= set(range(RANKS))
    gpu = [row["gpu_us"] for row in profile["top_call_paths"]]
    assert gpu == sorted(gpu, reverse=True)
    # what the findings and idle paths of in_flight_idle cost stays within the part, whatever the ranks
    part = next(p for p in document["buckets"]["serving_path"]["parts"] if p["name"] == "in_flight_idle"
                and p["service"] == "chat")
    ids = [f["id"] for f in document["findings"]]  # ranks finding the same waste stay apart, by rank
    assert len(set(ids)) == len(ids) and any(i.endswith("@rank 15") for i in ids)
    idle = [f for f in document["findings"] if f["part"] == "in_flight_idle" and f.get("cost") is not None]
    assert idle and sum(Decimal(f["cost"]) for f in idle) <= Decimal(part["amount"])
    assert sum(Decimal(r["cost"]) for r in profile["idle_paths"]) == Decimal(part["amount"])
    assert {r["rank"] for r in profile["idle_paths"] if "rank" in r} <= set(range(RANKS))


def test_a_folder_of_nsys_exports_is_a_set(tmp_path):
    case = tmp_path / "case"
    shutil.copytree(FIXTURES / "demo", case)
    (case / "profiles" / "nsys").mkdir()
    for name in ("con_kernel.sqlite", "profile16.sqlite"):
        shutil.copy(DATA / "traces" / "nsys-extrap" / name, case / "profiles" / "nsys" / name)
    text = (case / "case.toml").read_text().replace('format = "kineto"', 'format = "nsys"', 1)
    (case / "case.toml").write_text(text.replace(f'path = "{DEMO_TRACE}"', 'path = "profiles/nsys"'))
    document = audit_of(case, tmp_path / "out", "--workers", "2")
    (profile,) = document["profiles"]
    assert [r["file"] for r in profile["ranks"]] == ["con_kernel.sqlite", "profile16.sqlite"]
    alone = [audit_of(_single(tmp_path / name, case, name), tmp_path / f"out-{name}")["profiles"][0]
             for name in ("con_kernel.sqlite", "profile16.sqlite")]
    assert [r["kernel_active_ms"] for r in profile["ranks"]] == [p["kernel_active_ms"] for p in alone]
    assert abs(Fraction(profile["kernel_active_ms"]) - sum(Fraction(p["kernel_active_ms"]) for p in alone)) <= Fraction(1, 1000)


def _single(folder: Path, case: Path, name: str) -> Path:
    shutil.copytree(case, folder)
    text = (folder / "case.toml").read_text().replace('path = "profiles/nsys"', f'path = "profiles/nsys/{name}"')
    (folder / "case.toml").write_text(text)
    return folder


def test_a_folder_without_traces_is_one_error_naming_what_it_holds(tmp_path):
    case = demo_with_profile(tmp_path, lambda folder: (folder / "notes.txt").write_text("rank 0 was lost\n"))
    done = costaudit("run", case, "--out", tmp_path / "out")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "profiles/set" in done.stderr and "no .json or .json.gz file in the folder (it holds notes.txt)" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_rank_given_twice_is_one_error_naming_both_files(tmp_path):
    def fill(folder):
        (first,) = write_rank_set(folder, 1, 200, seed=3)
        shutil.copy(first, folder / "rank_01.json")
    case = demo_with_profile(tmp_path, fill)
    done = costaudit("run", case, "--out", tmp_path / "out", "--workers", "2")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "rank_01.json" in done.stderr and "rank_00.json" in done.stderr and "counted twice" in done.stderr


def refused(case: Path, out: Path, *flags) -> str:
    """stderr of a run that must stop with one error: exit 1, no traceback, nothing written."""
    done = costaudit("run", case, "--out", out, *flags)
    assert done.returncode == 1 and "Traceback" not in done.stderr and not out.exists()
    return done.stderr


def test_a_bad_rank_in_a_worker_is_the_error_of_this_process(tmp_path):
    def truncated(folder):
        write_rank_set(folder, 3, 200, seed=5)
        (folder / "rank_01.json").write_text('{"traceEvents": [')
    case = demo_with_profile(tmp_path, truncated)
    alone, workers = refused(case, tmp_path / "a"), refused(case, tmp_path / "b", "--workers", "2")
    assert "rank_01.json" in alone and alone.splitlines()[-1] == workers.splitlines()[-1]


@pytest.mark.parametrize("flags, said", [
    (["--workers", "0"], "--workers '0' is not a number of worker processes"),
    (["--workers", "2", "--scheduler", "tcp://127.0.0.1:1"], "--workers and --scheduler exclude each other"),
])
def test_bad_fanout_flags_are_one_usage_error(sixteen, tmp_path, flags, said):
    case, _, _ = sixteen
    done = costaudit("run", case, "--out", tmp_path / "out", *flags)
    assert done.returncode == 1 and said in done.stderr and "Traceback" not in done.stderr


def test_an_unreachable_scheduler_is_one_error_naming_it(sixteen, tmp_path):
    case, _, _ = sixteen
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    done = costaudit("run", case, "--out", tmp_path / "out", "--scheduler", f"tcp://127.0.0.1:{port}")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert f"cannot reach the Dask scheduler at tcp://127.0.0.1:{port}" in done.stderr
    assert not (tmp_path / "out").exists()


def test_a_collector_bundle_given_as_kineto_is_named_a_bundle(tmp_path):
    def bundle(folder):
        write_rank_set(folder, 1, 200, seed=3)
        (folder / "profile.json").write_text("{}")
    said = refused(demo_with_profile(tmp_path, bundle), tmp_path / "out")
    assert "is a bundle of costaudit collect (it holds profile.json)" in said and 'format = "profile_bundle"' in said


def test_init_reads_a_folder_of_rank_traces_as_one_profile(tmp_path):
    from audit.discover.sniff import sniff

    folder = tmp_path / "ranks"
    write_rank_set(folder, 3, 200, seed=3)
    found = sniff(str(folder))
    assert (found.kind, found.format, found.path) == ("profiles", "kineto", folder)
    assert found.why == "a folder of 3 kineto traces, one per rank (rank_00.json …)"
    nsys = tmp_path / "nsys"
    nsys.mkdir()
    for name in ("con_kernel.sqlite", "profile16.sqlite"):
        shutil.copy(DATA / "traces" / "nsys-extrap" / name, nsys / name)
    assert (sniff(str(nsys)).format, sniff(str(nsys)).why) == ("nsys", "a folder of 2 nsys traces, one per rank "
                                                                       "(con_kernel.sqlite …)")
