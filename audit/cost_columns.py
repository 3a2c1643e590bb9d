"""Which source columns feed each FOCUS cost column of a billing source (audit.json ``sources[]``).

A CUR (read from files, ``cur``, or queried in Athena, ``athena``) has no FOCUS cost columns of its
own: the CUR connector maps them (:func:`connectors.billing.cur_sql.cost_columns`), per line item type
where the mapping differs. A FOCUS source spells them itself, and the other formats say theirs in
docs/case.md.
"""
from __future__ import annotations

from connectors.billing.cur_sql import cost_columns as cur_cost_columns

CUR_FORMATS = ("cur", "athena")


def cost_columns(spec) -> dict:
    """``{"cost_columns": {FOCUS column: {line item type or "*": CUR expression}}}`` for a CUR
    source, else ``{}`` (nothing added to its entry)."""
    if spec.kind != "billing" or spec.format not in CUR_FORMATS:
        return {}
    return {"cost_columns": cur_cost_columns()}
