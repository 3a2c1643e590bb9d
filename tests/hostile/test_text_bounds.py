"""Text inputs with no bound: an endless OpenMetrics line, gigabytes of NULs, a NodeList range
of 300 million hosts.

Before: a 20 MB label value cost 3.5 GB in the line regex, 100 MB raised MemoryError, a 4 GiB
NUL .om.gz raised MemoryError; sacct's ``gpu[0-300000000]`` raised MemoryError; a billing .gz of
NULs cost 4 GB and was misdiagnosed. Now lines are read with a bound (connectors/bounds.py), the
FOCUS header from the first MiB, and the NodeList is counted before it is expanded.
"""
from __future__ import annotations

import pytest

from connectors.bounds import MAX_LINE
from connectors.errors import InputError
from connectors.telemetry.omtext import read_families
from connectors.telemetry.sacct import MAX_HOSTS, expand_nodelist
from tests.hostile.harness import assert_named_error, costaudit, gzip_repeated, telemetry, write_case

GR = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"


def long_label_file(path, megabytes: int):
    with open(path, "w") as out:
        out.write(f'{GR}{{gpu="0",Hostname="' + "a" * (megabytes << 20) + '"} 0.5 1725148800\n# EOF\n')
    return path


@pytest.mark.parametrize("megabytes", [20, 100])
def test_openmetrics_line_with_a_huge_label_value(tmp_path, megabytes):
    long_label_file(tmp_path / "label.om", megabytes)
    case = write_case(tmp_path / "case", extra=telemetry("openmetrics", "../label.om"))
    outcome = costaudit("validate", case, cwd=tmp_path)
    assert_named_error(outcome, tmp_path / "label.om", "row 1", "line longer than")


def test_openmetrics_gigabytes_of_nul(tmp_path):
    gzip_repeated(tmp_path / "nul.om.gz", bytes(64 << 20), 64)        # 4 GiB of zeros
    case = write_case(tmp_path / "case", extra=telemetry("openmetrics", "../nul.om.gz"))
    outcome = costaudit("validate", case, cwd=tmp_path)
    assert_named_error(outcome, tmp_path / "nul.om.gz", "line longer than")


def test_openmetrics_line_just_under_the_bound_still_parses(tmp_path):
    path = tmp_path / "ok.om"
    value = "a" * (MAX_LINE - 200)
    path.write_text(f'{GR}{{gpu="0",Hostname="{value}"}} 0.5 1725148800\n# EOF\n')
    roles, scan = read_families(path)
    assert scan.rows == 1


def test_openmetrics_error_echoes_a_short_value(tmp_path):
    path = tmp_path / "bad.om"
    path.write_text(f'{GR}{{gpu="0"}} ' + "x" * 5000 + " 1725148800\n")
    with pytest.raises(InputError) as caught:
        read_families(path)
    assert len(str(caught.value)) < 400


@pytest.mark.parametrize("command", ["validate", "run"])
def test_sacct_nodelist_range_is_bounded(tmp_path, command):
    (tmp_path / "sacct.txt").write_text(
        "JobID|JobName|User|Partition|NodeList|AllocTRES|Elapsed|Start|End|State\n"
        "101|train|alice|gpu|gpu[0-300000000]|gres/gpu=16,node=4|01:30:00|2024-09-01T08:30:00|"
        "2024-09-01T10:00:00|COMPLETED\n")
    case = write_case(tmp_path / "case", extra=telemetry("sacct", "../sacct.txt"))
    outcome = costaudit(command, case, *(["--out", tmp_path / "out"] if command == "run" else []), cwd=tmp_path)
    assert_named_error(outcome, tmp_path / "sacct.txt", "row 2", "NodeList", "[0-300000000]")


@pytest.mark.parametrize("nodelist", ["a[1-100000]b[1-100000]", "x" + "[1]" * 20, "g[0-" + "9" * 5000 + "]"])
def test_sacct_nested_and_long_ranges(nodelist):
    with pytest.raises(InputError, match="NodeList"):
        expand_nodelist(nodelist, "sacct.txt", 2)


def test_sacct_largest_allowed_list_expands():
    assert len(expand_nodelist(f"n[1-{MAX_HOSTS}]", "sacct.txt", 2)) == MAX_HOSTS


@pytest.mark.parametrize("command", ["validate", "run", "billing"])
def test_billing_gz_of_nul_bytes(tmp_path, command):
    gzip_repeated(tmp_path / "nul.csv.gz", bytes(64 << 20), 32)       # 2 GiB of zeros
    if command == "billing":
        outcome = costaudit("billing", tmp_path / "nul.csv.gz", cwd=tmp_path)
        assert_named_error(outcome, tmp_path / "nul.csv.gz", "NUL")
        return
    case = write_case(tmp_path / "case", billing="../nul.csv.gz")
    outcome = costaudit(command, case, *(["--out", tmp_path / "out"] if command == "run" else []), cwd=tmp_path)
    assert_named_error(outcome, tmp_path / "nul.csv.gz", "NUL bytes", "not CSV")


def _long_tags(path, characters: int, gz: bool = False):
    """A FOCUS CSV whose third row holds a quoted Tags field of ``characters`` x's."""
    import gzip

    from tests.hostile.harness import HEADER, focus_row

    text = HEADER + focus_row(row=1) + focus_row(row=2) + focus_row(tags='"' + "x" * characters + '"', row=3)
    if gz:
        path.write_bytes(gzip.compress(text.encode(), 1))
    else:
        path.write_text(text)
    return path


LONG_LINE = ("row 3, column Tags: line longer than 16,777,216 bytes (16 MiB, the CSV reader's max_line_size) "
             "(expected CSV lines of at most 16,777,216 bytes)")


@pytest.mark.parametrize("name", ["long.csv", "long.csv.gz"])
@pytest.mark.parametrize("command", ["validate", "billing"])
def test_billing_line_past_the_line_limit(tmp_path, name, command):
    """A 17 MiB field: DuckDB said "Maximum line size of 2000000 bytes exceeded" after ~10 KB of the
    raw line, or "please run with the single threaded error", or (gzip) "unterminated quote"; now
    the row, the column and the limit."""
    path = _long_tags(tmp_path / name, 17 << 20, gz=name.endswith(".gz"))
    if command == "billing":
        outcome = costaudit("billing", "--format", "focus", path, cwd=tmp_path)
    else:
        outcome = costaudit("validate", write_case(tmp_path / "case", billing=f"../{name}"), cwd=tmp_path)
    assert_named_error(outcome, f"{path}: {LONG_LINE}")
    assert len(outcome.stderr) < 1000


def test_billing_field_of_3_mb_reads(tmp_path):
    """A valid 3 MB field was refused (DuckDB's 2,000,000-byte default); it is under 16 MiB."""
    import duckdb

    from connectors.billing.focus_load import load

    path = _long_tags(tmp_path / "wide.csv", 3_000_000)
    con = duckdb.connect()
    load(con, path, "csv")
    assert con.execute("SELECT length(c11) FROM src").fetchall() == [(14,), (14,), (3_000_000,)]


def test_csv_reason_never_quotes_the_line():
    """DuckDB puts the raw line after "Original Line: "; the reason was that line (10 KB)."""
    from connectors.billing.focus_load import shown_reason

    message = ("Invalid Input Error: CSV Error on Line: 6\nOriginal Line: \n" + "x" * 10_000
               + "\nMaximum line size of 2000000 bytes exceeded.\n\nPossible Solution: ...")
    assert shown_reason(message) == "Maximum line size of 2000000 bytes exceeded."
