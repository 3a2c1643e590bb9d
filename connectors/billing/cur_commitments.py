"""The terms of the commitments a CUR names → table ``commitments`` (``schemas.billing.ContractCommitment``).

A CUR line covered by a Savings Plan or a Reserved Instance, and the commitment's own fee lines,
carry the commitment's ARN with its term: ``savingsPlan/StartTime`` / ``EndTime`` and
``reservation/StartTime`` / ``EndTime`` (CUR 2.0 and Athena: ``savings_plan_end_time``,
``reservation_end_time``). These are the billing's commitment dates METHOD §7 reads for a saving
that lies on committed capacity (t_c: it starts when the commitment ends); the ARN is the lines'
CommitmentDiscountId, so the plan links each saving to the commitments its lines name.

One row per ARN: the earliest start and the latest end any line gives it (a term restated on a
later line is read at its longest). An ARN whose lines give no start or end is left out: its end is
not known, and the plan says so. A date that does not read as a timestamp is the reader's error,
naming its file, row and column (:func:`connectors.billing.cur_checks.raw_checks`).
"""
from __future__ import annotations

import pandas as pd

from connectors.duck import utc_series

#: (ARN field, start field, end field, ContractCommitmentType, ContractCommitmentCategory) per kind
KINDS = (("savings_plan_savings_plan_arn", "savings_plan_start_time", "savings_plan_end_time", "Savings Plan", "Spend"),
         ("reservation_reservation_arn", "reservation_start_time", "reservation_end_time", "Reserved Instance", "Usage"))
#: the fields this module reads beside the mapping's (cur_sql.FIELDS lists them)
DATE_FIELDS = tuple(name for kind in KINDS for name in kind[1:3])


def terms_sql() -> str:
    """SELECT id, type, category, start, end, currency per commitment ARN of table or view ``raw``."""
    parts = [f"SELECT {arn} AS id, '{kind}' AS type, '{category}' AS category, "
             f"TRY_CAST({start} AS TIMESTAMPTZ) AS s, TRY_CAST({end} AS TIMESTAMPTZ) AS e, "
             f"line_item_currency_code AS currency FROM raw WHERE {arn} IS NOT NULL AND {end} IS NOT NULL"
             for arn, start, end, kind, category in KINDS]
    return (f"SELECT id, type, category, min(s) AS start, max(e) AS \"end\", min(currency) AS currency "
            f"FROM ({' UNION ALL '.join(parts)}) GROUP BY id, type, category "
            "HAVING bool_and(s IS NOT NULL AND e IS NOT NULL) ORDER BY id")


def commitment_terms(con, currency: str) -> pd.DataFrame:
    """The ``commitments`` table of ``raw``'s commitment ARNs (empty where no line gives a term);
    ``currency``: the currency of lines that name none."""
    found = con.execute(terms_sql()).fetch_df()
    return pd.DataFrame({
        "row": pd.Series(range(1, len(found) + 1), dtype="int64"),
        "commitment_id": found["id"].astype("str"),
        "commitment_type": found["type"].astype("str"),
        "category": found["category"].astype("str"),
        "description": pd.Series(["the term the CUR's lines give it"] * len(found), dtype="str"),
        "cost": pd.Series([None] * len(found), dtype=object),
        "quantity": pd.Series([None] * len(found), dtype=object),
        "unit": pd.Series([""] * len(found), dtype="str"),
        "currency": found["currency"].fillna(currency).astype("str"),
        "start": utc_series(pd.to_datetime(found["start"], utc=True)),
        "end": utc_series(pd.to_datetime(found["end"], utc=True)),
        "contract_id": pd.Series([""] * len(found), dtype="str"),
        "contract_start": utc_series(pd.Series([pd.NaT] * len(found), dtype="datetime64[ns, UTC]")),
        "contract_end": utc_series(pd.Series([pd.NaT] * len(found), dtype="datetime64[ns, UTC]")),
    })
