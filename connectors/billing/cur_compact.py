"""Sum the CUR lines no stage of the audit tells apart before they are mapped: view ``raw`` → table ``raw``.

A month's CUR repeats the same charge hour after hour (the fleet benchmark's 10 M lines are 558 k
lines once summed per day). The FOCUS reader sums those lines at its end anyway
(:func:`connectors.billing.focus_lines.grouped_sql`: lines that bill no GPU time, per UTC day of their
start, with every other column equal), so every stage before it (the mapping to FOCUS, the FOCUS
checks, the GPU rules, the grouping itself) worked on every line. This stage does the same sum on the
raw CUR lines first, once, in one hash aggregate, and the later stages work on its groups:

* **What is summed.** Lines equal in every CUR field but the five amounts the FOCUS costs and
  quantities come from (:data:`SUMMED_FIELDS`) and the usage period, on the same UTC day of their
  start and on the same side of the audit window (before, in, after). Each group keeps the period from
  its earliest start to its latest end, the exact sum of each amount (DECIMAL(38,20), as text without
  trailing zeros; a group of one line keeps its line's text), the file and row of its first line
  (its line id, and the row errors name) and ``_n``, the lines it stands for (``line_count``).
* **What stays a line of its own** (a group of one, its row a key), for the later stages to treat
  exactly as before: split cost allocation rows, commitment fees (their unused part is a row of its
  own), lines of a resource that may bill GPU time (the FOCUS reader's own GPU rules,
  :func:`connectors.billing.gpu_sql.gpu_line_sql`, run on the distinct values of the fields they read:
  GPU lines keep their hours), lines of a resource that a credit or refund line names (its hourly
  credit nets into the hour's line, which a sum over the day would hide, as the FOCUS reader's
  ``_credited`` keeps them), a line whose period ends before it starts (the FOCUS checks name it),
  and a line whose period straddles an edge of the window (:mod:`connectors.billing.clip` clips it by
  its own period).
* **On the files' own columns.** The keys are the Parquet columns the key fields and tags are read
  from (a tag MAP as a MAP; a ``product`` MAP by the values the fields look up), not their text: two
  values with one text (``''`` and ``NULL``) only make two groups, which the FOCUS reader joins.
  Groups span files only where the files are laid out alike (the parts of one export, summed in one
  query of at most :data:`RUN_LINES`: a day's charge split between two parts is one group; over
  all 26 parts of a 50 M-line export, 0.76 M rows against 1.22 M part by part);
  files laid out otherwise are summed apart, and the FOCUS reader joins their groups too.
* **When nothing is summed:** grain ``line``; a repeat hash seen twice (:meth:`cur_sql.Layout.repeat_key`:
  a candidate for a line repeated whole, which must reach the
  duplicate check as two lines; the hash pass hashes a few columns,
  :meth:`cur_sql.Layout.candidate_key`, and only where two lines share that are the whole rows
  hashed); an amount that does not fit DECIMAL(38,20) exactly (the FOCUS reader
  then keeps every line apart, :func:`connectors.billing.focus_lines.lossy_sums`).

The result is the table the reader would have built without this stage, to the row: the groups the
FOCUS reader forms from the summed rows are the groups it formed from the lines (a later sum over
exact sums is the same exact sum, and ``line_count`` adds the ``_n`` of its rows).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

import duckdb
import numpy as np

from connectors.billing import cur_sql as sql
from connectors.billing.focus_lines import CREDITED, SUM_TYPE, lossy_sql, sum_text_sql
from connectors.billing.focus_load import read_error
from connectors.billing.gpu_sql import ensure_gpu_instances, gpu_line_sql
from connectors.duck import quote_text, utc_text

# The CUR fields the FOCUS costs and quantities are taken from (:data:`cur_sql.COSTS`, PricingQuantity,
# ConsumedQuantity): summed. Every other field is a key, the unit prices among them.
SUMMED_FIELDS = ("line_item_unblended_cost", "reservation_effective_cost",
                 "savings_plan_savings_plan_effective_cost", "pricing_public_on_demand_cost",
                 "line_item_usage_amount")
# Line item types with a row for their unused part, or whose EffectiveCost depends on a field that
# is not summed: always lines of their own.
FEE_TYPES = ("SavingsPlanRecurringFee", "SavingsPlanUpfrontFee", "RIFee", "Fee")
# The fields the GPU rules read, as the FOCUS reader's kept lines spell them (mark_timed), from CUR
# fields: ChargeCategory, ChargeDescription, ResourceName, SkuId, x_InstanceType, x_UsageType.
PROBE = {"t": "line_item_line_item_type", "rid": "line_item_resource_id",
         "descr": "line_item_line_item_description", "sku": "product_sku",
         "itype": "product_instance_type", "usage": "line_item_usage_type"}
# Prefix of the fields as the per-file query names them (beside the file's own columns).
FIELD = "__f_"
# Prefix of a DOUBLE amount read as a DECIMAL without its text (:func:`fast_decimal`).
FAST = "__x_"
FAST_TYPE = "DECIMAL(18, 10)"
FAST_LIMIT = 2 ** 18
# The most lines one query sums (:func:`alike_runs`): its hash table grows with their groups (at
# 50 M lines, one query over all 26 parts peaked 550 MiB above one per part; with this cap, 60 MiB under).
RUN_LINES = 10_000_000
# A window for SQL that is only compared (:func:`alike_runs`).
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def compact(con, layouts: list[sql.Layout], window: tuple[datetime, datetime], grain: str | None = None) -> bool:
    """Replace view ``raw`` by a table of its summed lines (with columns ``_n`` and ``_lossy``, false)
    where that is exact; whether it did.

    ``raw`` is :func:`connectors.billing.cur.read_cur`'s view over the files' relations ``f<i>``; it has
    passed :func:`connectors.billing.cur.check_raw` (types, amounts and periods read). Each file is
    summed on its own columns (no text made of a value that the sum does not need); consecutive
    files laid out alike (:func:`alike_runs`: an export's parts) are summed together, so a day's
    charge split between two parts is one group. Where it sums nothing, every
    value of the files has been read (:func:`read_whole`), and ``_hashes`` holds whole-row hashes."""
    if (grain or "auto") != "auto":
        read_whole(con, layouts)
        return False
    read_all = repeated_hash(con)  # two lines share a candidate hash: the whole rows are hashed
    if read_all:
        read_whole(con, layouts)
        if repeated_hash(con):
            return False
    ensure_gpu_instances(con)
    probe_files(con, layouts)
    con.execute(f"CREATE TEMP TABLE _apart AS {apart_sql()}")
    con.execute("DROP TABLE _probed")
    con.execute("CREATE TEMP TABLE _compact AS SELECT *, 1::BIGINT AS _n, FALSE AS _lossy FROM raw LIMIT 0")
    for run in alike_runs(con, layouts):
        sum_files(con, layouts, run, window)
    lossy = con.execute("SELECT coalesce(bool_or(_lossy), FALSE) FROM _compact").fetchall()[0][0]
    if lossy:
        con.execute("DROP TABLE _compact")
        if not read_all:
            read_whole(con, layouts)
    else:  # each run's groups were inserted in file and row order, the runs in turn: raw is in file order
        con.execute("DROP VIEW raw")
        con.execute("ALTER TABLE _compact RENAME TO raw")
    con.execute("DROP TABLE _apart")
    return not lossy


def alike_runs(con, layouts: list[sql.Layout]) -> list[list[int]]:
    """The files in runs of consecutive ones that are summed together: the same columns in the same
    order and types (their relations ``f<i>``), and the same SQL summing them (:func:`group_sql`),
    so that their lines are one table's. A file unlike the one before it starts a run, and so does
    one that would take a run past :data:`RUN_LINES`."""
    runs: list[list[int]] = []
    seen, lines = None, 0
    for index, layout in enumerate(layouts):
        shape = (con.execute(f"DESCRIBE f{index}").fetchall(), group_sql(sql.shaped(layout), [0], (EPOCH, EPOCH)))
        count = con.execute(f"SELECT count(*) FROM f{index}").fetchall()[0][0]
        if runs and shape == seen and lines + count <= RUN_LINES:
            runs[-1].append(index)
            lines += count
        else:
            runs.append([index])
            lines = count
        seen = shape
    return runs


def sum_files(con, layouts: list[sql.Layout], run: list[int], window: tuple[datetime, datetime]) -> None:
    """Insert the groups of the files ``run`` (laid out alike, :func:`alike_runs`) into ``_compact``
    in file and row order: first with each DOUBLE amount summed as the DECIMAL :func:`fast_decimal`
    reads it (no text, no test of one); where some group has an amount that is not read so, they are
    summed again from the amounts' text (:func:`group_sql` ``fast=False``). A file whose tag sets
    cannot be made JSON (made here) is named: a run that fails is summed again file by file."""
    own = sql.shaped(layouts[run[0]])
    fast = any(name in own.doubles for name in SUMMED_FIELDS)
    files = ", ".join(str(index) for index in run)
    try:
        con.execute(f"INSERT INTO _compact {group_sql(own, run, window, fast=fast)} ORDER BY _file, _row")
        if fast and con.execute(f"SELECT bool_or(_lossy) FROM _compact WHERE _file IN ({files})").fetchall()[0][0]:
            con.execute(f"DELETE FROM _compact WHERE _file IN ({files})")
            con.execute(f"INSERT INTO _compact {group_sql(own, run, window)} ORDER BY _file, _row")
    except duckdb.Error as exc:
        if len(run) == 1:
            raise read_error(layouts[run[0]].path, layouts[run[0]].fmt, exc) from None
        con.execute(f"DELETE FROM _compact WHERE _file IN ({files})")
        for index in run:
            sum_files(con, layouts, [index], window)


def read_whole(con, layouts: list[sql.Layout]) -> None:
    """Table ``_hashes`` of every line's whole-row hash (:meth:`cur_sql.Layout.repeat_key`), reading
    every value of every file: where ``raw`` stays a view over the files, a value no earlier query
    read (the hash pass reads a few columns) must not fail a later query unnamed. A file that
    cannot be read is named."""
    con.execute("CREATE OR REPLACE TEMP TABLE _hashes (h UBIGINT)")
    for index, layout in enumerate(layouts):
        try:
            con.execute(f"INSERT INTO _hashes SELECT {sql.shaped(layout).repeat_key()} FROM f{index}")
        except duckdb.Error as exc:
            raise read_error(layout.path, layout.fmt, exc) from None


# Row hashes sorted per pass of the repeated-hash check (8 bytes each: 80 MB of hashes at a time).
HASHES_PER_PASS = 10_000_000


def repeated_hash(con) -> bool:
    """Whether two lines share a hash (table ``_hashes``: the candidate hash of the hash pass, or
    the whole row's, :func:`read_whole`): candidates for a line repeated whole,
    which the FOCUS reader must see as two lines. Each pass's hashes are sorted with numpy and
    neighbours compared: 0.2 s for 10 M hashes, where DuckDB's ``GROUP BY h HAVING count(*) > 1``
    took 1.7 s alone and 3 s beside the reader's other tables."""
    return len(repeated_values(con, "h", first=True)) > 0


def repeated_values(con, column: str, first: bool = False) -> np.ndarray:
    """The values of ``_hashes.column`` (not NULL) that two lines share (``first``: stop at the first
    pass that finds one). A large table is checked in passes over disjoint ranges of the hash, so
    the memory does not grow with the export."""
    rows = con.execute(f"SELECT count({column}) FROM _hashes").fetchall()[0][0]
    passes = max(1, -(-rows // HASHES_PER_PASS))

    def fetch(part: int) -> np.ndarray:
        where = f" AND {column} % {passes} = {part}" if passes > 1 else ""
        hashes = con.execute(f"SELECT {column} FROM _hashes WHERE {column} IS NOT NULL{where}").fetchnumpy()[column]
        return np.asarray(hashes, dtype=np.uint64)

    found: list[np.ndarray] = []
    with ThreadPoolExecutor(1) as sorter:  # a pass is sorted (numpy, one core) while the next is read
        pending = sorter.submit(shared_values, fetch(0))
        for part in range(1, passes):
            hashes = fetch(part)
            found.append(pending.result())
            if first and len(found[-1]):
                return found[-1]
            pending = sorter.submit(shared_values, hashes)
        found.append(pending.result())
    return np.concatenate(found)


def shared_values(hashes: np.ndarray) -> np.ndarray:
    """The values that occur more than once in ``hashes``, sorted, each once."""
    hashes = np.sort(hashes)
    return np.unique(hashes[1:][hashes[1:] == hashes[:-1]])


def lossy(own: sql.Layout) -> str:
    """SQL over a line of :func:`marked_sql`: some summed amount of it does not fit DECIMAL(38,20)
    exactly (an amount :func:`fast_decimal` read fits). The test of a DOUBLE's text is a CASE branch:
    DuckDB evaluates both sides of an AND in a projection, and only the rows a WHEN selects for its
    THEN (the test on every line's text was a fifth of the per-file sums)."""
    return "(" + " OR ".join(
        f"(CASE WHEN {FAST}{name} IS NULL THEN {lossy_sql(amount_text(own, name))} ELSE FALSE END)"
        if name in own.doubles
        else lossy_sql(amount_text(own, name)) for name in SUMMED_FIELDS) + ")"


def unread(own: sql.Layout) -> str:
    """SQL aggregate over lines of :func:`marked_sql` (the fast sums, :func:`group_sql`): some DOUBLE
    amount that is not NULL was not read by :func:`fast_decimal` (its text must be read), or some
    text amount does not fit DECIMAL(38,20) exactly. Counting what is not NULL costs no test per line."""
    tests = [f"count({own.sources[name]}) > count({FAST}{name})" for name in SUMMED_FIELDS if name in own.doubles]
    texts = [lossy_sql(amount_text(own, name)) for name in SUMMED_FIELDS if name not in own.doubles]
    if texts:
        tests.append(f"bool_or({' OR '.join(texts)})")
    return "(" + " OR ".join(tests) + ")"


def amount_text(own: sql.Layout, name: str) -> str:
    """SQL over a line of :func:`marked_sql`: the text of summed field ``name``, trimmed (a DOUBLE's
    text made here, only where an expression needs it)."""
    if name in own.doubles:
        return f"CAST({own.sources[name]} AS VARCHAR)"
    return f"trim({FIELD}{name})"


def fast_decimal(ref: str) -> str:
    """SQL: DOUBLE ``ref`` as the DECIMAL its shortest text reads as, without making the text, where
    that is sure; else NULL (the caller then reads the text).

    A decimal ``d`` of at most 10 places with ``CAST(d AS DOUBLE) = x`` is the value of x's shortest
    text when |x| < 2^18: two such decimals are 1e-10 apart, more than the spacing of doubles below
    2^18 (2^-34), so at most one of them rounds to x; the shortest text (at most 17 digits) reads
    as a decimal that rounds to x, and where it has at most 10 places it is that one, and where it
    has more, no decimal of 10 places rounds to x. However DuckDB rounds the cast, the check on the
    way back keeps only a decimal that rounds to x."""
    exact = f"CAST({ref} AS {FAST_TYPE})"
    return f"CASE WHEN abs({ref}) < {FAST_LIMIT} AND CAST({exact} AS DOUBLE) = {ref} THEN {exact} END"


def amount_sum(own: sql.Layout, name: str, fast: bool = False) -> str:
    """SQL aggregate over lines of :func:`marked_sql`: summed field ``name`` as text
    (:func:`connectors.billing.focus_lines.sum_text_sql`). ``fast``: a DOUBLE's sum is the sum of the
    DECIMAL(18, 10) values :func:`fast_decimal` read (DECIMAL(38, 10): its text without trailing
    zeros is the DECIMAL(38, 20) sum's); a line it did not read is left out, and :func:`unread` says so."""
    text = amount_text(own, name)
    if name not in own.doubles:
        return sum_text_sql(text)
    alone = f"CAST(any_value({own.sources[name]}) AS VARCHAR)"
    if fast:
        return sum_text_sql(text, value=f"{FAST}{name}", alone=alone)
    value = f"coalesce(CAST({FAST}{name} AS {SUM_TYPE}), TRY_CAST({text} AS {SUM_TYPE}))"
    return sum_text_sql(text, value=value, alone=alone)


def probe_key(prefix: str = "") -> str:
    """SQL: a line's key in ``_apart``: the hash of its resource id, or of the other fields the GPU
    rules read where it has none (nulls as '', as every rule reads them). Two keys that collide only
    keep more lines whole, which changes nothing but the time."""
    text = {name: f"coalesce({prefix}{field}, '')" for name, field in PROBE.items()}
    rid = text.pop("rid")
    return f"CASE WHEN {rid} <> '' THEN hash({rid}) ELSE hash({', '.join(text.values())}) END"


def apart_sql() -> str:
    """SELECT the keys (:func:`probe_key`) of the lines that keep their own periods, as
    :func:`connectors.billing.focus_lines.mark_timed` decides it: those that may bill GPU time (by
    the GPU rules on the line's own fields, or by a line of the same resource id: the core / RAM
    parts of a GPU machine), and those of a resource id with a line the FOCUS mapping makes a credit
    or refund (``_credited``: a resource's key is its id's hash, so the credit's key is every one of
    its lines' key). The rules read the distinct values of the fields' sources (table ``_probed``,
    :func:`probe_files`), never a text per line."""
    base = sql.base_columns()  # ChargeCategory over the line item type ``t``
    # A CUR names no resource: the FOCUS reader's ``text`` has an empty ResourceName between the two.
    named = (f"{base['ChargeCategory']} AS charge_category, nullif(itype, '') AS hint, usage, descr, "
             "descr || ' ' || '' || ' ' || sku AS text")
    fields = ", ".join(f"coalesce({field}, '') AS {name}" for name, field in PROBE.items())
    return f"""
    WITH seen AS (SELECT DISTINCT {probe_key()} AS k, {fields} FROM _probed
                  WHERE NOT {sql.is_split()}),
    rules AS (SELECT k, coalesce({gpu_line_sql()}, FALSE) AS _gpu,
                     rid <> '' AND coalesce(charge_category IN ({CREDITED}), FALSE) AS _credited
              FROM (SELECT *, {named} FROM seen))
    SELECT DISTINCT k FROM rules WHERE _gpu OR _credited
    """


# The fields the GPU rules and the split test read.
PROBED = (*PROBE.values(), "line_item_operation", "split_line_item_parent_resource_id")


def probe_files(con, layouts: list[sql.Layout]) -> None:
    """Table ``_probed``: the fields :data:`PROBED` (named as ``raw`` names them) of each distinct
    combination of their sources in each file, the lines' own fields, each combination once per
    file. A file whose columns cannot be read is named (the hash pass does not read them all)."""
    con.execute("CREATE OR REPLACE TEMP TABLE _probed AS SELECT "
                + ", ".join(f"NULL::VARCHAR AS {name}" for name in PROBED) + " LIMIT 0")
    for index, layout in enumerate(layouts):
        own = sql.shaped(layout)
        sources = sorted({own.sources[name] for name in PROBED if name in own.sources})
        alias = {source: f"__p{i}" for i, source in enumerate(sources)}
        fields = ", ".join(f"{own.text_of(name, alias[own.sources[name]])} AS {name}" if name in own.sources
                           else f"NULL::VARCHAR AS {name}" for name in PROBED)
        distinct = ", ".join(f"{source} AS {alias[source]}" for source in sources) or "1 AS __p"
        try:
            con.execute(f"INSERT INTO _probed SELECT {fields} FROM (SELECT DISTINCT {distinct} FROM f{index})")
        except duckdb.Error as exc:
            raise read_error(layout.path, layout.fmt, exc) from None


def whole(prefix: str, start: str, end: str) -> str:
    """SQL over a line (its fields after ``prefix``): it stays a line of its own."""
    fees = ", ".join(quote_text(t) for t in FEE_TYPES)
    return (f"({prefix}line_item_line_item_type IN ({fees}) OR {sql.is_split(prefix)} OR {end} < {start} "
            f"OR {probe_key(prefix)} IN (SELECT k FROM _apart))")


# A line's place in the export: its file's index times this, plus its row (a file has fewer rows).
POSITION = 2 ** 40


def marked_sql(own: sql.Layout, index: int) -> str:
    """SELECT every column of file relation ``f<index>``, its place ``__r`` (:data:`POSITION`), the
    fields this stage reads (``__f_<field>``: the sums, the period, what the GPU rules and
    :func:`whole` read) and the period as ``__s`` / ``__e``."""
    needed = [n for n in sql.FIELDS if n in SUMMED_FIELDS or n in sql.PERIOD or n in PROBE.values()
              or n in ("line_item_operation", "split_line_item_parent_resource_id")]
    fields = ", ".join([f"{own.exprs.get(name, 'NULL::VARCHAR')} AS {FIELD}{name}" for name in needed
                        if name not in own.doubles or name not in SUMMED_FIELDS]
                       + [f"{fast_decimal(own.sources[name])} AS {FAST}{name}" for name in SUMMED_FIELDS
                          if name in own.doubles])
    start, end = (period_of(own, name) for name in sql.PERIOD)
    place = f"{index} * {POSITION} + {sql.row_of(own)}"
    return f"SELECT *, {start} AS __s, {end} AS __e FROM (SELECT *, {place} AS __r, {fields} FROM f{index})"


# DuckDB types of a period column that become the same TIMESTAMPTZ cast directly or through their text.
TIMESTAMP_TYPES = ("TIMESTAMP", "TIMESTAMP WITH TIME ZONE")


def period_of(own: sql.Layout, name: str) -> str:
    """SQL over a line of :func:`marked_sql`: period field ``name`` as a TIMESTAMPTZ. A TIMESTAMP
    column (a Parquet export's) is cast directly, in the session's UTC, as its text would be read:
    no text is parsed (two parses a line were a fifth of the stage)."""
    if own.types.get(name, "").upper() in TIMESTAMP_TYPES:
        return f"CAST({own.sources[name]} AS TIMESTAMPTZ)"
    return f"CAST({FIELD}{name} AS TIMESTAMPTZ)"


def group_keys(own: sql.Layout) -> list[str]:
    """SQL of the file columns (and MAP lookups) a line's group is keyed on, as ``own`` reads them:
    every field's source but the summed amounts and the period, and the tag columns."""
    return sorted({own.sources[n] for n in sql.FIELDS if n in own.sources and n not in SUMMED_FIELDS
                   and n not in sql.PERIOD} | set(own.tag_sources))


def group_sql(own: sql.Layout, run: list[int], window: tuple[datetime, datetime], fast: bool = False) -> str:
    """SELECT the lines of the files ``run`` as rows of the new ``raw``, from their relations ``f<i>``
    laid out as ``own`` (:func:`alike_runs`): grouped on the file columns the key fields and tags are
    read from, the UTC day of the start and the side of the window; a line that stays whole
    (:func:`whole`) or straddles an edge of the window is a group of its own (its place is a key). A
    group's ``_file`` and ``_row`` are its first line's. Every row's ``_h`` is new and its own: no two
    lines shared a row hash.
    ``fast``: DOUBLE amounts are summed as :func:`fast_decimal` reads them, and ``_lossy`` says where
    that left a line out (:func:`unread`)."""
    lo, hi = (f"CAST({quote_text(utc_text(moment))} AS TIMESTAMPTZ)" for moment in window)
    first, last = sql.PERIOD
    keys = group_keys(own)
    side = f"CASE WHEN __s >= {hi} THEN 1 WHEN __s >= {lo} OR __e > {lo} THEN 0 ELSE -1 END"
    file, row = f"CAST(min(__r) // {POSITION} AS INTEGER)", f"min(__r) % {POSITION}"
    out = [f"{file} AS _file", f"{row} AS _row", f"hash({file}, {row}, 'summed') AS _h"]
    for name in sql.FIELDS:
        if name in SUMMED_FIELDS:
            out.append(f"{amount_sum(own, name, fast)} AS {name}")
        elif name == first:
            out.append(f"arg_min({FIELD}{name}, __s) AS {name}")
        elif name == last:
            out.append(f"arg_max({FIELD}{name}, __e) AS {name}")
        else:
            out.append(f"{own.exprs.get(name, 'NULL::VARCHAR')} AS {name}")
    out += [f"{own.tags} AS _tags", "count(*)::BIGINT AS _n", f"{unread(own) if fast else f'bool_or({lossy(own)})'} AS _lossy"]
    straddles = f"(__s < {lo} AND __e > {lo}) OR (__s < {hi} AND __e > {hi})"
    alone = f"CASE WHEN {whole(FIELD, '__s', '__e')} OR {straddles} THEN __r END"
    group = keys + ["epoch(date_trunc('day', __s))", side, alone]
    lines = " UNION ALL ".join(marked_sql(own, index) for index in run)
    return f"SELECT {', '.join(out)} FROM ({lines}) GROUP BY {', '.join(group)}"
