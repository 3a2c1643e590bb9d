"""A CUR 2.0 Parquet export whose MAP column (``resource_tags``, ``product``) is written as text or
as another type: JSON object text is read as the MAP it spells (as a CSV export's is); any other text
or type is named.

Before: a VARCHAR ``resource_tags`` column was read as no tag MAP (exit 0, every tag lost; cloudgen
eks 10205: gateway 0.00 USD, "tag keys present: none"), and so was one of any other type. Now
exit 1 naming the file, the column, the first line whose text is no JSON object and "expected a MAP
or a JSON object" (connectors/billing/cur_checks.py ``map_errors``).
"""
from __future__ import annotations

import duckdb
import pytest

from tests.builders import cur2_rows, write_cur2
from tests.hostile.harness import assert_named_error, costaudit


@pytest.mark.parametrize(("column", "value", "said"), [
    ("resource_tags", "CASE WHEN __r = 3 THEN 'team=ml' ELSE CAST(to_json(resource_tags) AS VARCHAR) END",
     "row 3, column resource_tags: not a JSON object: 'team=ml'"),
    ("resource_tags", "CASE WHEN __r = 2 THEN '[\"team\", \"ml\"]' ELSE CAST(to_json(resource_tags) AS VARCHAR) END",
     """row 2, column resource_tags: not a JSON object: '["team", "ml"]'"""),
    ("product", "CASE WHEN __r = 5 THEN '\"p5.48xlarge\"' ELSE CAST(to_json(product) AS VARCHAR) END",
     """row 5, column product: not a JSON object: '"p5.48xlarge"'"""),
    ("resource_tags", "CAST(__r AS BIGINT)", "column resource_tags: type BIGINT"),
])
def test_a_map_column_that_is_no_map_nor_json_object_names_its_file_and_column(tmp_path, column, value, said):
    source = write_cur2(tmp_path / "rows.parquet", cur2_rows())
    path = tmp_path / "export-00001.snappy.parquet"
    duckdb.sql(f"COPY (SELECT * EXCLUDE (__r) REPLACE ({value} AS {column}) FROM "
               f"(SELECT *, row_number() OVER () AS __r FROM read_parquet('{source}'))) TO '{path}' (FORMAT parquet)")
    assert_validate_names(tmp_path, path, said)


@pytest.mark.parametrize(("column", "value", "said"), [
    ("resource_tags", "CASE WHEN __r = 3 THEN 'team=ml' ELSE CAST(to_json(resource_tags) AS VARCHAR) END",
     "row 3, column resource_tags: not a JSON object: 'team=ml'"),
    ("product", "CASE WHEN __r = 5 THEN '{\"instance_type\": \"p5.48xlarge\"' ELSE CAST(to_json(product) AS VARCHAR) END",
     """row 5, column product: not a JSON object: '{"instance_type": "p5.48xlarge"'"""),
])
def test_a_csv_map_cell_that_is_no_json_object_names_its_row_and_column(tmp_path, column, value, said):
    """The CSV export's MAP columns are JSON text: a cell that is no JSON object was read as no MAP
    (its tags, or its product's instance type, lost at exit 0); now it is named as in a Parquet file."""
    source = write_cur2(tmp_path / "rows.parquet", cur2_rows())
    path = tmp_path / "export-00001.csv.gz"
    maps = ", ".join(f"CAST(to_json({c}) AS VARCHAR) AS {c}" for c in ("product", "resource_tags", "cost_category",
                                                                        "discount") if c != column)
    duckdb.sql(f"COPY (SELECT * EXCLUDE (__r) REPLACE ({value} AS {column}, {maps}) FROM "
               f"(SELECT *, row_number() OVER () AS __r FROM read_parquet('{source}'))) TO '{path}' (HEADER)")
    assert_validate_names(tmp_path, path, said)


def assert_validate_names(tmp_path, path, said: str) -> None:
    """`costaudit validate` on a case billing ``path`` (in ``tmp_path``) is exit 1 with one error line:
    the file, then ``said``, then what was expected."""
    (tmp_path / "case.toml").write_text('[case]\nname = "maps"\nwindow = ["2026-09-01", "2026-10-01"]\n'
                                        'currency = "USD"\nloaded_rate = 150\nstep = "1h"\n'
                                        f'[[billing]]\nname = "bill"\nformat = "cur"\npath = "{path.name}"\n')
    outcome = costaudit("validate", tmp_path, cwd=tmp_path)
    assert_named_error(outcome, path)
    assert outcome.stderr.strip().splitlines()[-1] == (
        f"costaudit: error: {path}: {said} (expected a MAP or a JSON object)")
