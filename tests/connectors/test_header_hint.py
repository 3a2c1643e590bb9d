"""A file whose header lacks what its format needs is told what the header has instead (rule 5).

Through every billing connector that reads a header: a semicolon- or tab-delimited CSV, a UTF-16
export, a file of another billing format, a column spelled nearly right; and the hint's rules alone.
"""
from __future__ import annotations

import csv
import gzip
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from audit.billing_summary import sniff_format
from connectors.base import ReadContext, SourceSpec
from connectors.errors import InputError, InputErrors
from connectors.header_hint import foreign_delimiter, header_hint, nearest_columns, utf16_hint
from connectors.registry import resolve
from tests.connectors.billing.test_focus import SAMPLE, utc

FORMATS = ("focus", "cur", "azure")
CUR_SAMPLE = Path(__file__).parents[2] / "fixtures" / "wa_labs_efficiency" / "data"


def read(path: Path, fmt: str):
    """Read ``path`` as billing format ``fmt`` through the registered connector."""
    spec = SourceSpec(name="bill", kind="billing", format=fmt, path=path, options={})
    return resolve(fmt)(spec, ReadContext(start=utc(2000, 1, 1), end=utc(2100, 1, 1), currency="USD")).read()


def message(path: Path, fmt: str) -> str:
    """The one error reading ``path`` as ``fmt`` gives."""
    with pytest.raises((InputError, InputErrors)) as caught:
        read(path, fmt)
    return str(caught.value)


def rewrite(path: Path, delimiter: str, rows: int = 50) -> Path:
    """The FOCUS sample's first ``rows`` rows written with ``delimiter``; commas inside values kept."""
    with SAMPLE.open(newline="", encoding="utf-8") as source, path.open("w", newline="", encoding="utf-8") as out:
        writer = csv.writer(out, delimiter=delimiter)
        for i, row in enumerate(csv.reader(source)):
            if i > rows:
                break
            writer.writerow(row)
    return path


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("delimiter, said", [(";", "semicolons"), ("\t", "tabs")])
def test_a_csv_delimited_otherwise_is_named_by_its_delimiter(tmp_path, fmt, delimiter, said):
    path = rewrite(tmp_path / "export.csv", delimiter)
    text = message(path, fmt)
    assert str(path) in text
    assert f"the file looks delimited by {said}, not commas" in text
    assert "its header is one column, 'AvailabilityZone" in text


def test_a_semicolon_csv_given_as_a_gcp_export_is_named_too(tmp_path):
    path = rewrite(tmp_path / "export.csv", ";")
    text = message(path, "gcp_billing")
    assert "no export file" in text and "it is a CSV file" in text and "delimited by semicolons" in text


def test_a_gzipped_semicolon_csv_is_named(tmp_path):
    plain = rewrite(tmp_path / "export.csv", ";")
    packed = tmp_path / "export.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert "delimited by semicolons" in message(packed, "focus")


@pytest.mark.parametrize("fmt", ["cur", "azure", "gcp_billing"])
def test_a_focus_file_given_as_another_format_is_told_it_is_focus(fmt):
    assert 'its columns are those of a focus export (format = "focus")' in message(SAMPLE, fmt)


def test_a_cur_file_given_as_focus_is_told_it_is_a_cur():
    cur = sorted(CUR_SAMPLE.rglob("*.csv*"))[0]
    assert 'its columns are those of a cur export (format = "cur")' in message(cur, "focus")


def test_a_column_spelled_nearly_right_is_named_beside_the_missing_one(tmp_path):
    text = SAMPLE.read_text(encoding="utf-8").splitlines()
    text[0] = text[0].replace("BilledCost", "Billed_Cost")
    path = tmp_path / "focus.csv"
    path.write_text("\n".join(text[:20]) + "\n", encoding="utf-8")
    assert "missing mandatory column(s): BilledCost; nearest in the file: BilledCost ≈ Billed_Cost" in message(path, "focus")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le"])
def test_a_utf16_export_is_named_as_utf16(tmp_path, encoding):
    path = tmp_path / "export.csv"
    path.write_bytes("\n".join(SAMPLE.read_text(encoding="utf-8").splitlines()[:10]).encode(encoding))
    assert "it looks like UTF-16 text" in message(path, "focus")
    with pytest.raises(InputError, match="it looks like UTF-16 text"):
        sniff_format(path)


def test_the_billing_command_names_the_delimiter_when_it_cannot_tell_the_format(tmp_path):
    path = rewrite(tmp_path / "export.csv", ";")
    with pytest.raises(InputError, match="cannot tell the billing format.*delimited by semicolons"):
        sniff_format(path)


def test_the_hint_rules():
    assert foreign_delimiter(["a;b;c"]) == ";"
    assert foreign_delimiter(["a\tb;c\td"]) == "\t"
    assert foreign_delimiter(["a,b"]) is None and foreign_delimiter(["a", "b"]) is None
    assert foreign_delimiter(["abc"]) is None
    assert nearest_columns(["billed_cost", "Region"], ["BilledCost", "EffectiveCost"]) == [("BilledCost", "billed_cost")]
    assert header_hint([], ["BilledCost"]) == "; the file has no column names"
    long = [f"column_{i}" for i in range(100)]
    assert header_hint(long, ["zzz"]).endswith("…")
    assert header_hint(["BilledCost"], ["EffectiveCost"], "focus").startswith("; the file has 1 column")
    assert utf16_hint(b"\xff\xfeB\x00i\x00") != "" and utf16_hint(b"BilledCost,EffectiveCost\n") == ""


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=40), max_size=8), st.lists(st.text(max_size=20), max_size=4),
       st.sampled_from([None, "focus", "cur", "azure", "gcp_billing"]))
def test_the_hint_never_fails_and_stays_short(header, missing, fmt):
    hint = header_hint(header, missing, fmt)
    assert hint == "" or hint.startswith("; ")
    assert len(hint) < 300 + 60 * len(missing)


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_ragged_gzipped_csv_is_malformed_not_a_corrupt_gzip(tmp_path, fmt):
    """DuckDB's message names the file, and a file named .csv.gz has "gzip" in its name: the
    malformed line used to be reported as a truncated or corrupt gzip stream."""
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()[:30]
    lines[5] += ",one,too,many"
    path = tmp_path / "export.csv.gz"
    path.write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    text = message(path, fmt)
    if fmt == "focus":
        assert "malformed CSV at file line 6" in text
    assert "gzip" not in text.replace(str(path), "")


@pytest.mark.parametrize("folder", [False, True])
def test_an_avro_extract_given_as_a_gcp_export_is_told_how_to_extract(tmp_path, folder):
    """bq extract writes Avro by default for nested tables; the reader takes JSON or Parquet."""
    where = tmp_path / "extract" if folder else tmp_path / "billing.avro"
    target = where / "billing-000000000000.avro" if folder else where
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(b"Obj\x01" + bytes(64))
    text = message(where, "gcp_billing")
    assert "no export file" in text and "; it is Avro: extract the table as newline-delimited JSON or Parquet" in text
