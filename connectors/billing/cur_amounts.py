"""SQL of the CUR connector's amounts: text ↔ DECIMAL, and a CASE by line item type
(:mod:`connectors.billing.cur_sql` maps with them; money is text or DECIMAL, never DOUBLE)."""
from __future__ import annotations

from connectors.duck import quote_text

DEC = "DECIMAL(38,20)"


def dec(column: str) -> str:
    """SQL: a text amount as DECIMAL (null → 0)."""
    return f"CAST(coalesce({column}, '0') AS {DEC})"


def dec_text(expr: str) -> str:
    """SQL: a DECIMAL as text without trailing zeros."""
    return f"regexp_replace(CAST({expr} AS VARCHAR), '\\.?0+$', '')"


def case_of(mapping: dict[str, str], default: str = "NULL") -> str:
    """SQL CASE over the line item type ``t``: {type: SQL expression}."""
    whens = " ".join(f"WHEN {quote_text(t)} THEN {expr}" for t, expr in mapping.items())
    return f"CASE t {whens} ELSE {default} END"
