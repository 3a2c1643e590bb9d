"""The GPU split's per-line work as one portable query: lines placed on nodes and intervals in an
engine, money summed exactly per key, divided once on our side (METHOD §3).

The query is written once (DuckDB text over stand-in tables, :data:`TABLES`) and rendered with
sqlglot for DuckDB, BigQuery and Trino (Athena): :func:`render`. What the engine does, per line:

* its GPU count: its own (its fact's), else its resource key's (the largest any of the key's
  lines gives: a GCP core / RAM part line's, a line of no instance type);
* the nodes its instances cover, by its turn among the lines of its resource, period and meter
  (a scale set billed one row per VM, the VM not named, takes the resource's nodes in turn, as
  :func:`audit.gpu_lines.taken_in_turn` does; the turn, which pairs such rows with the VMs whose
  seen hours match their billed hours best, is worked out on our side: :mod:`audit.gpu_turns`);
* per (resource key, node, billing period, GPU count, time code, instances) the sums of its
  net, gross, priced and committed money (the net of lines a commitment discount bills) and the
  number of (line, node) placements: :data:`SUMS`.

What stays ours: a billing period's intervals and their parts of it (worked out once per period;
the engine is told only whether a line's period bills time in the window), what a line's quantities
and meter mean, computed once per distinct value and handed to the engine as small tables
(``split_facts``: GPU count, instances, and a time code, the index of the share of its period it
bills GPU time for in :class:`audit.line_facts.LineFacts`: Decimal rules with half-even rounding
that no two engines spell alike), and each resource's known nodes (``split_nodes``).
Money travels as integer limbs (:mod:`audit.split_limbs`), so every engine's sums are exact and
the same; the division by the period's seconds and the share happens once per key, in Python.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Mapping, Sequence

import numpy as np
import pandas as pd
import sqlglot
from sqlglot import exp

from audit.split_limbs import joined, limbs, scale_of
from connectors.billing.gcp_sql import split_table
from schemas.errors import UsageError

DIALECTS = ("duckdb", "bigquery", "trino")
TABLES = ("split_lines", "split_facts", "split_nodes", "split_seq")
MONEY = ("net", "gross", "priced", "committed")

# Every line with its facts, its GPU count (its own, else its key's) and its key's; then each
# (line, node) placement, by the line's turn (worked out on our side: audit/gpu_turns.py).
_PLACED = """
WITH keyed AS (
  SELECT l.*, f.instances, f.time_code,
    CASE WHEN f.gpus > 0 THEN f.gpus ELSE MAX(f.gpus) OVER (PARTITION BY l.rkey) END AS gpus,
    MAX(f.gpus) OVER (PARTITION BY l.rkey) AS key_gpus
  FROM split_lines AS l JOIN split_facts AS f ON f.fact = l.fact
), known AS (
  SELECT resource, MAX(known) AS known FROM split_nodes GROUP BY resource
), placed AS (
  SELECT k.*, s.i, COALESCE(n.node, '') AS node
  FROM keyed AS k
  JOIN split_seq AS s ON s.i < k.instances
  LEFT JOIN known AS c ON c.resource = k.resource
  LEFT JOIN split_nodes AS n ON n.resource = k.resource AND n.idx = CASE
    WHEN k.instances >= COALESCE(c.known, 0) THEN s.i
    ELSE MOD(k.turn * k.instances + s.i, c.known) END
)
"""

#: per key: the placements' money limbs summed, the number of placements, the first line. A key's
#: money goes to each interval of its period by the interval's part, on our side: the engine never
#: multiplies rows by intervals.
SUMS = _PLACED + """
SELECT p.rkey, p.node, p.period, p.gpus, p.time_code, p.instances,
  MIN(p.ord) AS first, MIN(p.i) AS i, COUNT(*) AS placements, {sums}
FROM placed AS p
WHERE p.parts AND p.gpus > 0
GROUP BY p.rkey, p.node, p.period, p.gpus, p.time_code, p.instances
ORDER BY first, i, p.node
"""

#: per resource key, in the order of its first line: that line's resource, instance type,
#: instances and turn, the key's GPU count, and whether any of its lines bills time in the window
COVERAGE = _PLACED + """
SELECT rkey, resource, kind, instances, turn, key_gpus, has_parts FROM (
  SELECT k.rkey, k.resource, k.kind, k.instances, k.turn, k.key_gpus, k.ord,
    MAX(CASE WHEN k.parts THEN 1 ELSE 0 END) OVER (PARTITION BY k.rkey) AS has_parts,
    ROW_NUMBER() OVER (PARTITION BY k.rkey ORDER BY k.ord) AS r
  FROM keyed AS k
) AS firsts
WHERE r = 1
ORDER BY ord
"""


@dataclass(frozen=True)
class Tables:
    """The engine's inputs (one frame per stand-in table) and the money's limb layout."""

    frames: Mapping[str, pd.DataFrame]
    scale: int
    limbs: int


def tables(line_rows: Mapping[str, Sequence], facts: pd.DataFrame, nodes_of_resource: Mapping[str, Sequence[str]]) -> Tables:
    """The stand-in tables: ``line_rows`` holds each line's ord, rkey, resource, period, meter,
    turn, fact, kind, parts (whether its period bills time in the window) and money (Decimals);
    ``facts`` (fact, gpus, instances, time_code) is ready; the known nodes come from telemetry."""
    money = [list(line_rows[m]) for m in MONEY]
    scale = scale_of(money)
    split = [limbs(values, scale) for values in money]
    count = max(len(columns) for columns in split)
    lines = pd.DataFrame({k: line_rows[k] for k in ("ord", "rkey", "resource", "period", "meter", "turn", "fact",
                                                  "kind", "parts")})
    for name, columns in zip(MONEY, split):
        for j in range(count):
            lines[f"{name}_{j}"] = columns[j] if j < len(columns) else np.zeros(len(lines), dtype=np.int64)
    used = set(lines["resource"])
    nodes = pd.DataFrame([(r, i, n, len(known)) for r, known in nodes_of_resource.items() if r in used
                          for i, n in enumerate(known)], columns=["resource", "idx", "node", "known"])
    most = int(facts["instances"].max()) if len(facts) else 1
    seq = pd.DataFrame({"i": range(max(1, most))})
    frames = {"split_lines": lines, "split_facts": facts, "split_nodes": _typed(nodes),
              "split_seq": seq}
    return Tables(frames, scale, count)


def _typed(nodes: pd.DataFrame) -> pd.DataFrame:
    return nodes.astype({"resource": object, "idx": "int64", "node": object, "known": "int64"})


def render(query: str, dialect: str, table_names: Mapping[str, str] | None = None, *, limbs: int) -> str:
    """``SUMS`` or ``COVERAGE`` as SQL of ``dialect``, each stand-in table named by ``table_names``
    (a BigQuery ``project.dataset.table``, a Trino ``[catalog.]schema.table``; unnamed: itself)."""
    if dialect not in DIALECTS:
        raise UsageError(f"unknown dialect {dialect!r}; known: {', '.join(DIALECTS)}")
    tree = _parsed(query, limbs).copy()
    for node in tree.find_all(exp.Table):
        if table_names and node.name in table_names:
            parts = split_table(table_names[node.name], dialect)
            names = dict(zip(("this", "db", "catalog"), [exp.to_identifier(p, quoted=True) for p in reversed(parts)]))
            for key in ("this", "db", "catalog"):
                node.set(key, names.get(key))
    return tree.sql(dialect=dialect, pretty=True)


@lru_cache(maxsize=None)
def _parsed(query: str, count: int) -> exp.Expr:
    # a limb sum fits 64 bits (below 10^9 a placement); cast, so no engine widens it (DuckDB's HUGEINT)
    sums = ", ".join(f"CAST(SUM(p.{m}_{j}) AS BIGINT) AS {m}_{j}" for m in MONEY for j in range(count))
    return sqlglot.parse_one(query.replace("{sums}", sums), read="duckdb")


def run_duckdb(prepared: Tables) -> tuple[list[tuple], list[tuple]]:
    """(coverage rows, key sums) of ``prepared`` in a bounded in-memory DuckDB session."""
    from connectors.duck import bound, session

    with session() as con:
        bound(con)
        for name, frame in prepared.frames.items():
            con.register(name, frame)
        cover = con.execute(render(COVERAGE, "duckdb", limbs=prepared.limbs)).fetchall()
        sums = con.execute(render(SUMS, "duckdb", limbs=prepared.limbs)).fetchall()
    return cover, sums


def key_sums(rows: Sequence[tuple], prepared: Tables) -> list[tuple]:
    """The engine's ``SUMS`` rows as (rkey, node, period, gpus, time_code, instances, placements,
    net, gross, priced, committed), the money put back together exactly."""
    out = []
    count = prepared.limbs
    for row in rows:
        sums = row[9:]
        money = [joined(sums[k * count:(k + 1) * count], prepared.scale) for k in range(len(MONEY))]
        out.append((*row[:6], int(row[8]), *money))
    return out


#: the engines :func:`audit.gpusplit.split_gpus` may walk the lines with, by name: each takes the
#: prepared tables and returns the (coverage, sums) rows of :data:`COVERAGE` and :data:`SUMS`
ENGINES: dict[str, Callable[[Tables], tuple[list[tuple], list[tuple]]]] = {"duckdb": run_duckdb}
