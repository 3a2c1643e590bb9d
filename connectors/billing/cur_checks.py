"""The CUR lines' own checks: line item types, amounts and usage periods that cannot be read.

Each check (:func:`raw_checks`) is SQL over a line that is true where the line fails it. Over the
files of an export (:func:`connectors.billing.cur.read_cur`) they are worked out in the pass that
reads each file once for its candidate hashes (:func:`hash_rows_sql`), as one flag per line
beside its hash; :func:`check_raw` then looks for the failing lines only where a line was flagged,
and a sound export is not scanned a second time. (Measured at 50 M lines: the separate scan took
5.4 s and the flags add about as much to the hash pass, so the files are read once less for no
time gained; the rates CUR 2.0 writes as text need a regular expression a line either way.) Over a
query's result (Athena's ``raw``) the checks scan ``raw`` itself.
"""
from __future__ import annotations

from connectors.billing import cur_sql as sql
from connectors.billing.cur_commitments import DATE_FIELDS
from connectors.billing.cur_tags import BAD_MAP, is_text, map_of_text
from connectors.billing.focus_checks import AMOUNT_RANGE, AMOUNT_TYPE, TIMESTAMP_SPAN
from connectors.billing.focus_load import NUMBER_PATTERN, TIMESTAMP_RANGE, text_or_null
from connectors.bounds import shown
from connectors.duck import MAX_ERRORS, quote_ident, quote_text
from connectors.errors import InputError

#: the table the hash pass fills (:func:`hash_rows_sql`): candidate hash, check flag, id hash
HASHES_TABLE = "CREATE TEMP TABLE _hashes (h UBIGINT, bad BOOLEAN, i UBIGINT)"


def hash_rows_sql(layouts: list[sql.Layout], index: int) -> str:
    """SELECT, per line of file relation ``f<index>``, its candidate hash ``h``
    (:meth:`cur_sql.Layout.candidate_key`) and ``bad``: whether it fails one of :func:`raw_checks`."""
    own = sql.shaped(layouts[index])
    failing = " OR ".join(f"({condition})" for condition, *_rest in raw_checks(layouts, typed=True))
    return (f"SELECT h, coalesce({failing}, FALSE) AS bad, i FROM "
            f"(SELECT {own.candidate_key()} AS h, {id_key(own)} AS i, {checked_columns(layouts, index)} FROM f{index})")


def map_errors(con, layout: sql.Layout, index: int) -> None:
    """An InputError for a Parquet file's MAP column (``product``, ``resource_tags``, ``tags``) that
    is neither a MAP nor JSON object text (naming its first line whose text is no JSON object): read
    as no MAP, its tags and product attributes would be lost with no word. A CSV file's MAP columns
    are JSON text, each cell checked as the file was read (:data:`cur_tags.BAD_MAP`)."""
    if layout.fmt != "parquet":
        csv_map_errors(con, layout, index)
        return
    for name, dtype, *_ in con.execute(f"DESCRIBE f{index}").fetchall():
        if name.lower() not in sql.MAP_COLUMNS or dtype.startswith("MAP"):
            continue
        expected = "a MAP or a JSON object"
        if not is_text(dtype):
            raise InputError(layout.path, f"type {dtype}", column=name, expected=expected)
        ref = quote_ident(name)
        bad = con.execute(f"SELECT {sql.ROW}, {ref} FROM f{index} WHERE {text_or_null(ref)} IS NOT NULL "
                          f"AND {map_of_text(ref)} IS NULL ORDER BY {sql.ROW} LIMIT 1").fetchall()
        if bad:
            raise InputError(layout.path, f"not a JSON object: {shown(bad[0][1])}", row=bad[0][0], column=name,
                             expected=expected)


def csv_map_errors(con, layout: sql.Layout, index: int) -> None:
    """:func:`map_errors` of a CSV file: its first line with a MAP cell that is no JSON object."""
    if not layout.csv_maps:
        return
    bad = con.execute(f"SELECT rowid + 1, {BAD_MAP} FROM f{index} WHERE {BAD_MAP} IS NOT NULL "
                      "ORDER BY rowid LIMIT 1").fetchall()
    if bad:
        column, text = bad[0][1].split(":", 1)
        raise InputError(layout.path, f"not a JSON object: {shown(text)}", row=bad[0][0], column=column,
                         expected="a MAP or a JSON object")


def flagged(con) -> bool:
    """Whether the hash pass (:func:`hash_rows_sql`, table ``_hashes``) flagged some line."""
    return bool(con.execute("SELECT EXISTS (SELECT 1 FROM _hashes WHERE bad)").fetchall()[0][0])


def check_raw(con, layouts: list[sql.Layout], from_files: bool = False) -> list[InputError]:
    """Line item types, amounts and usage periods that cannot be read, naming file, row and column.

    One scan flags every line that fails some check (table ``_bad``); each check then reads its
    first failures from there, in file order. ``from_files``: ``raw`` is
    :func:`connectors.billing.cur.read_cur`'s view over the files' relations, which are scanned
    instead (:func:`checked_sql`: a DOUBLE amount checked as a number, not as the text made of it),
    and only when the hash pass flagged a line (:func:`flagged`)."""
    if from_files and not flagged(con):
        return []
    checks = list(raw_checks(layouts, typed=from_files))
    flags = ", ".join(f"({condition}) AS b{i}, CASE WHEN {condition} THEN {value} END AS v{i}"
                      for i, (condition, value, *_rest) in enumerate(checks))
    failing = " OR ".join(f"({condition})" for condition, *_rest in checks)
    lines = f"({checked_sql(layouts)})" if from_files else "raw"
    con.execute(f"CREATE OR REPLACE TEMP TABLE _bad AS SELECT _file, _row, {flags} FROM {lines} WHERE {failing}")
    errors: list[InputError] = []
    for i, (_, _, field, message, expected) in enumerate(checks):
        limit = MAX_ERRORS - len(errors)
        if limit <= 0:
            break
        found = con.execute(f"SELECT _file, _row, v{i} FROM _bad WHERE b{i} ORDER BY _file, _row LIMIT {limit}")
        for index, row, value in found.fetchall():
            layout = layouts[index]
            text = message if value is None else f"{message} {shown(value)}"
            errors.append(InputError(layout.path, text, row=int(row), column=layout.spelling(field),
                                     expected=expected))
    con.execute("DROP TABLE _bad")
    return errors


def id_key(own: sql.Layout) -> str:
    """SQL: the hash pass's ``i``, a hash of a line's identity_line_item_id and identity_time_interval
    (:attr:`cur_sql.Layout.id_hash`), NULL where the file lacks either."""
    return own.id_hash or "NULL::UBIGINT"


def repeated_ids(con, layouts: list[sql.Layout]) -> list[tuple[int, str, str]]:
    """(row, column, note) of the first lines whose identity_line_item_id and identity_time_interval
    repeat an earlier line's with other usage dates: AWS bills a line item once per time interval,
    so one of the two is not the line it says it is; both are read as billed, and the note names
    them. The hash pass's ``i`` finds them (a sort of its 8-byte hashes: 0.1 s a million lines,
    against a read of about 45 s here, 0.2 %); the candidates' usage dates are then compared. (The
    ids themselves are not kept: a CSV file's table holds the fields and the hash.)"""
    from connectors.billing.cur_compact import repeated_values

    found = repeated_values(con, "i")
    start, end = sql.PERIOD
    parts = [f"SELECT {index} AS _file, {sql.row_of(own)} AS _row, {own.id_hash} AS i, {own.exprs[start]} AS s, "
             f"{own.exprs[end]} AS e FROM f{index} WHERE {own.id_hash} IN (SELECT i FROM _repeated)"
             for index, own in ((i, sql.shaped(layout)) for i, layout in enumerate(layouts)) if own.id_hash]
    if not len(found) or not parts:
        return []
    con.execute("CREATE OR REPLACE TEMP TABLE _repeated (i UBIGINT)")
    con.executemany("INSERT INTO _repeated VALUES (?)", [[int(v)] for v in found])
    rows = con.execute(
        "SELECT _file, _row, s, e, f0, r0, s0, e0, count(*) OVER () FROM (SELECT *, first_value(_file) OVER w AS f0, "
        "first_value(_row) OVER w AS r0, first_value(s) OVER w AS s0, first_value(e) OVER w AS e0 "
        f"FROM ({' UNION ALL '.join(parts)}) WINDOW w AS (PARTITION BY i ORDER BY _file, _row)) "
        f"WHERE s IS DISTINCT FROM s0 OR e IS DISTINCT FROM e0 ORDER BY _file, _row LIMIT {MAX_ERRORS}").fetchall()
    con.execute("DROP TABLE _repeated")
    out = []
    for i, (index, row, s, e, f0, r0, s0, e0, total) in enumerate(rows):
        layout = layouts[index]
        more = f" ({total} such lines in all)" if total > len(rows) and i == len(rows) - 1 else ""
        out.append((int(row), layout.spelling("identity_line_item_id"),
                    f"line {layout.label}:{row} repeats the {layout.spelling('identity_line_item_id')} and "
                    f"{layout.spelling('identity_time_interval')} of line {layouts[f0].label}:{r0} with other usage "
                    f"dates ({s} to {e}, not {s0} to {e0}): both are read as billed{more}"))
    return out


# The amounts a line must have, by line item type (SQL over the line's fields): checked as missing.
NEEDED = {"line_item_unblended_cost": "TRUE",
          "reservation_effective_cost": "line_item_line_item_type = 'DiscountedUsage'",
          "savings_plan_savings_plan_effective_cost": "line_item_line_item_type = 'SavingsPlanCoveredUsage'"}
# Prefix of a DOUBLE amount as its file holds it, beside the fields (:func:`checked_sql`).
NUMBER = "__d_"


def checked_fields(layouts: list[sql.Layout]) -> tuple[list[str], list[str]]:
    """(fields read as text, amounts) that :func:`raw_checks` reads."""
    present = {name for layout in layouts for name in layout.exprs}
    amounts = [n for n in sql.NUMERIC if n in present or n in NEEDED]
    return ["line_item_line_item_type", *sql.PERIOD, *(n for n in DATE_FIELDS if n in present)], amounts


def checked_columns(layouts: list[sql.Layout], index: int) -> str:
    """The SELECT list over file relation ``f<index>`` of what :func:`raw_checks` reads (``typed``):
    the fields as ``raw`` has them, and each amount twice: as text where its column is text, and as
    ``__d_<field>`` where it is a DOUBLE (the other one NULL). A DOUBLE's text is a number unless
    the DOUBLE is not finite, so no text is made to check it."""
    texts, amounts = checked_fields(layouts)
    own = sql.shaped(layouts[index])
    columns = [f"{own.exprs.get(name, 'NULL::VARCHAR')} AS {name}" for name in texts]
    for name in amounts:
        double = name in own.doubles
        columns.append(f"{'NULL::VARCHAR' if double else own.exprs.get(name, 'NULL::VARCHAR')} AS {name}")
        columns.append(f"{own.sources[name] if double else 'NULL::DOUBLE'} AS {NUMBER}{name}")
    return ", ".join(columns)


def checked_sql(layouts: list[sql.Layout]) -> str:
    """SELECT every line of the files' relations with ``_file``, ``_row`` and :func:`checked_columns`."""
    return " UNION ALL ".join(
        f"SELECT {index} AS _file, {sql.row_of(sql.shaped(layout))} AS _row, {checked_columns(layouts, index)} "
        f"FROM f{index}" for index, layout in enumerate(layouts))


def raw_checks(layouts: list[sql.Layout], typed: bool = False):
    """(condition, value, field, message, expected) of every check: SQL over a line of ``raw`` that
    is true where the line fails it, and the value the message shows (NULL: none). ``typed``: over
    a line of :func:`checked_sql`, whose DOUBLE amounts are checked as numbers."""
    known = ", ".join(quote_text(t) for t in sql.CATEGORY)
    kind = "line_item_line_item_type"
    yield (f"{kind} IS NULL OR ({kind} NOT IN ({known}) AND {kind} NOT LIKE '%{sql.DISCOUNT_SUFFIX}')", kind,
           kind, "unknown line item type", "one of " + ", ".join(sql.CATEGORY) + " or a *Discount type")
    pattern = quote_text(NUMBER_PATTERN)
    present = {name for layout in layouts for name in layout.exprs}
    for name in (n for n in sql.NUMERIC if n in present):
        text = f"{name} IS NOT NULL AND NOT regexp_full_match(trim({name}), {pattern})"
        if typed:
            number = NUMBER + name
            yield (f"CASE WHEN {number} IS NOT NULL THEN NOT isfinite({number}) ELSE ({text}) END",
                   f"coalesce({name}, CAST({number} AS VARCHAR))", name, "unparseable amount", "a decimal number")
        else:
            yield text, name, name, "unparseable amount", "a decimal number"
        # a number the audit cannot sum exactly: one error here, not one per FOCUS column it feeds
        wide = (f"{name} IS NOT NULL AND regexp_full_match(trim({name}), {pattern}) "
                f"AND TRY_CAST(trim({name}) AS {AMOUNT_TYPE}) IS NULL")
        if typed:
            number = NUMBER + name
            wide = f"CASE WHEN {number} IS NOT NULL THEN isfinite({number}) AND abs({number}) >= 1e18 ELSE ({wide}) END"
        yield wide, f"coalesce({name}, CAST({NUMBER + name} AS VARCHAR))" if typed else name, name, \
            "number out of range", AMOUNT_RANGE
    for name, when in NEEDED.items():
        missing = f"{name} IS NULL AND {NUMBER}{name} IS NULL" if typed else f"{name} IS NULL"
        yield (f"{missing} AND coalesce({when}, FALSE)", "NULL", name, "missing amount",
               "a decimal number on every line of this type")
    low, high = TIMESTAMP_RANGE
    def unparsed(name: str) -> str:
        return f"TRY_CAST({name} AS TIMESTAMPTZ) IS NULL"

    def out_of_range(name: str) -> str:
        ts = f"TRY_CAST({name} AS TIMESTAMPTZ)"
        return f"{ts} < TIMESTAMPTZ '{low}' OR {ts} >= TIMESTAMPTZ '{high}'"

    def unreadable(name: str) -> str:
        return f"{unparsed(name)} OR {out_of_range(name)}"

    for name in sql.PERIOD:
        yield (unparsed(name), name, name, "unparseable timestamp", "an ISO 8601 timestamp (no offset = UTC)")
        yield out_of_range(name), name, name, "timestamp out of the supported range", TIMESTAMP_SPAN
    # a commitment's term (METHOD §7's t_c) may be empty, never unreadable: a date read as "not known"
    # would move the plan's paybacks with no word
    for name in (n for n in DATE_FIELDS if n in present):
        yield (f"{name} IS NOT NULL AND ({unreadable(name)})", name, name, "unparseable commitment date",
               "an ISO 8601 timestamp (no offset = UTC), or empty")
