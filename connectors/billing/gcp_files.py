"""Files of one local GCP billing export that hold the same rows (no silent misfit).

A folder given as one ``gcp_billing`` source is read as one export: its files are shards of it.
A month-to-date export left beside the month's, or a shard copied twice, puts the same charges in
two files, and summing them counts that money twice with no word. GCP's rows carry no line id, so a
row is known by everything the reader takes from it (times, SKU, project, resource, labels, cost,
usage and credits): where two files share at least :data:`SHARED_SHARE` of the smaller one's rows
(and at least :data:`SHARED_MIN` of them) identical in all of these, the read stops, naming both
files and how many rows they share. A few identical rows in two shards of a real export (one hour's
identical charges split across files) stay below that and are read as they are.
"""
from __future__ import annotations

from pathlib import Path

from connectors.errors import InputError

SHARED_SHARE = 0.01
SHARED_MIN = 2


def shared_rows(con, relation: str, path: Path) -> None:
    """Raise an InputError where a file of ``relation`` (a read with a ``filename`` column over an
    export's files) has :data:`SHARED_SHARE` of its rows (and :data:`SHARED_MIN`) in other files."""
    con.execute(f"CREATE TEMP TABLE _gcp_rows AS SELECT DISTINCT filename AS f, hash(*COLUMNS(* EXCLUDE (filename))) "
                f"AS h FROM {relation}")
    try:
        found = con.execute(f"""
            WITH pairs AS (SELECT a.f, a.h, b.f AS other FROM _gcp_rows AS a
                           JOIN _gcp_rows AS b ON a.h = b.h AND a.f <> b.f),
                 sizes AS (SELECT f, count(*) AS n FROM _gcp_rows GROUP BY f)
            SELECT p.f, count(DISTINCT p.h) AS shared, s.n, min(p.other), count(DISTINCT p.other)
            FROM pairs AS p JOIN sizes AS s USING (f)
            GROUP BY p.f, s.n
            HAVING count(DISTINCT p.h) >= {SHARED_MIN} AND count(DISTINCT p.h) >= {SHARED_SHARE} * s.n
            ORDER BY count(DISTINCT p.h) / s.n DESC, p.f LIMIT 1""").fetchall()
    finally:
        con.execute("DROP TABLE _gcp_rows")
    if found:
        name, shared, rows, other, others = found[0]
        where = Path(other).name + (f" and {others - 1} other file(s)" if others > 1 else "")
        raise InputError(path, f"{shared:,} of the {rows:,} distinct rows of {Path(name).name} are identical to rows of "
                               f"{where}: the same charges twice (a month-to-date export beside the month's, or a "
                               "copied shard) would be summed twice", expected="each charge in one file of the export")
