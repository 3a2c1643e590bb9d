"""What a file's header does contain, said beside what it lacks (rule 5: no silent misfit).

A "missing column" error alone leaves the user guessing; these hints name the nearest thing the file
has: the delimiter a one-column header seems to use, the columns spelled nearly as the missing ones,
the billing format whose columns the file has, or failing those the file's first columns.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence

# Another billing format's marker columns (lower case): a file given as one format whose columns
# are another's is told which. The order is the one `costaudit billing` sniffs in.
BILLING_MARKERS = (
    ("cur", ("lineitem/unblendedcost", "line_item_unblended_cost")),
    ("azure", ("costinbillingcurrency", "metercategory", "costinbillingcurrencycode")),
    ("focus", ("billedcost",)),
    ("gcp_billing", ("billing_account_id",)),
)

DELIMITERS = {";": "semicolons", "\t": "tabs", "|": "vertical bars"}
SHOWN = 120  # characters of the header quoted at most


def header_hint(header: Sequence[str], missing: Iterable[str], fmt: str | None = None) -> str:
    """A clause (``"; …"``) naming what the header has instead of ``missing``, or ``""``.

    ``fmt``: the billing format the file was read as; a header with another format's marker
    columns is said to be that format's."""
    header = [str(name) for name in header]
    delimiter = foreign_delimiter(header)
    if delimiter:
        return (f"; its header is one column, {clip(header[0])!r}: the file looks delimited by "
                f"{DELIMITERS[delimiter]}, not commas")
    other = billing_format_of(header)
    if fmt and other and other != fmt:
        return f"; its columns are those of a {other} export (format = \"{other}\")"
    near = nearest_columns(header, missing)
    if near:
        return "; nearest in the file: " + ", ".join(f"{want} ≈ {have}" for want, have in near)
    if not header:
        return "; the file has no column names"
    return f"; the file has {len(header)} column(s): {clip(', '.join(header))}"


def foreign_delimiter(header: Sequence[str]) -> str | None:
    """The delimiter a one-column header is split by, if it is one of :data:`DELIMITERS`."""
    if len(header) != 1:
        return None
    counts = {sep: header[0].count(sep) for sep in DELIMITERS}
    best = max(counts, key=lambda sep: counts[sep])
    return best if counts[best] else None


def billing_format_of(header: Sequence[str]) -> str | None:
    """The billing format whose marker columns the header has (:data:`BILLING_MARKERS`)."""
    names = {name.strip().lower() for name in header}
    return next((fmt for fmt, markers in BILLING_MARKERS if names & set(markers)), None)


def nearest_columns(header: Sequence[str], missing: Iterable[str]) -> list[tuple[str, str]]:
    """(missing name, the file's nearest spelling) for each missing name spelled nearly so."""
    lowered = {name.lower().replace("_", "").replace("/", ""): name for name in header}
    found = []
    for want in missing:
        key = str(want).lower().replace("_", "").replace("/", "")
        match = difflib.get_close_matches(key, list(lowered), n=1, cutoff=0.8)
        if match:
            found.append((str(want), lowered[match[0]]))
    return found


def clip(text: str) -> str:
    """``text`` cut to :data:`SHOWN` characters, marked where cut."""
    return text if len(text) <= SHOWN else text[:SHOWN - 1] + "…"


def utf16_hint(head: bytes) -> str:
    """A clause saying that bytes with NULs in them look like UTF-16 text, or ``""``."""
    sample = head[:64]
    bom = sample[:2] in (b"\xff\xfe", b"\xfe\xff")
    halves = len(sample) >= 8 and (sample[1::2].count(0) * 4 >= len(sample) or sample[0::2].count(0) * 4 >= len(sample))
    return ("; it looks like UTF-16 text (as Excel's \"Unicode Text\" saves): save it as UTF-8 CSV"
            if bom or halves else "")
