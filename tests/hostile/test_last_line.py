"""A last line longer than DuckDB's CSV buffer (32 MiB): read_csv dropped it without a word.

A FOCUS file whose last row held a 40 MB field validated and ran (exit 0) with that row's cost
missing from the total; 50 MB of garbage as the last line was accepted too. Every reader that goes
through read_csv with a 32 MiB buffer (FOCUS, Azure, commitments, CUR, the totals, access logs)
now measures each file's last line first (:func:`connectors.duck.last_line_longer`). (Athena's
result files, read with DuckDB's defaults, already fail such a line loudly.)
"""
from __future__ import annotations

import gzip

import duckdb
import pytest

from connectors.duck import last_line_longer
from connectors.errors import InputError
from tests.hostile.harness import HEADER, assert_named_error, costaudit, focus_row, write_case

BIG = 40_000_000
"""Bytes of the last line's long field: past DuckDB's 32 MiB buffer."""
ROWS = 1000
"""Short rows before the long one: DuckDB drops the last line where it starts well into its buffer."""
LONG_LINE = (f"row {ROWS + 1}, column Tags: line longer than 16,777,216 bytes (16 MiB, the CSV reader's max_line_size) "
             "(expected CSV lines of at most 16,777,216 bytes)")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """long.csv / long.csv.gz: ROWS rows, then one whose Tags field is BIG x's (the last line);
    garbage.csv: ROWS rows, then 50 MB without a comma."""
    folder = tmp_path_factory.mktemp("last_line")
    rows = HEADER + "".join(focus_row(row=i) for i in range(1, ROWS + 1))
    text = (rows + focus_row(tags="x" * BIG, row=ROWS + 1)).encode()
    (folder / "long.csv").write_bytes(text)
    (folder / "long.csv.gz").write_bytes(gzip.compress(text, 1))
    (folder / "garbage.csv").write_bytes(rows.encode() + b"z" * 50_000_000)
    return folder


@pytest.mark.parametrize("name", ["long.csv", "long.csv.gz"])
def test_validate_names_the_last_row(files, tmp_path, name):
    """Was: exit 0, ROWS rows read; now the row, the column and the limit, exit 1."""
    outcome = costaudit("validate", write_case(tmp_path / "case", billing=files / name), cwd=tmp_path)
    assert_named_error(outcome, f"{files / name}: {LONG_LINE}")


def test_run_writes_nothing(files, tmp_path):
    """Was: exit 0 and a report 1.00 short (1000.00 of 1001.00 USD); now exit 1 and no output folder."""
    outcome = costaudit("run", write_case(tmp_path / "case", billing=files / "long.csv"),
                        "--out", tmp_path / "out", cwd=tmp_path)
    assert_named_error(outcome, f"{files / 'long.csv'}: {LONG_LINE}")
    assert not (tmp_path / "out").exists()


def test_billing_summary_and_garbage(files, tmp_path):
    """The billing summary reads through its own SQL: the same error; a last line of garbage too."""
    outcome = costaudit("billing", "--format", "focus", files / "long.csv", cwd=tmp_path)
    assert_named_error(outcome, f"{files / 'long.csv'}: {LONG_LINE}")
    outcome = costaudit("validate", write_case(tmp_path / "case", billing=files / "garbage.csv"), cwd=tmp_path)
    assert_named_error(outcome, files / "garbage.csv", f"row {ROWS + 1}", "line longer than 16,777,216 bytes")


def test_cur_csv(files):
    """A CUR CSV is measured as its columns are described (the CUR reader and its totals)."""
    from connectors.billing.cur import describe

    with pytest.raises(InputError) as caught, duckdb.connect() as con:
        describe(con, files / "long.csv.gz", "bill")
    assert str(caught.value) == f"{files / 'long.csv.gz'}: {LONG_LINE}"


def test_access_log(files, tmp_path):
    """An access log's last line past read_csv's default 2,000,000-byte max_line_size."""
    from connectors.telemetry.access_log import load_text

    log = tmp_path / "access.log"
    log.write_bytes(b'1.2.3.4 - - [01/Sep/2024:00:00:00 +0000] "GET / HTTP/1.1" 200 5 "-" "x"\n' + b"y" * BIG)
    with pytest.raises(InputError, match=r"access\.log: last line longer than 2,000,000 bytes"), \
            duckdb.connect() as con:
        load_text(con, [log], tmp_path)


@pytest.mark.parametrize("compressed", [False, True])
@pytest.mark.parametrize(("text", "longer"), [
    (b"h\nabcde\n", False), (b"h\nabcdef", True), (b"h\nabcdef\r\n \n\n", True), (b"abcdef", True),
    (b"h\nabcdef\nab\n\n", False), (b"", False), (b"\n\n", False), (b"h\r" + b"a" * 5 + b"\r\n", False),
])
def test_last_line_longer(tmp_path, text, longer, compressed):
    """The last line, trailing blanks and breaks left out, against a limit of 5 bytes (blocks of 2)."""
    import connectors.duck as duck

    path = tmp_path / "t"
    path.write_bytes(gzip.compress(text) if compressed else text)
    saved, duck.TAIL_BLOCK = duck.TAIL_BLOCK, 2
    try:
        assert last_line_longer(path, 5, compressed) is longer
    finally:
        duck.TAIL_BLOCK = saved
