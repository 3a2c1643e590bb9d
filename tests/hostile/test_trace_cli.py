"""`costaudit trace` options and traces that would have written over an input, raised a traceback
or priced findings with no price a GPU-hour could have.

Before (found by a read-only check): ``--folded`` naming the trace itself overwrote it with folded
stacks, exit 0; a folder, a missing folder or /dev/full there ended in a traceback after the whole
analysis; ``--price-per-gpu-hour`` inf, 1e308 or 1e999 raised InvalidOperation, -1 priced idle at
a negative cost and nan printed "NaN"; the same trace given twice was read as two ranks; a
correlation id of 10**25 raised OverflowError inside another exception. Now each option is checked
before anything is read (exit 1, one line), the outputs are written whole or not at all, and an id
past int64 reads as none.
"""
from __future__ import annotations

import hashlib
import json
import os

import pytest
from typer.testing import CliRunner

from audit.cli import app
from connectors.profiles.events import read_trace
from tests.builders import CURRENT, gpu_events, host_events, trace_doc, write_trace


@pytest.fixture
def trace(tmp_path):
    return write_trace(tmp_path, trace_doc(host_events(CURRENT) + gpu_events(CURRENT)))


def invoke(*args):
    return CliRunner().invoke(app, ["trace", *map(str, args)])


def assert_usage(result, *words):
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    assert len([ln for ln in result.output.splitlines() if ln.startswith("costaudit: error:")]) == 1
    for word in words:
        assert word in result.output, result.output


def test_an_output_naming_the_trace_is_refused_and_the_trace_kept(trace):
    before = trace.read_bytes()
    assert_usage(invoke(trace, "--folded", trace), "--folded", "one of the traces: it would be overwritten")
    assert_usage(invoke(trace, "--idle-folded", trace), "--idle-folded", "overwritten")
    assert trace.read_bytes() == before


@pytest.mark.parametrize("where", ["folder", "missing", "device"])
def test_an_output_that_cannot_be_a_file_is_refused_before_the_analysis(trace, tmp_path, where):
    target = {"folder": tmp_path, "missing": tmp_path / "no" / "x.folded", "device": "/dev/full"}[where]
    if where == "device" and not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full")
    assert_usage(invoke(trace, "--folded", target), "--folded")


def test_the_two_outputs_naming_one_file_are_refused(trace, tmp_path):
    out = tmp_path / "x.folded"
    assert_usage(invoke(trace, "--folded", out, "--idle-folded", out), "name the same file")


def test_the_outputs_are_written(trace, tmp_path):
    result = invoke(trace, "--folded", tmp_path / "a.folded", "--idle-folded", tmp_path / "b.folded")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "a.folded").read_text().strip() and not list(tmp_path.glob(".a.folded.*"))


@pytest.mark.parametrize("price", ["inf", "-inf", "nan", "1e308", "1e999", "-1", "99999999999999999999"])
def test_a_price_no_gpu_hour_has_is_refused(trace, price):
    assert_usage(invoke(trace, "--price-per-gpu-hour", price), "--price-per-gpu-hour")


def test_a_trace_given_twice_is_refused(trace):
    assert_usage(invoke(trace, trace), "given twice")


def ranked_trace(tmp_path, name, rank):
    """A trace whose distributedInfo claims ``rank`` (its traceName is its file's: other content)."""
    doc = trace_doc(host_events(CURRENT) + gpu_events(CURRENT))
    return write_trace(tmp_path, {**doc, "traceName": name, "distributedInfo": {"rank": rank, "world_size": 128}}, name)


def test_two_identical_files_claiming_one_rank_are_refused(tmp_path):
    """Before: exit 0, "rank 0 dupA.json.gz" and "rank 1 dupB.json.gz", the job's GPU time doubled."""
    a = ranked_trace(tmp_path, "dupA.json", 0)
    b = tmp_path / "dupB.json"
    b.write_bytes(a.read_bytes())
    digest = hashlib.sha256(a.read_bytes()).hexdigest()
    assert_usage(invoke(a, b), f"costaudit: error: {b}: claims rank 0 (distributedInfo.rank), as {a} does, "
                               f"and is the same trace (same sha256 {digest}): its GPU time would be counted twice "
                               "(expected each rank's trace once)")


def test_two_identical_files_claiming_no_rank_are_refused(trace, tmp_path):
    """Before: read as ranks 0 and 1, the GPU time doubled."""
    copy = tmp_path / "copy.json"
    copy.write_bytes(trace.read_bytes())
    digest = hashlib.sha256(trace.read_bytes()).hexdigest()
    assert_usage(invoke(trace, copy), f"costaudit: error: {copy}: is the same trace as {trace} (same sha256 {digest}): "
                                      "its GPU time would be counted twice (expected each rank's trace once)")


def test_a_file_claiming_a_rank_held_by_position_is_warned(tmp_path):
    """The first file names no rank and is rank 0 by its position; the second claims 0 too."""
    a = write_trace(tmp_path, trace_doc(host_events(CURRENT) + gpu_events(CURRENT)), "a.json")
    b = ranked_trace(tmp_path, "b.json", 0)
    result = invoke(a, b)
    assert result.exit_code == 0, result.output
    assert (f"costaudit: warning: {b} claims rank 0 (distributedInfo.rank), which {a} holds (its position in the "
            "list): read as rank 1 instead") in result.output


def test_two_files_claiming_one_rank_are_read_at_their_positions_with_a_warning(tmp_path):
    """Before: the second file silently became rank 1. docs/trace.md: a taken rank gives way to the
    file's position; now said, in the text and in --json's ``warnings``."""
    a, b = ranked_trace(tmp_path, "a.json", 0), ranked_trace(tmp_path, "b.json", 0)
    warning = (f"{b} claims rank 0 (distributedInfo.rank), as {a} does: read as rank 1 instead "
               "(its position in the list, else the next rank free); check that both files are ranks of this job")
    result = invoke(a, b)
    assert result.exit_code == 0, result.output
    assert f"costaudit: warning: {warning}" in result.output.splitlines()
    assert "rank 1  b.json" in result.output
    document = json.loads(CliRunner().invoke(app, ["trace", str(a), str(b), "--json"]).stdout)
    assert document["warnings"] == [warning]


def test_a_set_without_clashing_ranks_has_no_warning(tmp_path):
    a, b = ranked_trace(tmp_path, "a.json", 0), ranked_trace(tmp_path, "b.json", 1)
    result = CliRunner().invoke(app, ["trace", str(a), str(b), "--json"])
    assert result.exit_code == 0 and "warning" not in result.stderr
    assert json.loads(result.stdout)["warnings"] == []


def test_an_id_past_int64_reads_as_none(tmp_path):
    events = host_events(CURRENT) + gpu_events(CURRENT)
    kernel = next(e for e in events if e.get("cat") == CURRENT["kernel"])
    kernel["args"]["correlation"] = 10 ** 25
    loaded = read_trace(write_trace(tmp_path, trace_doc(events)))
    assert loaded.correlation.min() >= -1


def test_an_nsys_export_without_its_kernel_table_is_refused_as_in_a_case(tmp_path):
    """Before: an export whose CUPTI_ACTIVITY_KIND_KERNEL table was dropped printed
    "kernel-active 0.000 ms", exit 0; a case refused it. Now `costaudit trace` names it the same way."""
    import shutil
    import sqlite3

    from tests.paths import DATA

    path = shutil.copy(DATA / "traces" / "nsys-extrap" / "con_kernel.sqlite", tmp_path / "copies.sqlite")
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL")
    result = invoke(path)
    assert_usage(result, f"{path}: no CUPTI_ACTIVITY_KIND_KERNEL row, only memcpy / memset: nothing in it "
                 "measures the model's compute")
    assert "kernel-active" not in result.output
