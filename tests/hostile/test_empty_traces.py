"""A trace file with nothing in it: 0 bytes, whitespace only, or a gzip that inflates to nothing.

Before: Kineto said "not valid JSON: Input data was truncated" for each (the billing readers say
"file is empty"), and a 0-byte Nsight Systems export "not an SQLite database". Now each says the
file is empty (connectors/profiles/stream.py, connectors/profiles/nsys.py).
"""
from __future__ import annotations

import gzip

import pytest

from tests.hostile.harness import assert_named_error, costaudit, profile, write_case

KINETO = "(expected a PyTorch profiler (Kineto) Chrome trace, .json or .json.gz)"
NSYS = "(expected an Nsight Systems SQLite export (nsys export --type sqlite) with CUDA trace tables)"


@pytest.mark.parametrize(("name", "body", "said"), [
    ("empty.json", b"", "file is empty"),
    ("blank.json", b" \n\t\n", "file is empty (whitespace only)"),
    ("empty.json.gz", gzip.compress(b""), "file is empty once decompressed"),
    ("blank.json.gz", gzip.compress(b"\n\n"), "file is empty once decompressed (whitespace only)"),
])
def test_an_empty_kineto_trace_says_it_is_empty(tmp_path, name, body, said):
    (tmp_path / name).write_bytes(body)
    outcome = costaudit("trace", name, cwd=tmp_path)
    assert_named_error(outcome, name)
    assert outcome.stderr.strip().splitlines()[-1] == f"costaudit: error: {name}: {said} {KINETO}"


def test_an_empty_gzipped_trace_in_a_case_says_it_is_empty(tmp_path):
    case = write_case(tmp_path / "case", extra=profile("kineto", "trace.json.gz"))
    (case / "trace.json.gz").write_bytes(gzip.compress(b""))
    outcome = costaudit("run", case / "case.toml", "--out", tmp_path / "out", cwd=tmp_path)
    assert_named_error(outcome, case / "trace.json.gz", "file is empty once decompressed")


def test_an_empty_nsys_export_says_it_is_empty(tmp_path):
    (tmp_path / "empty.sqlite").write_bytes(b"")
    outcome = costaudit("trace", "empty.sqlite", cwd=tmp_path)
    assert_named_error(outcome, "empty.sqlite")
    assert outcome.stderr.strip().splitlines()[-1] == f"costaudit: error: empty.sqlite: file is empty {NSYS}"
