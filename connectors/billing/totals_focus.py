"""The billing totals' views over one FOCUS file (CSV, CSV.gz or Parquet).

``line_groups`` groups the file's lines on the raw text of the columns the totals read, with the
window test as one more key and the amounts summed exactly; ``focus_lines`` turns the null
literals of those keys into NULL. See :mod:`connectors.billing.totals`.
"""
from __future__ import annotations

from datetime import datetime
from pathlib import Path

from connectors.billing import cur_sql as sql
from connectors.billing.focus_load import (
    check_last_line,
    csv_header,
    file_format,
    parquet_header,
    require,
    resolve_columns,
)
from connectors.billing.totals_sql import (
    SUM_TYPE,
    TEXT_COLUMNS,
    Column,
    as_text,
    carried_hours,
    clip_key,
    exact_text,
    group_sql,
    inexact,
    money_lines,
    money_sums,
    parquet_types,
    period_test,
    units,
)
from connectors.duck import quote_ident, quote_text


def focus_views(con, path: Path, window: tuple[datetime, datetime], exact: bool) -> str:
    """Views over one FOCUS file (CSV, CSV.gz or Parquet)."""
    fmt = file_format(path)
    if fmt == "parquet":
        header = parquet_header(con, path)
        dtypes = dict(parquet_types(con, [path]))
        refs = [quote_ident(name) for name in header]
        source = f"read_parquet({quote_text(str(path))}, hive_partitioning = false)"
    else:
        header = csv_header(path, fmt)
        check_last_line(path, fmt)
        dtypes = {}
        refs = [f"c{i}" for i in range(len(header))]
        source = sql.csv_read(sql.Layout(path, fmt, path.name, len(header), {}, {}, "'{}'", "0"))
    columns = resolve_columns(header, path)
    require(columns, path)
    found = {}
    for name, internal in {**columns.focus, **columns.extras}.items():
        index = int(internal[1:])
        ref = refs[index]
        found[name] = Column(ref, dtypes.get(header[index], "VARCHAR"), sql.text_or_null(ref))
    con.execute(f"CREATE TEMP VIEW line_groups AS {focus_groups_sql(found, source, window, exact)}")
    con.execute(f"CREATE TEMP VIEW focus_lines AS {focus_lines_sql()}")
    return "SELECT sum(n) FROM grouped"


def focus_groups_sql(found: dict[str, Column], source: str, window: tuple[datetime, datetime],
                     exact: bool) -> str:
    """GROUP BY of a FOCUS file's lines on the raw text columns, with exact sums."""
    keys = [f"{as_text(found[n]) if n in found else 'NULL::VARCHAR'} AS {n}" for n in TEXT_COLUMNS]
    period = (found["ChargePeriodStart"], found["ChargePeriodEnd"])
    line = {"w": period_test(*period, window), "_clip": clip_key(*period, window)}
    aggregates: dict[str, str] = {}
    fast = [found[n] for n in ("BilledCost", "EffectiveCost") if found[n].double and not exact]
    for name in ("BilledCost", "EffectiveCost"):
        line.update(money_lines(name, found[name], found[name] in fast))
        aggregates.update(money_sums(name, found[name] in fast))
    line["GpuQuantity"] = focus_quantity(found)
    line["_inexact"] = inexact([(units(c.ref), c.ref) for c in fast])
    aggregates["GpuQuantity"] = "sum(GpuQuantity)"
    aggregates["_inexact"] = "count_if(_inexact)"
    line["_carried"] = carried_hours(*period)
    aggregates["_carried"] = "count_if(_carried)"
    lines = f"SELECT {', '.join(keys)}, {', '.join(f'{e} AS {a}' for a, e in line.items())} FROM {source}"
    return group_sql(lines, list(TEXT_COLUMNS) + ["w", "_clip"], aggregates)


def focus_quantity(found: dict[str, Column]) -> str:
    """SQL, per line: the GPU-hour quantity of a Usage line (PricingQuantity, else ConsumedQuantity)."""
    pricing, consumed = (exact_text(found[n]) if n in found else f"NULL::{SUM_TYPE}"
                         for n in ("PricingQuantity", "ConsumedQuantity"))
    category = found["ChargeCategory"].ref
    return (f"CASE WHEN {category} = 'Usage' THEN CASE WHEN coalesce({pricing}, 0) <> 0 THEN {pricing} "
            f"ELSE coalesce({consumed}, 0) END END")


def focus_lines_sql() -> str:
    """FOCUS-named groups: null literals of the raw keys turned into NULL."""
    keys = [f"{sql.text_or_null(n)} AS {n}" for n in TEXT_COLUMNS]
    sums = [f"CASE WHEN {n}__nulls > 0 THEN NULL ELSE {n} END AS {n}" for n in ("BilledCost", "EffectiveCost")]
    return (f"SELECT w, _clip, {', '.join(keys)}, {', '.join(sums)}, GpuQuantity, _n AS Lines, _inexact AS Inexact, "
            "_carried AS Carried "
            "FROM line_groups")
