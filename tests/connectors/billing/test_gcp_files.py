"""A local GCP export's files that hold the same rows (connectors/billing/gcp_files.py).

Before, a month-to-date export beside the month's in one folder was summed with it, with no word:
cloudgen's GKE day went from 4,463.46 to 5,589.19, and a whole copy doubled it, "reconciles"."""
from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pytest

from connectors.base import ReadContext, SourceSpec
from connectors.errors import InputError
from connectors.registry import resolve
from tests.servers.gcp_export import JUNE, MAY, export_rows, write_ndjson, write_parquet


def read(path: Path):
    spec = SourceSpec(name="gcp", kind="billing", format="gcp_billing", path=path)
    return resolve("gcp_billing")(spec, ReadContext(start=MAY, end=JUNE, currency="USD")).read()


def total(frame) -> Decimal:
    return sum(frame.tables["lines"]["billed_cost"], Decimal(0))


@pytest.mark.parametrize("write", [write_ndjson, write_parquet])
def test_shards_are_one_export_and_a_repeated_part_is_refused(tmp_path, write):
    rows = export_rows()
    suffix = ".json" if write is write_ndjson else ".parquet"
    whole = read(write(rows, tmp_path / f"whole{suffix}"))
    shards = tmp_path / "shards"
    shards.mkdir()
    for i in range(3):
        write(rows[i::3], shards / f"export-{i:012d}{suffix}")
    assert total(read(shards)) == total(whole)  # shards of one export are read as it
    write(rows[:40], shards / f"month-to-date{suffix}")
    with pytest.raises(InputError) as caught:
        read(shards)
    assert caught.value.path == str(shards)
    assert (f"of month-to-date{suffix} are identical to rows of export-000000000000{suffix} and 2 other file(s): "
            "the same charges twice") in str(caught.value)


def test_a_record_without_its_cost_or_time_is_named_at_its_line(tmp_path):
    """It was "column BilledCost: missing value" twenty times (a column the export has not), and a
    JSON of another shape was "it holds no line at all"."""
    import json

    rows = export_rows()
    path = write_ndjson(rows, tmp_path / "export.json")
    lines = path.read_text().splitlines()
    record = json.loads(lines[6])
    del record["cost"]
    lines[6] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError) as caught:
        read(path)
    assert (caught.value.row, caught.value.column) == (7, "cost") and "a record with no cost" in str(caught.value)
    other = tmp_path / "other.json"
    other.write_text('{"a": 1}\n{"a": 2}\n')
    with pytest.raises(InputError) as caught:
        read(other)
    assert (caught.value.row, caught.value.column) == (1, "usage_start_time")


def test_a_json_array_is_named_as_such(tmp_path):
    """It was "row 1, column usage_start_time: unreadable timestamp '[{…'"."""
    import gzip
    import json

    records = [json.loads(line) for line in write_ndjson(export_rows()[:3], tmp_path / "x.json").read_text().splitlines()]
    for name, data in (("array.json", json.dumps(records).encode()), ("array.json.gz", gzip.compress(b"  " + json.dumps(records).encode()))):
        path = tmp_path / name
        path.write_bytes(data)
        with pytest.raises(InputError) as caught:
            read(path)
        assert caught.value.row == 1 and "a JSON array, not one record a line" in str(caught.value), name
